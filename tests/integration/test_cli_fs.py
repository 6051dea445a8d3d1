"""The file commands of the strata CLI (src/cli/cmd_fs.c, cmd_copy.c):
ls, stat, mkdir, rm, mv, cat, put, get, cp, du, setlayout, getlayout and
status, against one 'strata local up' cluster of 3 storage daemons shared by
the module. Each test works under its own top-level directory."""

import hashlib
import os
import random
import re

import pytest

from conftest import STRATA, Cluster, run, sanitizer_reports, wait_until

MiB = 1 << 20


def _strata_fn(*args, timeout=60, env=None):
    return run([STRATA, *[str(a) for a in args]], timeout=timeout, env=env)


@pytest.fixture(scope="module")
def fs_cluster(tmp_path_factory):
    """One cluster for the module; stopped (and checked) at the end."""
    c = Cluster(tmp_path_factory.mktemp("clifs") / "cluster", _strata_fn)
    try:
        c.up(3, timeout=90)
    except BaseException:
        if (c.dir / "cluster.json").exists():
            c.down()
        raise
    yield c
    problems = c.stop_all()
    problems += c.sanitizer_reports()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def mgmt(fs_cluster):
    import json
    return json.loads((fs_cluster.dir / "cluster.json").read_text())["mgmt"]


@pytest.fixture
def fs(mgmt):
    """fs(*args, ok=None, env=None) -> CompletedProcess of 'strata ARGS' with
    STRATA_MGMT naming the cluster. ok=True/False asserts the exit status
    is 0 / 1. Fails on any sanitizer report of the CLI."""
    def fn(*args, ok=None, env=None, timeout=120):
        e = {"STRATA_MGMT": mgmt}
        e.update(env or {})
        r = _strata_fn(*args, timeout=timeout, env=e)
        assert not sanitizer_reports(r.stderr), r.stderr
        if ok is True:
            assert r.returncode == 0, "strata %s: %d\n%s%s" % (args, r.returncode, r.stdout, r.stderr)
        elif ok is False:
            assert r.returncode == 1, "strata %s: %d\n%s%s" % (args, r.returncode, r.stdout, r.stderr)
        return r
    return fn


@pytest.fixture
def top(request, fs):
    """A fresh top-level cluster directory named for the test."""
    name = "/" + re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)
    fs("rm", "-r", "-f", name)
    fs("mkdir", name, ok=True)
    return name


def sha(data):
    return hashlib.sha256(data).hexdigest()


def tree_digest(root):
    """{relative path: sha256 or 'dir'} of a local tree."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != ".":
            out[rel] = "dir"
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.normpath(os.path.join(rel, f))] = sha(fh.read())
    return out


def make_tree(root, seed=7):
    """Random content: empty files, a 10 MiB file, nested dirs, names with
    spaces, sizes around piece boundaries."""
    rnd = random.Random(seed)
    files = {
        "empty": 0,
        "big.bin": 10 * MiB,
        "piece plus one": 4 * MiB + 1,
        "a/one byte": 1,
        "a/b/c/deep.txt": 12345,
        "a/b/empty too": 0,
        "dir with spaces/file with spaces.dat": 70000,
        "dir with spaces/nested/x": 4096,
    }
    for rel, size in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rnd.randbytes(size))
    (root / "empty dir").mkdir()
    (root / "a" / "b" / "empty sub").mkdir()
    return files


def err_line(r):
    return r.stderr.strip().splitlines()


# ---------------------------------------------------------------------------
# Naming the cluster.

def test_cluster_from_mgmt_dir_and_env(fs_cluster, mgmt, tmp_path):
    r = _strata_fn("ls", "--mgmt", mgmt, "/")
    assert r.returncode == 0, r.stderr
    r = _strata_fn("ls", "--dir", fs_cluster.dir, "/")
    assert r.returncode == 0, r.stderr
    r = _strata_fn("ls", "/", env={"STRATA_MGMT": mgmt})
    assert r.returncode == 0, r.stderr
    # --mgmt wins over the environment.
    r = _strata_fn("ls", "--mgmt", mgmt, "/", env={"STRATA_MGMT": "127.0.0.1:1"})
    assert r.returncode == 0, r.stderr
    # A 'strata local up' directory stands for its address wherever an
    # address goes (the rule of strata_find_mgmt, shared with Python).
    r = _strata_fn("ls", "--mgmt", fs_cluster.dir, "/")
    assert r.returncode == 0, r.stderr
    r = _strata_fn("status", env={"STRATA_MGMT": str(fs_cluster.dir)})
    # 1: read, health not ok (earlier tests load the shared cluster).
    assert r.returncode in (0, 1), r.stderr
    assert "cluster    %s" % mgmt in r.stdout


def test_no_cluster_named_is_a_usage_error(tmp_path):
    env = {"STRATA_MGMT": ""}
    r = _strata_fn("ls", "/", env=env)
    assert r.returncode == 2
    assert "no cluster named" in r.stderr and "--mgmt" in r.stderr and "STRATA_MGMT" in r.stderr
    r = _strata_fn("ls", "--dir", tmp_path, "/", env=env)
    assert r.returncode == 1
    assert "no local cluster recorded in '%s'" % tmp_path in r.stderr


# ---------------------------------------------------------------------------
# Namespace commands.

def test_mkdir_ls_stat(fs, top):
    fs("mkdir", top + "/zeta", top + "/alpha", ok=True)
    fs("mkdir", "-p", top + "/mid/b/c", ok=True)
    fs("mkdir", "-p", top + "/mid/b", ok=True)      # -p: an existing dir is fine
    r = fs("ls", top, ok=True)
    assert r.stdout.split("\n")[:-1] == ["alpha", "mid", "zeta"]
    r = fs("ls", top + "/mid/b", ok=True)
    assert r.stdout == "c\n"
    r = fs("ls", "-l", top, ok=True)
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    for line, name in zip(lines, ["alpha", "mid", "zeta"]):
        f = line.split()
        assert f[0].startswith("d") and re.fullmatch(r"[d-][rwx-]{9}", f[0]), line
        assert f[1].isdigit()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", f[2]) and re.fullmatch(r"\d\d:\d\d", f[3])
        assert f[4] == name

    # Several paths: a header per directory.
    r = fs("ls", top + "/alpha", top + "/mid", ok=True)
    assert "%s/alpha:\n" % top in r.stdout and "%s/mid:\nb\n" % top in r.stdout

    r = fs("stat", top + "/mid", ok=True)
    assert "File: %s/mid" % top in r.stdout
    assert "Type: directory" in r.stdout
    for key in ("Size:", "Inode:", "Links:", "Mode:", "Uid:", "Gid:", "Access:", "Modify:",
                "Change:"):
        assert key in r.stdout, r.stdout
    assert re.search(r"Layout: chunk_size=\d+ stripe=\d+", r.stdout), r.stdout
    # Relative paths are taken from the root; trailing and double slashes
    # do not matter.
    r = fs("stat", top.lstrip("/") + "//mid/", ok=True)
    assert "File: %s/mid\n" % top in r.stdout


def test_chmod_chown(fs, top, tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    fs("put", tmp_path / "f", top + "/f", ok=True)
    fs("mkdir", top + "/d", ok=True)
    fs("chmod", "640", top + "/f", ok=True)
    fs("chmod", "1777", top + "/d", ok=True)
    fs("chown", "1234:4321", top + "/f", ok=True)
    fs("chown", "daemon", top + "/d", ok=True)      # a name this host knows (uid 1)
    r = fs("stat", top + "/f", ok=True)
    assert "Mode: 0640 (-rw-r-----)" in r.stdout, r.stdout
    assert re.search(r"Uid: 1234\b", r.stdout) and re.search(r"Gid: 4321\b", r.stdout), r.stdout
    r = fs("stat", top + "/d", ok=True)
    assert "Mode: 1777 (" in r.stdout and re.search(r"Uid: 1\b", r.stdout), r.stdout
    r = fs("chmod", "600", top + "/missing", ok=False)
    assert "No such file" in r.stderr, r.stderr
    # A token acting as another user may not give a file away.
    r = fs("token", "create", "--tenant", "u", "--uid", "1234", "--path", "rw:" + top,
           "--expires", "1h", ok=True)
    tok = r.stdout.strip().splitlines()[-1]
    r = fs("chown", "999", top + "/f", env={"STRATA_TOKEN": tok}, ok=False)
    assert "Operation not permitted" in r.stderr, r.stderr


def test_cat_and_ls_of_files(fs, top, tmp_path):
    data = b"hello, strata\n" * 1000
    (tmp_path / "f").write_bytes(data)
    fs("put", "-q", tmp_path / "f", top + "/f", ok=True)
    r = fs("cat", top + "/f", top + "/f", ok=True)
    assert r.stdout.encode() == data + data
    r = fs("ls", top + "/f", ok=True)
    assert r.stdout == top + "/f\n"
    r = fs("ls", "-l", top, ok=True)
    f = r.stdout.split()
    assert re.fullmatch(r"-[rwx-]{9}", f[0]), r.stdout
    assert int(f[1]) == len(data) and f[-1] == "f"
    r = fs("stat", top + "/f", ok=True)
    assert "Type: regular file" in r.stdout and "Size: %d\n" % len(data) in r.stdout


def test_error_messages(fs, top, tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    fs("put", "-q", tmp_path / "f", top + "/file", ok=True)
    fs("mkdir", "-p", top + "/full/sub", ok=True)

    cases = [
        (("ls", top + "/missing"), "cannot access '%s/missing': No such file or directory"),
        (("stat", top + "/missing"), "cannot stat '%s/missing': No such file or directory"),
        (("cat", top + "/missing"), "cannot open '%s/missing': No such file or directory"),
        (("rm", top + "/missing"), "cannot remove '%s/missing': No such file or directory"),
        (("mkdir", top + "/file"), "cannot create directory '%s/file': File exists"),
        (("mkdir", top + "/full"), "cannot create directory '%s/full': File exists"),
        (("mkdir", top + "/file/x"), "cannot create directory '%s/file/x': Not a directory"),
        (("mkdir", "-p", top + "/file/x/y"), "cannot create directory '%s/file/x/y': Not a directory"),
        (("rm", top + "/full"), "cannot remove '%s/full': Directory not empty"),
        (("cat", top + "/full"), "'%s/full': Is a directory"),
        (("mkdir", top + "/" + "n" * 300), "'%s/%s': File name too long" % ("%s", "n" * 300)),
        (("mv", top + "/missing", top + "/x"),
         "cannot move '%s/missing' to '%s/x': No such file or directory"),
        (("getlayout", top + "/missing"), "cannot get the layout of '%s/missing': No such file or directory"),
        (("du", top + "/missing"), "cannot access '%s/missing': No such file or directory"),
        (("cp", top + "/full", top + "/copy"), "cannot copy '%s/full': Is a directory (use -r)"),
    ]
    for args, msg in cases:
        r = fs(*args, ok=False)
        assert ("strata: " in r.stderr) and (msg.replace("%s", top) in r.stderr), (args, r.stderr)

    # ENOTDIR through a file in the middle of a path.
    r = fs("ls", top + "/file/x", ok=False)
    assert "cannot access '%s/file/x': Not a directory" % top in r.stderr

    # A failure does not stop the other arguments.
    fs("mkdir", top + "/gone", ok=True)
    r = fs("rm", top + "/missing", top + "/gone", ok=False)
    assert len(err_line(r)) == 1
    assert fs("ls", top + "/gone").returncode == 1


def test_rm(fs, top, tmp_path):
    (tmp_path / "t" / "a" / "b").mkdir(parents=True)
    (tmp_path / "t" / "a" / "b" / "f").write_bytes(b"1")
    (tmp_path / "t" / "g").write_bytes(b"2")
    fs("put", "-q", tmp_path / "t", top + "/t", ok=True)
    fs("mkdir", top + "/empty", ok=True)
    fs("rm", top + "/empty", ok=True)           # an empty directory without -r
    fs("rm", top + "/t/g", ok=True)
    assert fs("ls", top + "/t", ok=True).stdout == "a\n"
    fs("rm", "-r", top + "/t", ok=True)
    assert fs("ls", top, ok=True).stdout == ""
    fs("rm", "-f", top + "/missing", ok=True)
    fs("rm", "-rf", top + "/missing", top + "/missing2", ok=True)
    r = fs("rm", "-r", "/", ok=False)
    assert "refusing to remove '/'" in r.stderr
    r = fs("rm", "-rf", "//", ok=False)
    assert "refusing to remove '/'" in r.stderr


def test_mv(fs, top, tmp_path):
    (tmp_path / "f").write_bytes(b"moved")
    fs("put", "-q", tmp_path / "f", top + "/f", ok=True)
    fs("mv", top + "/f", top + "/g", ok=True)
    assert fs("ls", top, ok=True).stdout == "g\n"
    fs("mkdir", top + "/d", ok=True)
    fs("mv", top + "/g", top + "/d", ok=True)     # into an existing directory
    assert fs("cat", top + "/d/g", ok=True).stdout == "moved"
    fs("mv", top + "/d", top + "/e", ok=True)     # a directory
    assert fs("ls", top, ok=True).stdout == "e\n"
    # Onto a non-empty directory inside the target.
    fs("mkdir", "-p", top + "/x/y/z", ok=True)
    fs("mkdir", "-p", top + "/w/y", ok=True)
    r = fs("mv", top + "/w/y", top + "/x", ok=False)
    assert "cannot move '%s/w/y' to '%s/x/y': Directory not empty" % (top, top) in r.stderr
    r = fs("mv", top + "/e", top + "/x", top + "/e/g", ok=False)
    assert "is not a directory" in r.stderr


def test_du(fs, top, tmp_path):
    src = tmp_path / "t"
    files = make_tree(src)
    fs("put", "-q", src, top + "/t", ok=True)
    total = sum(files.values())
    r = fs("du", "-s", top + "/t", ok=True)
    assert r.stdout == "%d\t%d\t%s/t\n" % (total, len(files), top)
    r = fs("du", top + "/t", ok=True)
    lines = [l.split("\t") for l in r.stdout.splitlines()]
    by_path = {p: (int(b), int(n)) for b, n, p in lines}
    assert by_path[top + "/t"] == (total, len(files))
    assert by_path[top + "/t/a/b/c"] == (12345, 1)
    assert by_path[top + "/t/a"] == (12346, 3)
    assert by_path[top + "/t/empty dir"] == (0, 0)
    # Children come before their parents.
    paths = [p for _, _, p in lines]
    assert paths.index(top + "/t/a/b") < paths.index(top + "/t/a") < paths.index(top + "/t")
    r = fs("du", top + "/t/big.bin", ok=True)
    assert r.stdout == "%d\t1\t%s/t/big.bin\n" % (10 * MiB, top)


# ---------------------------------------------------------------------------
# Copying in, out and inside.

SUMMARY = re.compile(r"^(put|get): (\d+) file\(s\), (\d+) bytes \(.*\) in [\d.]+ s, [\d.]+ MB/s$",
                     re.M)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("jobs", ["1", "4"])
def test_put_get_tree_round_trip(fs, top, tmp_path, jobs):
    src = tmp_path / "src"
    files = make_tree(src, seed=int(jobs))
    want = tree_digest(src)
    total = sum(files.values())

    r = fs("put", "-j", jobs, src, top + "/up", ok=True)
    m = SUMMARY.search(r.stdout)
    assert m and m.group(1) == "put" and int(m.group(2)) == len(files) and \
        int(m.group(3)) == total, r.stdout
    assert fs("ls", top + "/up", ok=True).stdout.splitlines() == sorted(
        ["a", "big.bin", "dir with spaces", "empty", "empty dir", "piece plus one"])

    out = tmp_path / "out"
    out.mkdir()
    r = fs("get", "-j", jobs, top + "/up", out, ok=True)
    m = SUMMARY.search(r.stdout)
    assert m and m.group(1) == "get" and int(m.group(2)) == len(files) and \
        int(m.group(3)) == total, r.stdout
    assert tree_digest(out / "up") == want

    # Again onto the same names: files are replaced, not appended to.
    r = fs("put", "-q", "-j", jobs, src, top + "/up2", ok=True)
    assert r.stdout == ""
    (src / "big.bin").write_bytes(b"short now")
    fs("put", "-q", src / "big.bin", top + "/up2/big.bin", ok=True)
    fs("get", "-q", top + "/up2/big.bin", out / "big.bin", ok=True)
    assert (out / "big.bin").read_bytes() == b"short now"


def test_put_get_files_and_destinations(fs, top, tmp_path):
    a = tmp_path / "a.bin"
    b = tmp_path / "b c.bin"
    a.write_bytes(os.urandom(300000))
    b.write_bytes(b"")
    # One file to a new name.
    fs("put", "-q", a, top + "/renamed", ok=True)
    # Several into a directory that does not exist yet.
    fs("put", "-q", a, b, top + "/many/", ok=True)
    assert fs("ls", top + "/many", ok=True).stdout.splitlines() == ["a.bin", "b c.bin"]
    # Into an existing directory.
    fs("put", "-q", b, top + "/many", ok=True)
    # To a missing parent: an error naming the file.
    r = fs("put", "-q", a, top + "/no/such/dir/x", ok=False)
    assert "cannot create '%s/no/such/dir/x': No such file or directory" % top in r.stderr
    # A missing local source is reported; the others still go.
    r = fs("put", "-q", tmp_path / "missing", a, top + "/mixed/", ok=False)
    assert "cannot access '%s': No such file or directory" % (tmp_path / "missing") in r.stderr
    assert fs("ls", top + "/mixed", ok=True).stdout == "a.bin\n"

    # Several sources: the local directory is created when missing.
    out = tmp_path / "out"
    fs("get", "-q", top + "/renamed", top + "/many/b c.bin", out, ok=True)
    assert (out / "renamed").read_bytes() == a.read_bytes()
    assert (out / "b c.bin").read_bytes() == b""
    r = fs("get", "-q", top + "/missing", out, ok=False)
    assert "cannot access '%s/missing': No such file or directory" % top in r.stderr


def test_cp_inside_the_cluster(fs, top, tmp_path):
    src = tmp_path / "src"
    make_tree(src, seed=3)
    want = tree_digest(src)
    fs("put", "-q", src, top + "/orig", ok=True)
    fs("cp", top + "/orig/big.bin", top + "/big copy", ok=True)
    fs("cp", "-r", top + "/orig", top + "/clone", ok=True)
    out = tmp_path / "out"
    out.mkdir()
    fs("get", "-q", top + "/clone", top + "/big copy", out, ok=True)
    assert tree_digest(out / "clone") == want
    with open(src / "big.bin", "rb") as f:
        assert sha((out / "big copy").read_bytes()) == sha(f.read())
    # Into an existing directory keeps the name.
    fs("mkdir", top + "/d", ok=True)
    fs("cp", top + "/orig/empty", top + "/d", ok=True)
    assert fs("ls", top + "/d", ok=True).stdout == "empty\n"
    r = fs("cp", "-r", top + "/orig", top + "/orig/inside", ok=False)
    assert "into itself" in r.stderr
    r = fs("cp", top + "/missing", top + "/x", ok=False)
    assert "cannot access '%s/missing': No such file or directory" % top in r.stderr


# ---------------------------------------------------------------------------
# Layout and status.

@pytest.mark.timeout(300)
def test_setlayout_getlayout(fs, top, tmp_path):
    fs("mkdir", top + "/small", ok=True)
    r = fs("setlayout", top + "/small", "--chunk-size", "64K", "--stripe", "2", ok=True)
    assert r.stdout == "%s/small: chunk_size=65536 stripe=2\n" % top
    r = fs("getlayout", top + "/small", ok=True)
    assert r.stdout == "%s/small: chunk_size=65536 stripe=2\n" % top
    # Only one field: the other is kept.
    fs("setlayout", top + "/small", "--stripe", "3", ok=True)
    assert fs("getlayout", top + "/small", ok=True).stdout == \
        "%s/small: chunk_size=65536 stripe=3\n" % top
    # New files take the directory's layout; many small chunks round-trip.
    data = os.urandom(3 * MiB + 123)
    (tmp_path / "f").write_bytes(data)
    fs("put", "-q", tmp_path / "f", top + "/small/f", ok=True)
    r = fs("stat", top + "/small/f", ok=True)
    assert "Layout: chunk_size=65536 stripe=3" in r.stdout, r.stdout
    fs("get", "-q", top + "/small/f", tmp_path / "back", ok=True)
    assert (tmp_path / "back").read_bytes() == data

    for args in (["--chunk-size", "3M"], ["--chunk-size", "32K"], ["--chunk-size", "128M"],
                 ["--chunk-size", "lots"], ["--stripe", "257"], ["--stripe", "-1"], []):
        r = fs("setlayout", top + "/small", *args)
        assert r.returncode == 2, (args, r.stderr)
    r = fs("setlayout", top + "/missing", "--stripe", "2", ok=False)
    assert "cannot set the layout of '%s/missing': No such file or directory" % top in r.stderr


def test_status(fs):
    # Earlier tests load the shared cluster: a node may be rejoining.
    wait_until(lambda: re.search(r"^health\s+ok", fs("status").stdout, re.M), 60, 0.5,
               "the shared cluster to be healthy")
    r = fs("status", ok=True)
    out = r.stdout
    for key in ("cluster", "nodes", "targets", "chains", "capacity", "namespace", "health"):
        assert re.search(r"^%s\s" % key, out, re.M), out
    m = re.search(r"^chains\s+(?:\d+ healthy of )?(\d+) \(replication (\d+)\)", out, re.M)
    assert m and int(m.group(1)) >= 1 and int(m.group(2)) == 3, out
    assert re.search(r"^nodes\s+3 up of 3", out, re.M), out
    assert re.search(r"^targets\s+3 serving of 3", out, re.M), out
    assert re.search(r"^NODE\s+ADDRESS\s+STATE", out, re.M), out
    assert re.search(r"^health\s+ok", out, re.M), out
    assert fs("status", "extra").returncode == 2


# ---------------------------------------------------------------------------
# Usage errors: exit 2, before touching the cluster.

@pytest.mark.parametrize("args,word", [
    (["ls", "--bogus"], "unknown option"),
    (["ls", "-z", "/"], "unknown option '-z'"),
    (["rm", "-l", "/x"], "unknown option"),
    (["stat"], "usage: strata stat"),
    (["mkdir"], "usage: strata mkdir"),
    (["rm"], "usage: strata rm"),
    (["mv", "/a"], "usage: strata mv"),
    (["cat"], "usage: strata cat"),
    (["put", "/tmp"], "usage: strata put"),
    (["get", "/x"], "usage: strata get"),
    (["cp", "/x"], "usage: strata cp"),
    (["put", "-j", "0", "/tmp", "/x"], "-j"),
    (["put", "-j", "many", "/tmp", "/x"], "-j"),
    (["get", "-j"], "needs a value"),
    (["getlayout"], "usage: strata getlayout"),
    (["setlayout", "/d"], "usage: strata setlayout"),
    (["ls", "--chunk-size", "1M", "/"], "unknown option"),
    (["ls", "--mgmt"], "needs a value"),
    (["chmod", "755"], "usage: strata chmod"),
    (["chmod", "789", "/x"], "'789' is not an octal mode"),
    (["chmod", "17777", "/x"], "is not an octal mode"),
    (["chown", "1"], "usage: strata chown"),
    (["chown", "no-such-user-here", "/x"], "'no-such-user-here' is not USER[:GROUP]"),
    (["chown", ":", "/x"], "is not USER[:GROUP]"),
])
def test_usage_errors(args, word):
    r = _strata_fn(*args, env={"STRATA_MGMT": "127.0.0.1:1"})
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert word in r.stderr, (args, r.stderr)
    assert r.stderr.startswith("strata: ")


def test_help_lists_the_file_commands():
    r = _strata_fn("--help")
    assert r.returncode == 0
    for cmd in ("ls", "stat", "mkdir", "rm", "mv", "cat", "put", "get", "cp", "du",
                "setlayout", "getlayout", "status", "chmod", "chown"):
        assert re.search(r"^  %s\b" % cmd, r.stdout, re.M), cmd
