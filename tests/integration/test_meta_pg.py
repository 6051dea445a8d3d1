"""The namespace on PostgreSQL (src/meta/store_pg.c, docs/namespace.md):
a cluster whose control daemon has meta.store = postgresql://... serves the
file commands, keeps its namespace (inline data of small files too)
through a kill -9, reports a stopped
server at once and recovers when it returns; 'strata meta migrate' moves a
SQLite namespace over; bad settings are refused with the key named.

PostgreSQL is started here (tests/pg_tmp.sh through pgtmp.py), on a unix
socket in a private directory; the module is skipped without it."""

import json
import os
import random
import signal
import time

import pytest

from conftest import STRATA, Cluster, restart_control_node, run, wait_until
from pgtmp import PgServer

NO_LEAKS = {"ASAN_OPTIONS": "detect_leaks=0"}


def _strata_fn(*args, timeout=60, env=None):
    return run([STRATA, *[str(a) for a in args]], timeout=timeout, env=env)


@pytest.fixture(scope="module")
def pg():
    server = PgServer.start_or_skip()
    yield server
    server.destroy()


def _up(c, flags=None):
    try:
        c.up(3, daemon_flags=flags, timeout=90)
    except BaseException:
        if (c.dir / "cluster.json").exists():
            c.stop_all()
        raise


def _passfile(path, mode):
    path.write_text("*:*:*:postgres:unused-with-trust\n")
    os.chmod(path, mode)
    return path


@pytest.fixture(scope="module")
def pg_cluster(pg, tmp_path_factory):
    """A cluster whose namespace is database 'ns' of pg, its password file
    given (mode 0600; the server trusts the socket, so it is not used)."""
    base = tmp_path_factory.mktemp("metapg")
    uri = pg.create_db("ns")
    pf = _passfile(base / "pgpass", 0o600)
    c = Cluster(base / "cluster", _strata_fn)
    _up(c, "--meta.store=%s --meta.store_passfile=%s" % (uri, pf))
    yield c
    problems = c.stop_all() + c.sanitizer_reports()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _fs(c):
    """fs(*args, ok=None) -> CompletedProcess of 'strata ARGS' on cluster c."""
    mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]

    def fn(*args, ok=None, timeout=60):
        r = _strata_fn(*args, timeout=timeout, env={"STRATA_MGMT": mgmt})
        if ok is not None:
            assert (r.returncode == 0) == ok, "strata %s: %d\n%s%s" % (
                args, r.returncode, r.stdout, r.stderr)
        return r
    return fn


def _names(r):
    return sorted(r.stdout.split())


@pytest.mark.timeout(300)
def test_namespace_on_postgresql_survives_kill9(pg, pg_cluster, tmp_path):
    fs = _fs(pg_cluster)
    data = random.Random(18).randbytes(700 * 1024)
    local = tmp_path / "f.bin"
    local.write_bytes(data)
    fs("mkdir", "/a", "/b", "/a/sub", ok=True)
    fs("put", "-q", local, "/a/f", ok=True)
    assert _names(fs("ls", "/a", ok=True)) == ["f", "sub"]
    fs("mv", "/a/f", "/b/g", ok=True)
    assert _names(fs("ls", "/a", ok=True)) == ["sub"]
    fs("rm", "-r", "/a/sub", ok=True)
    assert _names(fs("ls", "/a", ok=True)) == []
    got = tmp_path / "out"
    got.mkdir()
    fs("get", "-q", "/b/g", got, ok=True)
    assert (got / "g").read_bytes() == data
    # The namespace is in PostgreSQL, not in a meta.db of the daemon.
    assert int(pg.psql("SELECT count(*) FROM meta_dentries", db="ns")) >= 3
    assert not (pg_cluster.mgmt_node.data / "meta.db").exists()

    restart_control_node(pg_cluster, signal.SIGKILL)
    wait_until(lambda: fs("ls", "/b").returncode == 0, 60, 0.2, "the namespace after kill -9")
    assert _names(fs("ls", "/", ok=True)) == ["a", "b"]
    assert _names(fs("ls", "/b", ok=True)) == ["g"]
    (got / "g").unlink()
    fs("get", "-q", "/b/g", got, ok=True)
    assert (got / "g").read_bytes() == data
    fs("mkdir", "/after", ok=True)


@pytest.mark.timeout(300)
def test_inline_data_on_postgresql(pg, pg_cluster):
    """Small files kept inline live in meta_inline, and survive a kill -9
    of the control node after their close was answered."""
    from test_python import run_py
    write = """
import strata
c = strata.Client()
c.makedirs("/inl")
for i in range(20):
    c.write_bytes("/inl/f%d" % i, bytes([i]) * (100 + i * 500))
print("OK")
"""
    check = """
import strata
c = strata.Client()
for i in range(20):
    assert c.read_bytes("/inl/f%d" % i) == bytes([i]) * (100 + i * 500), i
print("OK")
"""
    run_py(pg_cluster, write)
    assert int(pg.psql("SELECT count(*) FROM meta_inline", db="ns")) >= 20
    restart_control_node(pg_cluster, signal.SIGKILL)
    fs = _fs(pg_cluster)
    wait_until(lambda: fs("ls", "/inl").returncode == 0, 60, 0.2, "the namespace after kill -9")
    run_py(pg_cluster, check)


@pytest.mark.timeout(300)
def test_postgresql_stopped_under_the_daemon(pg, pg_cluster):
    fs = _fs(pg_cluster)
    fs("mkdir", "/before_stop", ok=True)
    node = pg_cluster.mgmt_node
    pg.stop()
    try:
        # The meta service fails each call at once (-EIO); the CLI, as it
        # connects, retries its first call for the client's retry time
        # (30 s), then reports the error: bounded, never a hang.
        t0 = time.monotonic()
        r = fs("mkdir", "/while_down", timeout=90)
        took = time.monotonic() - t0
        assert r.returncode != 0, r.stdout + r.stderr
        assert took < 45, "a stopped PostgreSQL took %.1f s to fail a mkdir" % took
        assert "Input/output error" in r.stderr, r.stderr
        log = node.log
        assert "meta-pg" in log and ("connection lost" in log or "cannot reconnect" in log), \
            node.log_tail()
    finally:
        pg.start()
    wait_until(lambda: fs("mkdir", "/after_start").returncode == 0, 60, 0.2,
               "the namespace once PostgreSQL is back")
    names = _names(fs("ls", "/", ok=True))
    assert "before_stop" in names and "after_start" in names
    assert "reconnected" in node.log


@pytest.mark.timeout(400)
def test_migrate_sqlite_namespace_to_postgresql(pg, tmp_path):
    c = Cluster(tmp_path / "cluster", _strata_fn)
    _up(c)
    try:
        fs = _fs(c)
        rnd = random.Random(7)
        files = {"/m/one": rnd.randbytes(300 * 1024), "/m/d/two": rnd.randbytes(5000),
                 "/m/d/e/three": b"", "/top": rnd.randbytes(2 << 20)}
        fs("mkdir", "-p", "/m/d/e", "/m/empty", ok=True)
        src = tmp_path / "src"
        src.mkdir()
        for path, data in files.items():
            local = src / path.replace("/", "_")
            local.write_bytes(data)
            fs("put", "-q", local, path, ok=True)
        fs("rm", "/top", ok=True)           # leaves chunks queued for deletion, maybe
        del files["/top"]
        fs("quota", "set", "/m", "--bytes", "1G", "--inodes", "100", ok=True)
        before = {p: fs("ls", "-l", p, ok=True).stdout for p in ("/", "/m", "/m/d", "/m/d/e")}
        quota = fs("quota", "get", "/m", ok=True).stdout

        uri = pg.create_db("mig")
        out = {}

        def migrate(node):
            r = _strata_fn("meta", "migrate", "--from", node.data / "meta.db", "--to", uri)
            out["first"] = r
            out["again"] = _strata_fn("meta", "migrate", "--from", node.data / "meta.db",
                                      "--to", uri)
        restart_control_node(c, signal.SIGTERM, ["--meta.store=" + uri], between=migrate)
        r = out["first"]
        assert r.returncode == 0, r.stdout + r.stderr
        assert "counts verified" in r.stdout
        assert out["again"].returncode == 1
        assert "already holds a namespace" in out["again"].stderr

        wait_until(lambda: fs("ls", "/m").returncode == 0, 60, 0.2, "meta on PostgreSQL")
        assert "on PostgreSQL" in c.mgmt_node.log or "meta-pg" in c.mgmt_node.log
        for p, text in before.items():
            assert fs("ls", "-l", p, ok=True).stdout == text, p
        assert fs("quota", "get", "/m", ok=True).stdout == quota
        dst = tmp_path / "dst"
        dst.mkdir()
        for path, data in files.items():
            fs("get", "-q", path, dst, ok=True)
            assert (dst / path.rsplit("/", 1)[1]).read_bytes() == data, path
        # New files get fresh numbers on the migrated namespace.
        fs("mkdir", "/m/new", ok=True)
        assert "new" in fs("ls", "/m", ok=True).stdout
    finally:
        problems = c.stop_all() + c.sanitizer_reports()
    assert not problems, "\n".join(problems)


def test_bad_meta_store_is_refused(tmp_path, run_stratad):
    r = run_stratad("--data", tmp_path / "d", "--node.listen=127.0.0.1:0",
                    "--meta.store=mysql://root:hunter2@db/ns", env=NO_LEAKS)
    msg = r.stdout + r.stderr
    assert r.returncode == 2, msg
    assert "meta.store" in msg and "'mysql'" in msg and "postgresql://" in msg, msg
    assert "hunter2" not in msg


def test_loose_passfile_is_refused(tmp_path, run_stratad):
    pf = _passfile(tmp_path / "pgpass", 0o644)
    r = run_stratad("--data", tmp_path / "d", "--node.listen=127.0.0.1:0",
                    "--meta.store=postgresql:///ns?host=/nonexistent",
                    "--meta.store_passfile=%s" % pf, env=NO_LEAKS)
    msg = r.stdout + r.stderr
    assert r.returncode == 2, msg
    assert "meta.store_passfile" in msg and "0644" in msg and "0600" in msg, msg


def test_unreachable_postgresql_fails_the_start(tmp_path, run_stratad):
    r = run_stratad("--data", tmp_path / "d", "--node.listen=127.0.0.1:0",
                    "--node.services=mgmt,meta",
                    "--meta.store=postgresql:///ns?host=%s" % tmp_path, timeout=30,
                    env=NO_LEAKS)
    msg = r.stdout + r.stderr
    assert r.returncode != 0, msg
    assert "cannot connect to PostgreSQL" in msg, msg
    assert "serving on" not in msg
