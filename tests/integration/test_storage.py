"""The storage plane end to end: a mgmt daemon plus storage daemons from
'strata local up' (chains of R = min(storage daemons, 3)), driven by
tests/integration/chunk_torture (the storage client against a live cluster,
every byte checked against a model), plus checks of the chunk files on
disk (format: docs/chunk-engine.md).

Every chunk_torture run uses a fixed seed; a failing run's assertion
message carries its full command line (seeds included) and output, so it
can be rerun by hand against 'strata local up'."""

import json
import os
import re
import signal
import struct
import time

import pytest

from conftest import (BUILD, REGISTRY, fetch_metrics_text, parse_metrics, pid_alive, run, spawn,
                      wait_until)

TORTURE = BUILD / "tests" / "integration" / "chunk_torture"

MiB = 1 << 20
CHUNK = MiB                     # chunk size used by the torture runs
SLOT_SIZE = 8192                # one metadata slot (docs/chunk-engine.md)
DATA_OFF = 2 * SLOT_SIZE        # the data region starts at 16 KiB
SLOT_MAGIC = 0x4B434853         # "SHCK"
ENOSPC_EXIT = 3                 # chunk_torture fill: stopped on ENOSPC


# ---------------------------------------------------------------------------
# Helpers.

@pytest.fixture
def torture():
    """torture(cluster, *args, rc=0, timeout=60) -> stdout of one
    chunk_torture run against the cluster's mgmt; asserts its exit code."""
    if not os.access(TORTURE, os.X_OK):
        pytest.fail("%s not built (ninja -C %s tests/integration/chunk_torture)" % (TORTURE, BUILD),
                    pytrace=False)

    def fn(c, *args, rc=0, timeout=60):
        argv = [TORTURE, mgmt_addr(c), *[str(a) for a in args]]
        t0 = time.monotonic()
        r = run(argv, timeout=timeout)
        dt = time.monotonic() - t0
        if r.returncode != rc:
            raise AssertionError(
                "chunk_torture exited %d (expected %d) after %.1f s\n  command: %s\n"
                "  stdout: %s\n  stderr: %s"
                % (r.returncode, rc, dt, " ".join(str(a) for a in argv), r.stdout.strip(),
                   r.stderr.strip()[-4000:]))
        return r.stdout
    return fn


def mgmt_addr(c):
    return json.loads((c.dir / "cluster.json").read_text())["mgmt"]


def node_metrics(node):
    return parse_metrics(fetch_metrics_text(node.metrics_port)[2])


def storage_metric(node, name):
    return node_metrics(node).get(name, 0.0)


def target_dir(node):
    return node.data / "targets" / "0"


def chunk_name(ino, idx):
    return "%016x.%016x" % (ino, idx)


def chunk_path(node, ino, idx):
    hits = list((target_dir(node) / "chunks").glob("*/" + chunk_name(ino, idx)))
    assert len(hits) == 1, "chunk %x:%x on node %d: %s" % (ino, idx, node.id, hits)
    return hits[0]


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def parse_chunk_file(path):
    """-> dict(seq, ino, idx, version, length, crc, blocks, data, size) from
    the valid slot with the highest seq, or raises AssertionError. data is
    the logical content: format 2 slots map logical 64 KiB blocks to
    physical ones (docs/chunk-engine.md), format 1 is the identity."""
    raw = path.read_bytes()
    best = None
    for s in (0, 1):
        slot = raw[s * SLOT_SIZE:(s + 1) * SLOT_SIZE]
        if len(slot) < SLOT_SIZE:
            continue
        (magic, fmt, _flags, seq, ino, idx, version, length, crc, bsize,
         bcount) = struct.unpack_from("<IHHQQQQIIII", slot, 0)
        if magic != SLOT_MAGIC or fmt not in (1, 2) or bsize != 65536:
            continue
        if struct.unpack_from("<I", slot, 8188)[0] != crc32c(slot[:8188]):
            continue
        if bcount != (length + 65535) // 65536 or bcount > 1024:
            continue
        if best is None or seq > best["seq"]:
            best = dict(seq=seq, ino=ino, idx=idx, version=version, length=length, crc=crc,
                        blocks=slot[56:56 + 4 * bcount],
                        map=(struct.unpack_from("<%dH" % bcount, slot, 4152) if fmt == 2
                             else range(bcount)))
    assert best is not None, "%s: no valid metadata slot" % path
    best["data"] = b"".join(
        raw[DATA_OFF + p * 65536:DATA_OFF + p * 65536 + min(65536, best["length"] - i * 65536)]
        for i, p in enumerate(best["map"]))
    best["size"] = len(raw)
    assert len(best["data"]) == best["length"], "%s: file shorter than its length %d" % (
        path, best["length"])
    return best


def check_replicas_identical(nodes, min_chunks=1):
    """Every chunk file on any target exists on all of them with the same
    version, length, CRCs and data bytes. Returns the number of chunks."""
    names = {}
    for n in nodes:
        for p in (target_dir(n) / "chunks").glob("*/*"):
            assert not p.name.endswith(".tmp"), "temp file left on a quiet cluster: %s" % p
            names.setdefault(p.relative_to(target_dir(n)), []).append(n)
    assert len(names) >= min_chunks, "only %d chunk files on disk, expected >= %d" % (
        len(names), min_chunks)
    problems = []
    for rel, holders in sorted(names.items()):
        if len(holders) != len(nodes):
            problems.append("%s only on nodes %s" % (rel, [n.id for n in holders]))
            continue
        ref = parse_chunk_file(target_dir(nodes[0]) / rel)
        if (ref["ino"], ref["idx"]) != tuple(int(x, 16) for x in rel.name.split(".")):
            problems.append("%s: header names %x:%x" % (rel, ref["ino"], ref["idx"]))
        for n in nodes[1:]:
            other = parse_chunk_file(target_dir(n) / rel)
            # Not the file size: block updates and resync's copy-on-write
            # may leave replicas laid out differently.
            for k in ("version", "length", "crc", "blocks", "data"):
                if other[k] != ref[k]:
                    what = k if k in ("data", "blocks") else "%s %r vs %r" % (k, ref[k], other[k])
                    problems.append("%s: node %d and node %d differ in %s"
                                    % (rel, nodes[0].id, n.id, what))
                    break
    assert not problems, "replicas differ:\n  " + "\n  ".join(problems[:20])
    return len(names)


def flip_byte(path, off):
    """Inverts one byte of a file in place (a disk corrupting data)."""
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))


def integrity_errors(nodes):
    return {n.id: storage_metric(n, "strata_storage_integrity_errors_total") for n in nodes}


def check_damage_reported(c, nodes, ino):
    """Storage node k holds the one damaged copy of chunk k: it logged the
    error, mgmt logged its report, and no other node reports chunk k."""
    for k, n in enumerate(nodes):
        m = re.search(r"storage: target (\d+): chunk %x:%x: " % (ino, k), n.log)
        assert m, "node %d logged no integrity error for chunk %x:%x" % (n.id, ino, k)
        # The report is sent after the reply: it may land a moment later.
        pat = r"target %s reports chunk %x:%x" % (m.group(1), ino, k)
        wait_until(lambda: re.search(pat, c.mgmt_node.log), 30, 0.05,
                   "mgmt to log the report of chunk %x:%x from target %s" % (ino, k, m.group(1)))
        for o in nodes:
            if o is not n:
                assert not re.search(r"chunk %x:%x: checksum" % (ino, k), o.log), \
                    "node %d reports chunk %x:%x it holds intact" % (o.id, ino, k)


# ---------------------------------------------------------------------------
# Tests.

@pytest.mark.timeout(150)
def test_random_io_replicas_identical_on_disk(cluster, torture):
    """Writes and reads of many sizes and offsets (appends, gaps, overwrites,
    partial pages) read back exactly; afterwards the three replicas of
    every chunk are byte-identical on disk, with the same version."""
    c = cluster(3)
    assert len(c.storage_nodes) == 3
    # seed, ops, chunks, chunk size, depth: few ops per chunk (lengths of
    # every kind), many (overwrites of full chunks: copy-on-write), and
    # chunks of 3 blocks (partial blocks, appends across block ends).
    runs = ((11, 300, 64, CHUNK, 8), (12, 1500, 24, CHUNK, 16), (13, 600, 16, 196608, 8))
    for seed, ops, chunks, size, depth in runs:
        out = torture(c, "random", seed, ops, chunks, size, depth, timeout=90)
        assert "ok" in out
    n = check_replicas_identical(c.storage_nodes, min_chunks=24 + 16)
    assert n <= sum(r[2] for r in runs)
    assert set(integrity_errors(c.storage_nodes).values()) == {0.0}


@pytest.mark.timeout(150)
def test_concurrent_writers(cluster, torture):
    """32 I/Os in flight on different chunks, and 32 writers of disjoint
    ranges of one chunk (serialized at the chain head: every range holds
    its writer's data, replicas agree)."""
    c = cluster(3)
    torture(c, "random", 21, 2000, 40, CHUNK, 32, timeout=90)
    for seed in (22, 23, 24):
        torture(c, "samechunk", seed, 32, CHUNK)
    torture(c, "samechunk", 25, 32, 256 * 1024)
    check_replicas_identical(c.storage_nodes, min_chunks=40 + 4)
    # The same-chunk file took 32 updates (more if one was retried), each
    # with its own version, the same on every replica.
    for seed in (22, 23, 24):
        v = {parse_chunk_file(chunk_path(n, 5000 + seed, 0))["version"] for n in c.storage_nodes}
        assert len(v) == 1 and min(v) >= 32, "samechunk seed %d: versions %s" % (seed, v)
    assert set(integrity_errors(c.storage_nodes).values()) == {0.0}


@pytest.mark.timeout(120)
def test_corrupt_replica_detected_and_bypassed(cluster, torture):
    """A byte flipped in the data region of one replica: reads still return
    the right data (the client moves to another replica), the daemon holding
    it counts an integrity error and reports the chunk to mgmt; a write
    covering the whole chunk repairs it."""
    c = cluster(3)
    nodes = c.storage_nodes
    ino, length, seed = 0x4D, 200000, 9
    # Chunk k is corrupted on storage node k: each daemon holds one.
    for k in range(len(nodes)):
        torture(c, "write", ino, k, 0, length, seed + k)
    before = integrity_errors(nodes)
    assert set(before.values()) == {0.0}
    for k, n in enumerate(nodes):
        flip_byte(chunk_path(n, ino, k), DATA_OFF + 70000 + 1000 * k)    # inside block 1 of the data
    # The on-disk check sees it too (and so is known to catch a bad copy).
    with pytest.raises(AssertionError, match="differ in data"):
        check_replicas_identical(nodes)
    # Six reads per chunk in one client visit every replica twice.
    for k in range(len(nodes)):
        torture(c, "read", ino, k, 0, length, seed + k, 6)
    after = integrity_errors(nodes)
    for n in nodes:
        assert after[n.id] >= 1, "node %d: integrity errors %s -> %s" % (n.id, before, after)
    check_damage_reported(c, nodes, ino)
    # Overwriting all of a chunk repairs the bad replica.
    for k in range(len(nodes)):
        torture(c, "write", ino, k, 0, length, seed + 100 + k)
    mid = integrity_errors(nodes)
    for k in range(len(nodes)):
        torture(c, "read", ino, k, 0, length, seed + 100 + k, 6)
    assert integrity_errors(nodes) == mid
    check_replicas_identical(nodes)


def test_corrupt_cached_replica_found_by_the_reader(cluster, torture):
    """With storage.buffered_reads, whole blocks in the page cache are sent
    from a mapping of the chunk file without a check at the target: the
    reader checks them against the CRC the stored block CRCs give. Damage
    made to the cached pages is then found by the client, which reads
    another replica and asks the damaged one to verify (OP_CHUNK_VERIFY);
    that one counts the error, reports the chunk to mgmt and stops serving
    it until it is whole again."""
    c = cluster(3, daemon_flags="--storage.buffered_reads=true")
    nodes = c.storage_nodes
    ino, length, seed = 0x4E, 200000, 21
    for k in range(len(nodes)):
        torture(c, "write", ino, k, 0, length, seed + k)
        # Reads through the page cache: every replica's pages come in.
        torture(c, "read", ino, k, 0, length, seed + k, 6)
    assert set(integrity_errors(nodes).values()) == {0.0}
    # Every replica has sent reads from its mapping already.
    for n in nodes:
        assert storage_metric(n, "strata_storage_mapped_reads_total") >= 1, \
            "node %d sent no read from the page cache" % n.id
    for k, n in enumerate(nodes):
        # Written with pwrite: the cached page changes, as bad RAM would.
        flip_byte(chunk_path(n, ino, k), DATA_OFF + 70000 + 1000 * k)
    for k in range(len(nodes)):
        torture(c, "read", ino, k, 0, length, seed + k, 6)
    # Pages idle long enough are reclaimed (and then read and checked at
    # the target): at least one replica must have been found by a reader.
    wait_until(lambda: sum(storage_metric(n, "strata_storage_verify_total") for n in nodes) >= 1,
               30, 0.05, "a reader to ask a target to verify its copy")
    for k, n in enumerate(nodes):
        wait_until(lambda: storage_metric(n, "strata_storage_integrity_errors_total") >= 1,
                   30, 0.05, "node %d to find its copy of chunk %x:%x damaged" % (n.id, ino, k))
    check_damage_reported(c, nodes, ino)
    # The repair (or an overwrite) makes the replicas whole again.
    for k in range(len(nodes)):
        torture(c, "write", ino, k, 0, length, seed + 100 + k)
    for k in range(len(nodes)):
        torture(c, "read", ino, k, 0, length, seed + 100 + k, 6)
    check_replicas_identical(nodes)


@pytest.mark.timeout(120)
def test_repair_racing_an_overwrite_never_goes_back(cluster, torture):
    """A replica found corrupt by a read starts a repair fetch; a write of
    the whole chunk lands at once. The fetched (older) copy must not be
    installed over the newer write: every later read, from any replica,
    returns the newest data. Several rounds, as the race is timing bound."""
    c = cluster(3)
    nodes = c.storage_nodes
    ino, length = 0x5E, 200000
    torture(c, "write", ino, 0, 0, length, 1)
    for rnd in range(8):
        node = nodes[rnd % len(nodes)]
        flip_byte(chunk_path(node, ino, 0), DATA_OFF + 70000)
        # Six reads visit every replica: the damaged one marks the chunk.
        torture(c, "read", ino, 0, 0, length, 1 + rnd, 6)
        torture(c, "write", ino, 0, 0, length, 2 + rnd)
        torture(c, "read", ino, 0, 0, length, 2 + rnd, 6)
    deadline = time.monotonic() + 20
    while True:
        try:
            check_replicas_identical(nodes)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.mark.timeout(60)
def test_partial_overwrite_of_chunk_with_corrupt_replica(cluster, torture):
    """Wanted: the update succeeds (the bad replica repaired from a good one)
    or fails at once, and either way the replicas agree afterwards."""
    c = cluster(3)
    ino, length = 0x58, 200000
    torture(c, "write", ino, 0, 0, length, 1)
    flip_byte(chunk_path(c.storage_nodes[1], ino, 0), DATA_OFF + 70000)
    env = {"STRATA_TORTURE_RETRY_MS": "3000"}
    # Into the corrupt block 1: the block update merges with it (a write
    # elsewhere leaves it to reads and the scrubber).
    r = run([TORTURE, mgmt_addr(c), "write", ino, 0, 66000, 4096, 2], timeout=30, env=env)
    versions = {n.id: parse_chunk_file(chunk_path(n, ino, 0))["version"] for n in c.storage_nodes}
    assert r.returncode == 0, "partial overwrite failed: %s; versions on disk %s" % (
        r.stdout.strip(), versions)
    check_replicas_identical(c.storage_nodes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nstorage", [1, 3])
def test_full_target_enospc(cluster, torture, nstorage):
    """With 8 MiB per target, filling 1 MiB chunks stops with ENOSPC after
    floor(8 MiB / (16 KiB + 1 MiB)) = 7 chunks (docs/chunk-engine.md,
    Space); the chunks written before read back intact on every replica,
    the refused chunk does not exist, and small writes still fit."""
    c = cluster(nstorage, daemon_flags="--storage.capacity=8M")
    ino = 300
    out = torture(c, "fill", ino, 0, 100, MiB, rc=ENOSPC_EXIT)
    m = re.search(r"stopped after (\d+) chunks: (.*)", out)
    assert m and "space" in m.group(2).lower(), out
    written = int(m.group(1))
    assert written == (8 * MiB) // (16 * 1024 + MiB), out
    for i in range(written):
        torture(c, "read", ino, i, 0, MiB, ino, 2 * nstorage)
    # The refused write left nothing: the chunk reads as absent.
    assert "ok version 0" in torture(c, "read", ino, written, 0, 0, ino)
    for n in c.storage_nodes:
        assert not list((target_dir(n) / "chunks").glob("*/" + chunk_name(ino, written) + "*"))
    # What is left (8 MiB - 7 * 1040 KiB = 912 KiB) still takes small chunks...
    torture(c, "write", ino + 1, 0, 0, 4096, 5)
    torture(c, "read", ino + 1, 0, 0, 4096, 5, nstorage)
    # ...but not another 1 MiB one, and the refusal is not retried forever.
    out = torture(c, "write", ino + 1, 1, 0, MiB, 6, rc=1)
    assert "space" in out.lower(), out
    if nstorage > 1:
        check_replicas_identical(c.storage_nodes, min_chunks=written + 1)


@pytest.mark.timeout(120)
def test_single_storage_daemon_r1(cluster, torture):
    """One storage daemon, chains of one target: the same workloads work."""
    c = cluster(1)
    assert len(c.storage_nodes) == 1
    assert re.search(r"replication 1\b", c.mgmt_node.log), c.mgmt_node.log[-2000:]
    torture(c, "random", 31, 800, 24, CHUNK, 16, timeout=90)
    torture(c, "samechunk", 32, 32, CHUNK)
    torture(c, "write", 77, 0, 0, 100000, 3)
    torture(c, "read", 77, 0, 0, 100000, 3, 2)
    assert integrity_errors(c.storage_nodes) == {c.storage_nodes[0].id: 0.0}


def _restart_node(c, node, timeout=20):
    """SIGTERM a storage daemon of cluster c, start it again with the same
    command line (data dir, flags), record it in cluster.json. Returns the
    new ClusterNode."""
    with open("/proc/%d/cmdline" % node.pid, "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    assert "--data" in argv, argv
    os.kill(node.pid, signal.SIGTERM)
    wait_until(lambda: not pid_alive(node.pid), 15, what="node %d to exit on SIGTERM" % node.id)
    REGISTRY.discard(node.pid)
    addr_file = node.data / "stratad.addr"
    if addr_file.exists():
        addr_file.unlink()
    p = spawn(argv, node.log_path, "stratad node %d (restarted)" % node.id, cwd=c.dir)

    def started():
        try:
            lines = addr_file.read_text().split("\n")
        except OSError:
            lines = []
        if len(lines) >= 3 and lines[2].strip() == str(p.pid):
            return lines
        assert p.poll() is None, "restarted node %d exited with %s; log:\n%s" % (
            node.id, p.returncode, "\n".join(node.log.splitlines()[-30:]))
        return None
    lines = wait_until(started, timeout, what="node %d to restart" % node.id)
    path = c.dir / "cluster.json"
    j = json.loads(path.read_text())
    for rec in j["nodes"]:
        if rec["id"] == node.id:
            rec["pid"] = p.pid
            rec["addr"] = lines[0]
    path.write_text(json.dumps(j, indent=2))
    c.reload()
    return c.node(node.id)


@pytest.mark.timeout(150)
def test_restart_storage_daemon_keeps_data(cluster, torture):
    """A storage daemon stopped with SIGTERM and started again on the same
    data dir serves what was written before (on every replica, itself
    included), and takes new writes."""
    # A long lease: the restart (ASan start-up on a loaded machine) must not
    # look like a failure, which would take the target out of its chains.
    c = cluster(3, daemon_flags="--mgmt.lease=30s")
    ino, n_chunks, size = 400, 8, 300000
    torture(c, "fill", ino, 0, n_chunks, size)
    torture(c, "write", ino + 1, 0, 0, 5000, 7)
    torture(c, "write", ino + 1, 0, 5000, 70000, 8)    # an append
    before = check_replicas_identical(c.storage_nodes)

    victim = c.storage_nodes[1]
    mgmt_mark = len(c.mgmt_node.log)
    new = _restart_node(c, victim)
    assert new.pid != victim.pid
    assert re.search(r"signal 15: shutting down", new.log), "no clean shutdown in the log"
    wait_until(lambda: re.search(r"node %d (registered|is back)" % new.id,
                                 c.mgmt_node.log[mgmt_mark:]),
               60, what="mgmt to see node %d again" % new.id)
    # A restarted process resyncs before it serves again (it may have lost
    # updates it was forwarding): wait until it is in sync with every chain.
    nchains = len(c.storage_nodes)
    wait_until(lambda: len(re.findall(r"target %d is in sync with chain" % (new.id * 256),
                                      c.mgmt_node.log[mgmt_mark:])) >= nchains,
               60, what="node %d to resync its %d chains" % (new.id, nchains))

    for i in range(n_chunks):
        torture(c, "read", ino, i, 0, size, ino, 6)
    torture(c, "read", ino + 1, 0, 5000, 70000, 8, 6)
    assert storage_metric(new, "strata_storage_reads_total") > 0, \
        "the restarted daemon served no read: not back in its chains?"
    # New writes go through the whole chain again.
    torture(c, "fill", ino + 2, 0, 4, 100000)
    for i in range(4):
        torture(c, "read", ino + 2, i, 0, 100000, ino + 2, 6)
    assert check_replicas_identical(c.storage_nodes) == before + 4
    assert set(integrity_errors(c.storage_nodes).values()) == {0.0}
