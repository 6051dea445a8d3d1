"""The orphan chunk reconciler of the meta service (src/meta/reconcile.c,
docs/failures.md "Orphaned chunks"): chunks that no inode owns are found
on the chains and removed once they stayed orphaned for
meta.reconcile_grace; chunks of a file being written are left alone.

Each test starts its own 3-node cluster with a short interval and grace,
and measures the chunk bytes on the targets' disks against a baseline
taken before the damage (polled with a deadline, never timed)."""

import contextlib
import os
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import (BUILD, REGISTRY, STRATA, fetch_metrics_text, parse_metrics,
                      restart_control_node, run, spawn, wait_until)
from test_python import PY, py_env

TORTURE = BUILD / "tests" / "integration" / "chunk_torture"
MiB = 1 << 20
FLAGS = "--meta.reconcile_interval=200ms --meta.reconcile_grace=1s"


def chunk_bytes(c):
    """Bytes of every chunk file on every target of the cluster."""
    total = 0
    for n in c.storage_nodes:
        for p in (n.data / "targets").glob("*/chunks/*/*"):
            try:
                total += p.stat().st_size
            except FileNotFoundError:
                pass
    return total


def chunk_files(c, ino):
    name = "%016x." % ino
    return [p for n in c.storage_nodes for p in (n.data / "targets").glob("*/chunks/*/" + name + "*")]


def meta_node(c):
    return next(n for n in c.nodes if "meta" in n.services.split(","))


def meta_metric(c, name):
    return parse_metrics(fetch_metrics_text(meta_node(c).metrics_port)[2]).get(name, 0.0)


def fs(c, *args, ok=True, timeout=60):
    r = run([STRATA, *[str(a) for a in args]], timeout=timeout, env={"STRATA_MGMT": str(c.dir)})
    if ok:
        assert r.returncode == 0, "strata %s: %d\n%s%s" % (args, r.returncode, r.stdout, r.stderr)
    return r


def ino_of(c, path):
    out = fs(c, "stat", path).stdout
    return int(out.split("Inode:")[1].split()[0])


def torture(c, *args, rc=0):
    import json
    mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
    r = run([TORTURE, mgmt, *[str(a) for a in args]], timeout=60)
    assert r.returncode == rc, "chunk_torture %s: %d\n%s%s" % (args, r.returncode, r.stdout,
                                                               r.stderr[-3000:])


def random_file(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(MiB))
    return path


@contextlib.contextmanager
def put_under_way(c, src, dst, disk_bytes):
    """A 'strata put SRC DST' in the background, yielded once the chunk
    files on disk hold more than disk_bytes (or it ended); killed at the
    end if it still runs."""
    p = spawn([STRATA, "put", src, dst], env=dict(os.environ, STRATA_MGMT=str(c.dir)))
    try:
        wait_until(lambda: chunk_bytes(c) > disk_bytes or p.poll() is not None, 60, 0.01,
                   "the put to write some chunks")
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        REGISTRY.discard(p.pid)


def wait_baseline(c, base, what):
    wait_until(lambda: chunk_bytes(c) == base, 60, 0.1,
               "chunk bytes on disk to return to their baseline %d (%s; now %d)"
               % (base, what, chunk_bytes(c)))


@pytest.mark.timeout(150)
def test_chunks_of_an_inode_never_published_are_removed(cluster):
    """Chunks written for an inode number the namespace handed out but no
    longer has go; chunks of an inode number it never handed out (another
    database's) are kept and counted."""
    c = cluster(3, daemon_flags=FLAGS)
    fs(c, "mkdir", "/r")
    empty = c.dir / "empty"
    empty.write_bytes(b"")
    fs(c, "put", empty, "/r/gone")
    ino = ino_of(c, "/r/gone")
    fs(c, "put", empty, "/r/kept")      # the namespace has handed out more
    fs(c, "rm", "/r/gone")
    base = chunk_bytes(c)
    foreign = 1 << 40
    torture(c, "fill", foreign, 0, 2, 65536)
    torture(c, "fill", ino, 0, 6, 200000)
    assert chunk_bytes(c) > base
    wait_until(lambda: not chunk_files(c, ino), 60, 0.1,
               "the orphaned chunks of inode %d to be removed" % ino)
    assert meta_metric(c, "strata_meta_reconcile_chunks_total") >= 6
    assert meta_metric(c, "strata_meta_reconcile_bytes_total") >= 6 * 200000
    # The foreign chunks stay, counted, with one rate-limited warning.
    assert len(chunk_files(c, foreign)) == 2 * 3
    wait_until(lambda: meta_metric(c, "strata_meta_reconcile_foreign") == 2, 30, 0.1,
               "the foreign chunks to be counted")
    assert "belong to inodes this namespace never had" in meta_node(c).log
    assert "orphaned chunk %x:0" % ino in meta_node(c).log


@pytest.mark.timeout(180)
def test_put_killed_mid_write_then_removed(cluster, tmp_path):
    """A client killed (SIGKILL) in the middle of a put of a large file
    leaves chunks that the file's published size does not cover; once the
    file is removed they are orphans, and the disk returns to its
    baseline."""
    c = cluster(3, daemon_flags=FLAGS)
    fs(c, "mkdir", "/k")
    base = chunk_bytes(c)
    big = random_file(tmp_path / "big.bin", 96)
    with put_under_way(c, big, "/k/big", base + 16 * MiB) as p:
        assert p.poll() is None, "the put finished before it could be killed"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    assert chunk_bytes(c) > base
    fs(c, "rm", "-f", "/k/big")
    wait_baseline(c, base, "after the killed put's file was removed")
    assert meta_metric(c, "strata_meta_reconcile_chunks_total") > 0


@pytest.mark.timeout(180)
def test_put_failed_with_enospc_then_removed(cluster, tmp_path):
    """A put that runs out of space half way (24 MiB targets, a 64 MiB
    file) leaves chunks its file never published; removing the file gives
    the space back."""
    c = cluster(3, daemon_flags=FLAGS + " --storage.capacity=24M")
    fs(c, "mkdir", "/e")
    base = chunk_bytes(c)
    big = random_file(tmp_path / "big.bin", 64)
    r = fs(c, "put", big, "/e/big", ok=False, timeout=120)
    assert r.returncode != 0, r.stdout
    assert chunk_bytes(c) > base
    fs(c, "rm", "-f", "/e/big")
    wait_baseline(c, base, "after the file of the put that hit ENOSPC was removed")
    # The space is usable again.
    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(4 * MiB))
    fs(c, "put", small, "/e/small")


@pytest.mark.timeout(180)
def test_put_with_control_daemon_killed_then_removed(cluster, tmp_path):
    """The control daemon (mgmt, meta) killed with SIGKILL and restarted
    while a put writes; whatever the put did, once its file is removed
    the disk returns to its baseline."""
    c = cluster(3, daemon_flags=FLAGS)
    fs(c, "mkdir", "/m")
    base = chunk_bytes(c)
    big = random_file(tmp_path / "big.bin", 64)
    with put_under_way(c, big, "/m/big", base + 8 * MiB) as p:
        restart_control_node(c, signal.SIGKILL)
        p.communicate(timeout=120)
    wait_until(lambda: fs(c, "rm", "-f", "/m/big", ok=False).returncode == 0, 60, 0.2,
               "rm to succeed against the restarted control daemon")
    wait_baseline(c, base, "after the put's file was removed")


@pytest.mark.timeout(150)
def test_file_written_slowly_is_not_touched(cluster, tmp_path):
    """A file whose chunks lie beyond its published size while its writer
    is still at work (size is published at close) survives many passes
    and grace periods, and reads back whole."""
    c = cluster(3, daemon_flags=FLAGS)
    go = tmp_path / "go"
    code = textwrap.dedent("""
        import hashlib, os, sys, time
        import strata
        c = strata.Client()
        c.makedirs("/s")
        data = os.urandom(10 * 65536 * 16 + 4321)
        f = c.open("/s/slow", "wb", buffering=0)
        half = len(data) // 2
        f.write(data[:half])
        print("written", flush=True)
        go = sys.argv[1]
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            assert time.monotonic() < deadline, "never told to go on"
            time.sleep(0.05)
        f.write(data[half:])
        f.close()
        assert c.read_bytes("/s/slow") == data
        print("ok", flush=True)
    """)
    e = py_env(c.dir)
    p = subprocess.Popen([PY, "-c", code, str(go)], env=dict(os.environ, **e),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    REGISTRY.add(p.pid, "slow writer")
    try:
        assert p.stdout.readline().strip() == "written", p.stderr.read()
        passes = meta_metric(c, "strata_meta_reconcile_passes_total")
        # Several passes, spread over more than two grace periods.
        t0 = time.monotonic()
        wait_until(lambda: meta_metric(c, "strata_meta_reconcile_passes_total") >= passes + 4
                   and time.monotonic() - t0 > 2.5, 60, 0.1, "reconciler passes")
        assert meta_metric(c, "strata_meta_reconcile_chunks_total") == 0
        go.write_text("")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and "ok" in out, err[-4000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        REGISTRY.discard(p.pid)
    assert meta_metric(c, "strata_meta_reconcile_chunks_total") == 0


def test_bad_reconcile_config_is_refused(tmp_path, run_stratad):
    """A grace shorter than the interval, or a rate of 0, is refused with a
    message naming the key."""
    r = run_stratad("--data", tmp_path / "d", "--node.services=mgmt,meta",
                    "--meta.reconcile_interval=10s", "--meta.reconcile_grace=1s")
    assert r.returncode == 2, r.stderr     # a configuration error
    assert "key 'meta.reconcile_grace' (1000 ms) is below 'meta.reconcile_interval'" in r.stderr
    r = run_stratad("--data", tmp_path / "d", "--node.services=mgmt,meta",
                    "--meta.reconcile_rate=0")
    assert r.returncode == 2 and "meta.reconcile_rate" in r.stderr, r.stderr
