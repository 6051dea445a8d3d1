"""A chunk with no intact replica left (docs/failures.md, "Lost chunks"):
every replica's copy damaged on disk. A read fails at once with a clear
error naming the path, instead of "resyncing" until the client's retry
budget runs out; the replicas stop retrying the repair and log a bounded
number of lines; `strata status` and /metrics say degraded with a count of
lost chunks; removing the file frees the chunk on every disk and the
cluster is healthy again."""

import json
import re
import time

import pytest

from conftest import STRATA, fetch_metrics_text, parse_metrics, run, wait_until
from test_storage import DATA_OFF, chunk_path, flip_byte


def fs(c, *args, timeout=120):
    return run([STRATA, *[str(a) for a in args]], timeout=timeout, env={"STRATA_MGMT": str(c.dir)})


def metric(node, name):
    return parse_metrics(fetch_metrics_text(node.metrics_port)[2]).get(name, 0.0)


def chunk_lines(c, ino, idx):
    pat = re.compile(r"chunk %x:%x\b" % (ino, idx))
    return sum(len(pat.findall(n.log)) for n in c.storage_nodes)


@pytest.mark.timeout(180)
def test_every_replica_corrupt_fails_fast_and_reports_degraded(cluster, tmp_path):
    c = cluster(3)
    src = tmp_path / "f.bin"
    src.write_bytes(bytes(range(256)) * 1024)      # 256 KiB: one chunk
    r = fs(c, "put", src, "/lostfile")
    assert r.returncode == 0, r.stderr
    ino = int(fs(c, "stat", "/lostfile").stdout.split("Inode:")[1].split()[0])
    paths = [chunk_path(n, ino, 0) for n in c.storage_nodes]
    for p in paths:
        flip_byte(p, DATA_OFF + 1000)

    # Fails with the clear error, naming the file (the CLI's retry budget
    # is 30 s; before, the read gave up after it with "resyncing").
    r = fs(c, "get", "/lostfile", tmp_path / "out")
    assert r.returncode != 0
    assert "/lostfile" in r.stderr and "no intact replica" in r.stderr, r.stderr
    assert "resyncing" not in r.stderr, r.stderr
    # Every replica found it lost (each of them tried the others).
    wait_until(lambda: all(metric(n, "strata_storage_chunks_lost") == 1 for n in c.storage_nodes),
               30, 0.1, "every replica to count the chunk lost")
    wait_until(lambda: metric(c.mgmt_node, "strata_mgmt_chunks_lost") == 1, 30, 0.1,
               "mgmt to count the lost chunk")
    st = fs(c, "status", "--json")
    assert st.returncode == 1, st.stdout + st.stderr
    j = json.loads(st.stdout)
    assert j["health"] == "degraded" and j["lost_chunks"] == 1, j
    st = fs(c, "status")
    assert "health     degraded (1 chunk lost: no intact replica left)" in st.stdout, st.stdout

    # A second read fails the same way, at once.
    r = fs(c, "get", "/lostfile", tmp_path / "out2")
    assert r.returncode != 0 and "no intact replica" in r.stderr, r.stderr

    # The replicas no longer log about it every repair tick (300 ms): over
    # a few seconds, the lines about the chunk stay few.
    before = chunk_lines(c, ino, 0)
    time.sleep(3)
    assert chunk_lines(c, ino, 0) - before <= 3, "\n".join(
        l for n in c.storage_nodes for l in n.log.splitlines()[-20:])

    # rm: the removal is taken although no replica can be repaired; the
    # chunk leaves every disk and health comes back.
    r = fs(c, "rm", "/lostfile")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not any(p.exists() for p in paths), 60, 0.1,
               "the lost chunk's files to be removed")
    wait_until(lambda: all(metric(n, "strata_storage_chunks_lost") == 0 for n in c.storage_nodes),
               30, 0.1, "the replicas to forget the lost chunk")
    wait_until(lambda: metric(c.mgmt_node, "strata_mgmt_chunks_lost") == 0, 30, 0.1,
               "mgmt to forget the lost chunk")
    wait_until(lambda: fs(c, "status").returncode == 0, 30, 0.2, "health ok again")
