"""strata-fuse (src/fuse) on real mounts of a 'strata local up' cluster of 3
storage daemons (R=3): coreutils, Python file I/O, concurrent writers,
close-to-open across two mounts, fio with crc32c verification, error codes,
and the failure cases (SIGTERM, a crash, a storage node lost, the cluster
gone).

Skips, with the reason, where /dev/fuse, fusermount3 or the strata-fuse
binary (built only when libfuse3 is installed) is missing. Every mount is
unmounted in teardown (fusermount3 -u, then -uz)."""

import ctypes
import errno
import hashlib
import json
import os
import socket
import stat
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BUILD, REGISTRY, Cluster, LogFile, run, sanitizer_reports, spawn, STRATA

FUSE_BIN = BUILD / "src" / "fuse" / "strata-fuse"
FUSERMOUNT = shutil.which("fusermount3")
MiB = 1 << 20


def _skip_reason():
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not FUSERMOUNT:
        return "fusermount3 is missing (apt-get install fuse3)"
    if not os.access(FUSE_BIN, os.X_OK):
        return "%s was not built (libfuse3-dev missing at configure time)" % FUSE_BIN
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def _is_mounted(path):
    path = os.path.realpath(str(path))
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                if line.split()[4] == path:
                    return True
    except OSError:
        pass
    return False


def _unmount(path):
    """fusermount3 -u, then a lazy -uz if the mount is busy or dead."""
    if not _is_mounted(path):
        return True
    for flags in ("-u", "-uz"):
        try:
            subprocess.run([FUSERMOUNT, flags, str(path)], timeout=15,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass
        if not _is_mounted(path):
            return True
    return False


class Mount(LogFile):
    """One strata-fuse in the foreground, logging to LOG."""

    def __init__(self, mgmt, path, extra=()):
        self.mgmt = mgmt
        self.path = Path(path)
        self.log_path = self.path.parent / (self.path.name + ".log")
        self.extra = list(extra)
        self.proc = None

    def start(self, timeout=60):
        self.path.mkdir(parents=True, exist_ok=True)
        argv = [FUSE_BIN, self.path, "--mgmt", self.mgmt, "-f", "--log", self.log_path,
                *self.extra]
        self.proc = spawn(argv, self.log_path, "strata-fuse %s" % self.path)
        deadline = time.monotonic() + timeout
        while not _is_mounted(self.path):
            if self.proc.poll() is not None:
                REGISTRY.discard(self.proc.pid)
                raise AssertionError("strata-fuse exited with %d; log:\n%s"
                                     % (self.proc.returncode, self.log))
            if time.monotonic() > deadline:
                raise AssertionError("strata-fuse did not mount within %d s; log:\n%s"
                                     % (timeout, self.log))
            time.sleep(0.05)
        return self

    def wait_exit(self, timeout=20):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("strata-fuse pid %d still running after %d s; log:\n%s"
                                 % (self.proc.pid, timeout, self.log))
        REGISTRY.discard(self.proc.pid)
        return rc

    def stop(self):
        """Unmounts and waits for the daemon; returns a list of problems."""
        problems = []
        if self.proc is None:
            return problems
        if not _unmount(self.path):
            problems.append("could not unmount %s" % self.path)
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                problems.append("strata-fuse did not exit within 30 s of the unmount; log:\n"
                                + self.log[-3000:])
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
                _unmount(self.path)
        REGISTRY.discard(self.proc.pid)
        reports = sanitizer_reports(self.log)
        if reports:
            problems.append("sanitizer report in %s:\n%s" % (self.log_path, self.log[-6000:]))
        return problems


def _strata_fn(*args, timeout=90, env=None):
    return run([STRATA, *[str(a) for a in args]], timeout=timeout, env=env)


@pytest.fixture(scope="module")
def fuse_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("fuse") / "cluster", _strata_fn)
    try:
        c.up(3, timeout=90)
    except BaseException:
        if (c.dir / "cluster.json").exists():
            c.down()
        raise
    yield c
    problems = c.stop_all() + c.sanitizer_reports()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _mgmt(c):
    return json.loads((c.dir / "cluster.json").read_text())["mgmt"]


def _mount_factory(base):
    """make(mgmt, name='mnt', extra=()) -> Mount (started) under base, and
    the function that unmounts them all (returns the problems)."""
    made = []

    def make(mgmt, name="mnt", extra=()):
        m = Mount(mgmt, base / name, extra)
        made.append(m)
        return m.start()

    def stop_all():
        problems = []
        for m in made:
            problems += m.stop()
        return problems

    return make, stop_all


@pytest.fixture
def mounts(tmp_path, request):
    """mount(mgmt, name='mnt', extra=()) -> Mount (started). All are
    unmounted at teardown."""
    make, stop_all = _mount_factory(tmp_path)
    yield make
    problems = stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def mnt(fuse_cluster, mounts, request):
    """A mount of the shared cluster, with a fresh top directory for the
    test; returns that directory's Path."""
    m = mounts(_mgmt(fuse_cluster))
    top = m.path / request.node.name.replace("[", "_").replace("]", "")
    top.mkdir()
    return top


def _tree_digest(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _make_tree(root, rng):
    root.mkdir(parents=True)
    for d in range(3):
        sub = root / ("dir%d" % d) / "inner"
        sub.mkdir(parents=True)
        for i in range(5):
            size = rng.choice([0, 1, 4095, 4096, 70000, 1 * MiB + 17])
            (sub / ("f%d.bin" % i)).write_bytes(rng.randbytes(size))
        (root / ("dir%d" % d) / "top.txt").write_text("dir %d\n" % d)
    (root / "big.bin").write_bytes(rng.randbytes(5 * MiB + 3))
    os.symlink("big.bin", root / "link")


def _sh(cmd, cwd=None, timeout=120):
    r = subprocess.run(cmd, shell=True, cwd=cwd, timeout=timeout, capture_output=True,
                       text=True)
    assert r.returncode == 0, "%s: %d\n%s%s" % (cmd, r.returncode, r.stdout, r.stderr)
    return r.stdout


# ---------------------------------------------------------------------------

@pytest.mark.timeout(240)
def test_coreutils(mnt, tmp_path):
    rng = random.Random(6)
    src = tmp_path / "src"
    _make_tree(src, rng)
    want = _tree_digest(src)

    _sh("cp -a %s %s/copy" % (src, mnt))
    assert _tree_digest(mnt / "copy") == want
    out = _sh("ls -l %s/copy" % mnt)
    assert "big.bin" in out and "link -> big.bin" in out
    _sh("sha256sum big.bin dir0/inner/f0.bin", cwd=mnt / "copy")

    _sh("mv %s/copy %s/moved" % (mnt, mnt))
    assert not (mnt / "copy").exists()
    assert _tree_digest(mnt / "moved") == want

    # tar out of the mount, and back into it
    _sh("tar cf %s/t.tar -C %s moved" % (tmp_path, mnt))
    _sh("mkdir %s/untar && tar xf %s/t.tar -C %s/untar" % (mnt, tmp_path, mnt))
    assert _tree_digest(mnt / "untar" / "moved") == want
    _sh("tar cf %s/in.tar -C %s untar" % (mnt, mnt))
    _sh("mkdir %s/back && tar xf %s/in.tar -C %s/back" % (tmp_path, mnt, tmp_path))
    assert _tree_digest(tmp_path / "back" / "untar" / "moved") == want

    # dd, with a partial overwrite in place
    _sh("dd if=/dev/urandom of=%s/dd.bin bs=1M count=8 status=none" % mnt)
    data = bytearray((mnt / "dd.bin").read_bytes())
    assert len(data) == 8 * MiB
    _sh("dd if=/dev/zero of=%s/dd.bin bs=4096 count=3 seek=5 conv=notrunc status=none" % mnt)
    data[5 * 4096:8 * 4096] = bytes(3 * 4096)
    assert (mnt / "dd.bin").read_bytes() == bytes(data)

    _sh("rm -r %s/moved %s/untar" % (mnt, mnt))
    assert sorted(os.listdir(mnt)) == ["dd.bin", "in.tar"]


@pytest.mark.timeout(120)
def test_python_file_io(mnt):
    p = mnt / "a.txt"
    with open(p, "w") as f:
        f.write("hello\n")
    with open(p, "a") as f:
        f.write("world\n")
    assert p.read_text() == "hello\nworld\n"
    with open(p, "r+b") as f:
        f.seek(100)
        f.write(b"X")
        f.flush()
        os.fsync(f.fileno())
        assert os.fstat(f.fileno()).st_size == 101
        f.seek(0)
        assert f.read(6) == b"hello\n"
    data = p.read_bytes()
    assert data[:12] == b"hello\nworld\n" and data[12:100] == bytes(88) and data[100:] == b"X"

    os.truncate(p, 5)
    assert p.read_bytes() == b"hello"
    os.chmod(p, 0o640)
    assert (os.stat(p).st_mode & 0o777) == 0o640
    os.utime(p, (1000000000, 1200000000))
    assert int(os.stat(p).st_mtime) == 1200000000
    os.chown(p, 1234, 5678)
    st = os.stat(p)
    assert (st.st_uid, st.st_gid) == (1234, 5678)

    os.mkdir(mnt / "sub")
    os.replace(p, mnt / "sub" / "b.txt")
    assert os.listdir(mnt / "sub") == ["b.txt"]
    os.symlink("sub/b.txt", mnt / "ln")
    assert os.readlink(mnt / "ln") == "sub/b.txt"
    assert (mnt / "ln").read_bytes() == b"hello"
    assert os.lstat(mnt / "ln").st_size == len("sub/b.txt")

    # a write still open is visible to stat in this mount
    with open(mnt / "growing", "wb") as f:
        f.write(b"z" * 300000)
        f.flush()
        assert os.stat(mnt / "growing").st_size == 300000
    # many entries: readdir across several replies
    names = {"e%04d" % i for i in range(600)}
    for n in names:
        (mnt / "sub" / n).touch()
    assert set(os.listdir(mnt / "sub")) == names | {"b.txt"}
    sv = os.statvfs(mnt)
    assert sv.f_blocks > 0 and sv.f_namemax == 255


@pytest.mark.timeout(180)
def test_concurrent_writers(mnt):
    n, size = 8, 3 * MiB + 5
    blobs = [random.Random(i).randbytes(size) for i in range(n)]
    errors = []

    def writer(i):
        try:
            with open(mnt / ("w%d" % i), "wb") as f:
                for off in range(0, size, 128 * 1024):
                    f.write(blobs[i][off:off + 128 * 1024])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(150)
    assert not errors
    for i in range(n):
        assert hashlib.sha256((mnt / ("w%d" % i)).read_bytes()).digest() == \
            hashlib.sha256(blobs[i]).digest()


@pytest.mark.timeout(180)
def test_close_to_open_across_mounts(fuse_cluster, mounts):
    a = mounts(_mgmt(fuse_cluster), "a")
    b = mounts(_mgmt(fuse_cluster), "b")
    top_a, top_b = a.path / "c2o", b.path / "c2o"
    top_a.mkdir()
    rng = random.Random(2)
    for round_ in range(3):
        data = rng.randbytes(2 * MiB + round_ * 333333)
        # B looks at the file first, so it caches the old attributes.
        if round_:
            assert os.stat(top_b / "f").st_size > 0
        with open(top_a / "f", "wb") as f:
            f.write(data)
        # Written and closed on A: an open that follows on B sees it whole.
        with open(top_b / "f", "rb") as f:
            got = f.read()
        assert len(got) == len(data) and got == data, "round %d" % round_
    # A new name made on A is found on B.
    (top_a / "new").write_bytes(b"n" * 10)
    assert (top_b / "new").read_bytes() == b"n" * 10


def test_open_attributes_are_fresh(fuse_cluster, mounts):
    """The fstat after an open is answered from the open's reply (no
    getattr reaches meta): it must show what another client changed before
    the open, and what this mount changed after it."""
    a = mounts(_mgmt(fuse_cluster), "oa")
    b = mounts(_mgmt(fuse_cluster), "ob")
    (a.path / "fresh").mkdir()
    fa, fb = a.path / "fresh" / "f", b.path / "fresh" / "f"
    fa.write_bytes(b"x" * 100)
    os.chmod(fa, 0o644)
    assert os.stat(fb).st_size == 100          # B caches the old attributes
    fa.write_bytes(b"y" * 5000)                # A changes size and mode
    os.chmod(fa, 0o600)
    fd = os.open(fb, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        assert st.st_size == 5000 and stat.S_IMODE(st.st_mode) == 0o600
        assert os.read(fd, 10000) == b"y" * 5000
        # A change through this mount after the open is seen at once.
        os.chmod(fb, 0o640)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640
        with open(fb, "ab") as w:
            w.write(b"z")
        assert os.fstat(fd).st_size == 5001
    finally:
        os.close(fd)
    # Two opens in a row on the same mount: the second sees A's change.
    fd = os.open(fb, os.O_RDONLY)
    os.close(fd)
    os.chmod(fa, 0o604)
    fd = os.open(fb, os.O_RDONLY)
    try:
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o604
    finally:
        os.close(fd)


def test_negative_entries(fuse_cluster, mounts):
    """Without --negative-timeout a name another client creates is found at
    once; with it, the kernel may answer 'no such file' from its cache until
    the timeout, never after, and this mount's own create is seen at once."""
    mgmt = _mgmt(fuse_cluster)
    a = mounts(mgmt, "na")
    plain = mounts(mgmt, "np")
    neg = mounts(mgmt, "nn", extra=["--negative-timeout", "1"])
    (a.path / "neg").mkdir()
    for name in ("x", "y"):
        assert not (plain.path / "neg" / name).exists()
        assert not (neg.path / "neg" / name).exists()
    (a.path / "neg" / "x").write_bytes(b"made on a")
    assert (plain.path / "neg" / "x").read_bytes() == b"made on a"
    # The negative entry on neg expires within its timeout.
    time.sleep(1.2)
    assert (neg.path / "neg" / "x").read_bytes() == b"made on a"
    # A name this mount creates replaces its negative entry at once.
    (neg.path / "neg" / "y").write_bytes(b"mine")
    assert (neg.path / "neg" / "y").read_bytes() == b"mine"
    os.unlink(neg.path / "neg" / "y")
    assert not (neg.path / "neg" / "y").exists()
    # A bad value is refused with its name.
    r = run([FUSE_BIN, str(a.path.parent / "unused"), "--mgmt", mgmt,
             "--negative-timeout", "-1"], timeout=30)
    assert r.returncode != 0 and "--negative-timeout" in r.stderr


@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
@pytest.mark.parametrize("rw", ["write", "randwrite"])
def test_fio_verify(mnt, rw):
    r = subprocess.run(["fio", "--name=v", "--directory=%s" % mnt, "--rw=%s" % rw,
                        "--bs=%s" % ("1M" if rw == "write" else "16k"),
                        "--size=%s" % ("24M" if rw == "write" else "8M"),
                        "--numjobs=2", "--ioengine=psync", "--verify=crc32c",
                        "--verify_fatal=1", "--do_verify=1", "--randrepeat=1",
                        "--output-format=json"],
                       capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    j = json.loads(r.stdout[r.stdout.index("{"):])
    assert all(job["error"] == 0 for job in j["jobs"])


def _renameat2(old, new, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.renameat2(-100, os.fsencode(str(old)), -100, os.fsencode(str(new)),
                        ctypes.c_uint(flags))
    return 0 if rc == 0 else ctypes.get_errno()


@pytest.mark.timeout(120)
def test_error_codes(mnt, tmp_path):
    def err(fn, *a):
        with pytest.raises(OSError) as ei:
            fn(*a)
        return ei.value.errno

    assert err(os.stat, mnt / "missing") == errno.ENOENT
    assert err(open, mnt / "missing") == errno.ENOENT
    assert err(os.unlink, mnt / "missing") == errno.ENOENT
    os.mkdir(mnt / "d")
    assert err(os.mkdir, mnt / "d") == errno.EEXIST
    (mnt / "d" / "f").write_bytes(b"x")
    assert err(os.open, mnt / "d" / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
    assert err(os.rmdir, mnt / "d") == errno.ENOTEMPTY
    assert err(open, mnt / "d", "w") == errno.EISDIR
    assert err(os.unlink, mnt / "d") in (errno.EISDIR, errno.EPERM)
    assert err(os.rmdir, mnt / "d" / "f") == errno.ENOTDIR
    assert err(os.mkdir, mnt / "d" / "f" / "x") == errno.ENOTDIR
    assert err(os.rename, mnt / "d" / "f", tmp_path / "f") == errno.EXDEV
    assert err(os.link, mnt / "d", mnt / "dirlink") == errno.EPERM
    assert err(os.mknod, mnt / "dev", 0o644 | stat.S_IFCHR, os.makedev(1, 3)) == errno.EPERM
    (mnt / "g").write_bytes(b"g")
    # RENAME_NOREPLACE and RENAME_EXCHANGE
    assert _renameat2(mnt / "g", mnt / "d" / "f", 1) == errno.EEXIST
    assert _renameat2(mnt / "g", mnt / "d" / "f", 2) == 0
    assert (mnt / "g").read_bytes() == b"x" and (mnt / "d" / "f").read_bytes() == b"g"
    assert _renameat2(mnt / "g", mnt / "h", 1) == 0
    assert _renameat2(mnt / "h", mnt / "i", 4) == errno.EINVAL     # RENAME_WHITEOUT
    assert err(os.rename, mnt / "d", mnt / "d" / "sub") == errno.EINVAL
    assert err(os.open, mnt / ("n" * 256), os.O_CREAT | os.O_WRONLY) == errno.ENAMETOOLONG


def test_hard_links(mnt):
    """link(2): one file, several names; writes through one are read
    through the other; unlinking a name keeps the file until the last;
    rename onto another name of the same file does nothing."""
    (mnt / "a").mkdir()
    (mnt / "b").mkdir()
    (mnt / "a" / "f").write_bytes(b"one")
    os.link(mnt / "a" / "f", mnt / "b" / "g")
    sa, sb = os.stat(mnt / "a" / "f"), os.stat(mnt / "b" / "g")
    assert sa.st_ino == sb.st_ino and sa.st_nlink == sb.st_nlink == 2
    with open(mnt / "b" / "g", "ab") as f:
        f.write(b"+two")
    assert (mnt / "a" / "f").read_bytes() == b"one+two"
    os.rename(mnt / "a" / "f", mnt / "b" / "g")     # the same file: a no-op
    assert (mnt / "a" / "f").exists()
    os.unlink(mnt / "a" / "f")
    assert os.stat(mnt / "b" / "g").st_nlink == 1
    assert (mnt / "b" / "g").read_bytes() == b"one+two"
    os.rmdir(mnt / "a")
    os.unlink(mnt / "b" / "g")
    assert not os.listdir(mnt / "b")
    with pytest.raises(FileExistsError):
        (mnt / "b" / "h").write_bytes(b"x")
        os.link(mnt / "b" / "h", mnt / "b" / "h")


def _inline(fuse_cluster, path):
    """Whether the file at path (in the namespace) is inline: a client
    without inline support (STRATA_TEST_NO_INLINE=1) is refused it."""
    r = _strata_fn("cat", path, env={"STRATA_MGMT": _mgmt(fuse_cluster),
                                     "STRATA_TEST_NO_INLINE": "1"})
    if r.returncode == 0:
        return False
    assert "medium" in r.stderr.lower(), r.stderr
    return True


def test_small_files_inline(fuse_cluster, mounts):
    """Small files through the mount (docs/fuse.md, "Small files"): created
    inline at close, read back byte-exact on another mount; overwrite,
    append, truncation and links across the inline bound (16 KiB by
    default); a file rewritten on one mount is never read stale on the
    other after a new open."""
    a = mounts(_mgmt(fuse_cluster), "ia")
    b = mounts(_mgmt(fuse_cluster), "ib")
    (a.path / "inl").mkdir()
    da, db = a.path / "inl", b.path / "inl"
    rng = random.Random(20)
    bound = 16384
    for n in (1, 3901, bound - 1, bound, bound + 1, 70000):
        data = rng.randbytes(n)
        (da / ("f%d" % n)).write_bytes(data)
        assert (db / ("f%d" % n)).read_bytes() == data, n
        assert _inline(fuse_cluster, "/inl/f%d" % n) == (n <= bound), n
    (da / "empty").write_bytes(b"")
    assert (db / "empty").read_bytes() == b"" and not _inline(fuse_cluster, "/inl/empty")
    # overwrite in place: the file becomes a chunked one, the bytes right
    data = bytearray(rng.randbytes(3000))
    (da / "o").write_bytes(data)
    with open(da / "o", "r+b") as f:
        f.seek(1000)
        f.write(b"middle")
    data[1000:1006] = b"middle"
    assert (db / "o").read_bytes() == data and not _inline(fuse_cluster, "/inl/o")
    # append, small and across the bound
    (da / "p").write_bytes(b"head")
    with open(da / "p", "ab") as f:
        f.write(b"+tail")
    assert (db / "p").read_bytes() == b"head+tail"
    more = rng.randbytes(bound)
    with open(da / "p", "ab") as f:
        f.write(more)
    assert (db / "p").read_bytes() == b"head+tail" + more
    # truncation of an inline file: shorter, longer, past the bound
    t = rng.randbytes(5000)
    (da / "t").write_bytes(t)
    os.truncate(da / "t", 100)
    assert (db / "t").read_bytes() == t[:100] and _inline(fuse_cluster, "/inl/t")
    os.truncate(da / "t", 9000)
    assert (db / "t").read_bytes() == t[:100] + bytes(8900)
    os.truncate(da / "t", 100000)
    assert (db / "t").read_bytes() == t[:100] + bytes(99900)
    assert not _inline(fuse_cluster, "/inl/t")
    # a hard link and a rename keep the bytes
    (da / "l").write_bytes(b"linked bytes")
    os.link(da / "l", da / "l2")
    os.rename(da / "l", da / "l3")
    assert (db / "l2").read_bytes() == b"linked bytes"
    os.unlink(da / "l3")
    assert (db / "l2").read_bytes() == b"linked bytes"
    os.unlink(db / "l2")
    assert not (da / "l2").exists()
    # rewritten on one mount, read on the other: never stale
    for r, n in enumerate((10, 5000, 40000, 7, bound + 1, 3000, 12)):
        data = rng.randbytes(n)
        ((da if r % 2 else db) / "rw").write_bytes(data)
        assert ((db if r % 2 else da) / "rw").read_bytes() == data, (r, n)


def test_fifos_and_sockets(mnt):
    """mkfifo and a bound Unix socket make their objects; a fifo carries
    data between two processes on this host, as on any file system."""
    os.mkfifo(mnt / "p", 0o640)
    st = os.stat(mnt / "p")
    assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    w = subprocess.Popen(["sh", "-c", "echo through > '%s'" % (mnt / "p")])
    with open(mnt / "p") as f:
        assert f.read() == "through\n"
    assert w.wait(timeout=30) == 0
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(mnt / "sock"))
        assert stat.S_ISSOCK(os.stat(mnt / "sock").st_mode)
    finally:
        s.close()
    assert sorted(os.listdir(mnt)) == ["p", "sock"]
    os.unlink(mnt / "p")
    os.unlink(mnt / "sock")


def test_unlinked_open_file(mnt, fuse_cluster):
    """An unlinked file stays readable and writable through its open
    descriptors (fstat shows 0 links), hidden from listings, and goes at
    the last close; so does a file replaced by a rename."""
    fd = os.open(mnt / "u", os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"abc")
        os.unlink(mnt / "u")
        assert not (mnt / "u").exists()
        assert os.listdir(mnt) == []
        st = os.fstat(fd)
        assert st.st_size == 3 and st.st_nlink == 0
        os.pwrite(fd, b"XY", 1)
        assert os.pread(fd, 3, 0) == b"aXY"
        (mnt / "u").write_bytes(b"new file, same name")
        assert os.pread(fd, 3, 0) == b"aXY"
    finally:
        os.close(fd)
    assert os.listdir(mnt) == ["u"]
    fd = os.open(mnt / "u", os.O_RDONLY)
    try:
        (mnt / "v").write_bytes(b"v")
        os.rename(mnt / "v", mnt / "u")
        assert os.read(fd, 3) == b"new"
        assert (mnt / "u").read_bytes() == b"v"
    finally:
        os.close(fd)
    assert os.listdir(mnt) == ["u"]
    # The hidden names went with the last close: the cluster holds "u" only.
    r = _strata_fn("ls", "--mgmt", _mgmt(fuse_cluster), "/" + mnt.name)
    assert r.returncode == 0 and r.stdout.split() == ["u"], r.stdout


def test_tar_and_cp_keep_times_and_links(mnt, tmp_path):
    """tar x and cp -a through the mount keep mtimes, modes, symlinks,
    hard links and fifos; rsync -aH too where rsync is installed."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "x").write_bytes(b"x" * 5000)
    os.link(src / "d" / "x", src / "d" / "y")
    os.symlink("d/x", src / "l")
    os.mkfifo(src / "p")
    os.chmod(src / "d" / "x", 0o640)
    old = 1_000_000_000
    os.utime(src / "d" / "x", (old, old))
    os.utime(src / "l", (old + 5, old + 5), follow_symlinks=False)
    tar = tmp_path / "t.tar"
    _sh("tar -C %s -cf %s ." % (src, tar))
    tools = [("tar", "mkdir %s && tar -C %s -xf %s" % ("{dst}", "{dst}", tar)),
             ("cp", "cp -a %s {dst}" % src)]
    if shutil.which("rsync"):
        tools.append(("rsync", "rsync -aH %s/ {dst}/" % src))
    for name, cmd in tools:
        dst = mnt / name
        _sh(cmd.format(dst=dst))
        x, y = os.stat(dst / "d" / "x"), os.stat(dst / "d" / "y")
        assert int(x.st_mtime) == old, name
        assert stat.S_IMODE(x.st_mode) == 0o640, name
        assert x.st_ino == y.st_ino and x.st_nlink == 2, name
        assert os.readlink(dst / "l") == "d/x", name
        assert int(os.lstat(dst / "l").st_mtime) == old + 5, name
        assert stat.S_ISFIFO(os.stat(dst / "p").st_mode), name
        assert (dst / "d" / "y").read_bytes() == b"x" * 5000, name


@pytest.mark.timeout(120)
def test_sigterm_unmounts(fuse_cluster, mounts):
    m = mounts(_mgmt(fuse_cluster), "term")
    (m.path / "sigterm.txt").write_text("x")
    m.proc.send_signal(signal.SIGTERM)
    assert m.wait_exit(20) == 0, m.log
    assert not _is_mounted(m.path)
    assert not sanitizer_reports(m.log), m.log


@pytest.mark.timeout(120)
def test_crash_leaves_clearable_mount(fuse_cluster, mounts):
    m = mounts(_mgmt(fuse_cluster), "crash")
    os.killpg(m.proc.pid, signal.SIGKILL)
    m.wait_exit(20)
    assert _is_mounted(m.path)
    with pytest.raises(OSError) as ei:
        os.stat(m.path / "x")
    assert ei.value.errno == errno.ENOTCONN
    r = subprocess.run([FUSERMOUNT, "-u", str(m.path)], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r.stderr
    assert not _is_mounted(m.path)


@pytest.mark.timeout(240)
def test_storage_node_loss_is_a_pause(tmp_path, mounts):
    c = Cluster(tmp_path / "c", _strata_fn)
    m = None
    try:
        c.up(3, timeout=90)
        m = mounts(_mgmt(c), "loss", extra=["--timeout", "60"])
        blob = random.Random(9).randbytes(16 * MiB)
        (m.path / "before").write_bytes(blob)
        victim = c.storage_nodes[-1]
        done = {}

        def writer():
            try:
                t0 = time.monotonic()
                with open(m.path / "during", "wb") as f:
                    for off in range(0, len(blob), MiB):
                        f.write(blob[off:off + MiB])
                        time.sleep(0.05)
                done["t"] = time.monotonic() - t0
            except Exception as e:  # noqa: BLE001
                done["err"] = e

        t = threading.Thread(target=writer)
        t.start()
        time.sleep(0.3)
        victim.kill9()
        t.join(200)
        assert not t.is_alive(), "writer hung"
        assert "err" not in done, "a write failed after a storage node died: %r" % done.get("err")
        assert (m.path / "before").read_bytes() == blob
        assert (m.path / "during").read_bytes() == blob
    finally:
        if m is not None:
            m.stop()
        if (c.dir / "cluster.json").exists():
            c.reload()
            c.stop_all()


@pytest.mark.timeout(180)
def test_unreachable_cluster_returns_eio(tmp_path, mounts):
    c = Cluster(tmp_path / "c", _strata_fn)
    c.up(3, timeout=90)
    try:
        m = mounts(_mgmt(c), "gone", extra=["--timeout", "3", "--attr-timeout", "0",
                                            "--entry-timeout", "0"])
        (m.path / "f").write_bytes(b"data")
        assert (m.path / "f").read_bytes() == b"data"
    finally:
        c.stop_all()
    # Every call now fails with EIO after the timeout, and the mount answers.
    code = ("import os, errno, sys\n"
            "res = []\n"
            "for fn in (lambda: os.stat(sys.argv[1] + '/f'),\n"
            "           lambda: open(sys.argv[1] + '/f').read(),\n"
            "           lambda: os.listdir(sys.argv[1]),\n"
            "           lambda: open(sys.argv[1] + '/new', 'w').close(),\n"
            "           lambda: os.stat(sys.argv[1])):\n"
            "    try:\n"
            "        fn(); res.append(0)\n"
            "    except OSError as e:\n"
            "        res.append(e.errno)\n"
            "print(res)\n")
    # Bounded by the subprocess's timeout: a hang fails the test.
    r = subprocess.run(["python3", "-c", code, str(m.path)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    # The root answers its last attributes (so that unmount tools work).
    assert r.stdout.strip() == str([errno.EIO] * 4 + [0]), (r.stdout, r.stderr, m.log[-3000:])
    # The mount still unmounts cleanly.
    assert _unmount(m.path)
    assert m.wait_exit(20) == 0


@pytest.mark.timeout(120)
def test_rename_by_another_client_keeps_held_directories(fuse_cluster, mounts):
    """A directory the kernel holds (an open directory, a shell's working
    directory) stays usable when another client (the CLI here) renames a
    directory above it: the mount reaches it by its handle, not by the
    path it was first seen at. Attribute and entry caching are off, so
    every step below reaches the daemon."""
    mgmt = _mgmt(fuse_cluster)
    m = mounts(mgmt, "ren", extra=["--attr-timeout", "0", "--entry-timeout", "0"])
    top = m.path / "ren_elsewhere"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "f").write_bytes(b"before")
    fd = os.open(top / "a" / "b", os.O_RDONLY | os.O_DIRECTORY)
    sh = subprocess.Popen(["sh", "-c", "read go && cat f && echo && echo shell > g && ls"],
                          cwd=top / "a" / "b", stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r = _strata_fn("mv", "--mgmt", mgmt, "/ren_elsewhere/a", "/ren_elsewhere/z")
        assert r.returncode == 0, r.stdout + r.stderr
        # Relative to the open directory.
        assert os.stat("f", dir_fd=fd).st_size == len(b"before")
        nfd = os.open("new", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        os.write(nfd, b"made after the rename")
        os.close(nfd)
        assert os.fstat(fd).st_nlink == 2
        # In the working directory of a process.
        out, err = sh.communicate("go\n", timeout=60)
        assert sh.returncode == 0, err
        assert out.split() == ["before", "f", "g", "new"]
        assert sorted(os.listdir(fd)) == ["f", "g", "new"]
    finally:
        if sh.poll() is None:
            sh.kill()
            sh.wait()
        os.close(fd)
    # The new path shows the same directory; the old one is gone.
    assert not (top / "a").exists()
    assert (top / "z" / "b" / "new").read_bytes() == b"made after the rename"
    assert (top / "z" / "b" / "g").read_text() == "shell\n"
    r = _strata_fn("cat", "--mgmt", mgmt, "/ren_elsewhere/z/b/new")
    assert r.stdout == "made after the rename"


def _as_user(uid, cmd, gids=None, timeout=60):
    """Runs sh -c CMD as uid (group uid, supplementary gids or none)."""
    groups = ["--groups=" + ",".join(str(g) for g in gids)] if gids else ["--clear-groups"]
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, *groups,
                           "sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def open_mounts(request):
    """Like mounts, under a directory every user may reach (a test's tmp
    directory is root's only)."""
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="strata-mu-", dir="/tmp"))
    base.chmod(0o755)
    make, stop_all = _mount_factory(base)
    yield make
    problems = stop_all()
    shutil.rmtree(base, ignore_errors=True)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_multiuser_mount_acts_for_each_user(fuse_cluster, open_mounts, tmp_path):
    """--multiuser with a "caller" token: each process acts as its own uid
    and groups. A file a user creates is that user's; another user cannot
    read its 0600 file; a group member reads a 0640 file through a
    supplementary group; root is squashed to nobody by meta, so it cannot
    read what the kernel (default_permissions) would let root read, and
    its new files are nobody's."""
    mgmt = _mgmt(fuse_cluster)
    tok = tmp_path / "caller.token"
    r = _strata_fn("token", "create", "--dir", fuse_cluster.dir, "--tenant", "mu", "--caller",
                   "--path", "rw:/", "--expires", "1h", "--out", tok)
    assert r.returncode == 0, r.stderr
    adm = open_mounts(mgmt, "adm")                    # the admin token, as root
    (adm.path / "mu").mkdir()
    (adm.path / "mu").chmod(0o1777)
    m = open_mounts(mgmt, "mu", extra=["--token", tok, "--multiuser", "--attr-timeout", "0",
                                       "--entry-timeout", "0"])
    d = m.path / "mu"
    r = _as_user(1000, "echo mine > %s/a && chmod 600 %s/a && echo shared > %s/b && "
                 "chgrp 1500 %s/b; chmod 640 %s/b" % ((d,) * 5), gids=[1500])
    assert r.returncode == 0, r.stderr
    st = os.stat(d / "a")
    assert (st.st_uid, st.st_gid) == (1000, 1000)
    assert os.stat(d / "b").st_gid == 1500
    r = _as_user(1001, "cat %s/a" % d)
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    r = _as_user(1001, "cat %s/b" % d)                  # not in group 1500
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    r = _as_user(1001, "cat %s/b" % d, gids=[1500])     # in it
    assert r.returncode == 0 and r.stdout == "shared\n", r
    r = _as_user(1000, "cat %s/a" % d)
    assert r.returncode == 0 and r.stdout == "mine\n", r
    # Root: the kernel would allow it; meta acts for nobody.
    with pytest.raises(PermissionError):
        (d / "a").read_bytes()
    (d / "by-root").write_text("x")
    assert os.stat(d / "by-root").st_uid == 65534
    # The cluster saw the same owners.
    r = _strata_fn("stat", "--mgmt", mgmt, "/mu/a")
    assert r.returncode == 0 and "1000" in r.stdout, r.stdout


def test_multiuser_mount_needs_a_caller_token(fuse_cluster, open_mounts, tmp_path):
    """A token without "caller" on a --multiuser mount: every request that
    names its caller is refused (EACCES), and the daemon says why."""
    mgmt = _mgmt(fuse_cluster)
    tok = tmp_path / "plain.token"
    r = _strata_fn("token", "create", "--dir", fuse_cluster.dir, "--tenant", "mu2",
                   "--uid", "1000", "--path", "rw:/", "--expires", "1h", "--out", tok)
    assert r.returncode == 0, r.stderr
    m = open_mounts(mgmt, "mu2", extra=["--token", tok, "--multiuser", "--attr-timeout", "0",
                                        "--entry-timeout", "0"])
    r = _as_user(1000, "ls %s" % m.path)
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    logs = "".join(n.log for n in fuse_cluster.nodes)
    assert 'the token has no "caller"' in logs
