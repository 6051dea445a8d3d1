"""Chain replication correctness (issue 12): one regression test per bug
traced in the replication path, each against real daemons.

1. A failed local write at the head, after the update was forwarded, must
   not let the next write reuse its version (the successors then kept the
   failed write and dropped the acknowledged one).
2. A whole chunk sent down a chain must stay whole: forwarded as a write at
   offset 0 it lost a shrinking truncate at the tail.
3. A write queued at a new head behind an update forwarded to it before the
   map changed must start when that update ends (it waited forever).
4. A storage daemon restarted within its lease after mgmt restarted must be
   seen as restarted (mgmt kept incarnations only in memory).
5. A replica that lacks a write must not serve reads meanwhile (checked in
   1: reads in turn never go back).
6. A restarted last serving member must not serve, nor be resynced from,
   before it has the copies it lacked (its process lost their marks): the
   others' resyncs then replaced a failed write that clients had read.

A disk that fails for one replica only is a small tmpfs mounted on that
node's target before the cluster starts, filled up with a file when the
test wants that replica's writes to fail (ENOSPC), then emptied again.
The scripted steps are fault_driver's 'steps' (see fault_driver.c).
"""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import STRATA, run, spawn, REGISTRY, wait_until
from test_faults import FAULT, check_copies, faults  # noqa: F401 (fixture)

CHUNK = 256 * 1024
INO = 7001


def steps(fc, *args, retry_ms=None, timeout_ms=None, timeout=60):
    """Runs fault_driver steps; -> list of output lines (split)."""
    env = {}
    if retry_ms:
        env["STRATA_TORTURE_RETRY_MS"] = str(retry_ms)
    if timeout_ms:
        env["STRATA_TORTURE_TIMEOUT_MS"] = str(timeout_ms)
    r = run([FAULT, fc.mgmt_addr, "steps", INO, CHUNK] + list(args), timeout=timeout, env=env)
    assert r.returncode == 0, "steps %s: %s%s" % (args, r.stdout, r.stderr)
    out = [l.split() for l in r.stdout.splitlines()]
    print("steps %s -> %s" % (" ".join(args), r.stdout.strip()))
    return out


def chain_of(fc, idx=0):
    """-> [(target, node), ...] of chunk idx's chain, head first."""
    return chain_and_members(fc, idx)[1]


def chain_and_members(fc, idx=0):
    """-> (chain id, [(target, node), ...] head first) of chunk idx."""
    line = steps(fc, "c:%d" % idx)[0]
    return int(line[2]), [tuple(int(x) for x in m.split("@")) for m in line[3].split(",")]


def chain_version(fc, idx=0):
    return int(steps(fc, "c:%d" % idx)[0][4])


def members_now(fc, chain_id):
    """Member targets of chain chain_id in mgmt's map, head first."""
    return [t for t, _ in next(c for c in fc.map().chains if c["id"] == chain_id)["members"]]


def replica_reads(fc, idx, length, members):
    """Reads [0, length) straight from every member: -> {target: line}.
    A member may not have the map mgmt just changed yet (it learns it at
    its next heartbeat): its read is repeated until it has."""
    out = {}
    for t, _ in members:
        last = []

        def read():
            last[:] = steps(fc, "R:%d:0:%d:%d" % (idx, length, t))[0]
            return last[1] == "ok"
        try:
            wait_until(read, 10, 0.2, "target %d to serve" % t)
        except AssertionError:
            raise AssertionError("read from target %d: %s" % (t, last))
        out[t] = list(last)
    return out


def assert_same(reads):
    first = next(iter(reads.values()))
    for t, line in reads.items():
        assert line[2:] == first[2:], "replicas differ: %s" % reads


# ---------------------------------------------------------------------------
# Small disks that the test fills.

def _can_mount():
    return os.geteuid() == 0


@pytest.fixture
def small_disks(request):
    """mount(fc): a 4 MiB tmpfs on every storage node's target (before the
    daemons start); unmounted after the test."""
    if not _can_mount():
        pytest.skip("mounting a tmpfs needs root")
    mounted = []

    def mount(fc):
        for n in fc.storage:
            d = n.data / "targets" / "0"
            d.mkdir(parents=True, exist_ok=True)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip("cannot mount a tmpfs: %s" % r.stderr.strip())
            mounted.append(d)

    def umount():
        for d in reversed(mounted):
            subprocess.run(["umount", "-l", str(d)], capture_output=True)
    request.addfinalizer(umount)
    return mount


def fill(node):
    """Fills node's target disk; -> the filler file."""
    p = node.data / "targets" / "0" / "filler"
    block = b"\0" * 65536
    with open(p, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
    return p


# ---------------------------------------------------------------------------

def test_failed_write_at_head_does_not_reuse_its_version(faults, small_disks):
    """Bug 1 (R=2): the head's disk is full; an append fails with ENOSPC at
    the head after its successor applied it. Reads in turn never go back
    (bug 5); once space is back, a 4 KiB write is acknowledged and both
    replicas hold it, identical, at one version."""
    fc = faults(nstorage=2, replication=2, before_start=small_disks)
    members = chain_of(fc)
    head = fc.node(members[0][1])
    assert steps(fc, "w:0:0:65536:41")[0][:2] == ["w", "ok"]
    filler = fill(head)
    out = steps(fc, "w:0:65536:131072:42", retry_ms=5000)[0]
    assert out[:2] == ["w", "err"], out
    # The successor holds the failed append, the head does not: whatever
    # a reader sees first, it keeps seeing.
    seen = [l for l in steps(fc, *["r:0:0:196608"] * 6) if l[1] == "ok"]
    assert seen, "no read succeeded"
    versions = [int(l[2]) for l in seen]
    assert versions == sorted(versions), "reads went back: %s" % seen
    filler.unlink()
    out = steps(fc, "w:0:0:4096:43", retry_ms=20000)[0]
    assert out[:2] == ["w", "ok"], out
    reads = replica_reads(fc, 0, 196608, members)
    assert_same(reads)
    runs = next(iter(reads.values()))[4]
    assert runs.startswith("43x4096,41x61440"), reads
    check_copies(fc.storage, 2)


def test_whole_chunk_resend_keeps_a_truncate(faults, small_disks):
    """Bug 2 (R=3): the middle misses an overwrite (its disk is full), so
    the truncate after it reaches the middle as the whole chunk, which the
    middle must send on whole: the tail then reads zeros where the
    truncate cut, once the chunk grows again."""
    fc = faults(nstorage=3, replication=3, before_start=small_disks)
    members = chain_of(fc)
    middle = fc.node(members[1][1])
    assert steps(fc, "w:0:0:%d:41" % CHUNK)[0][:2] == ["w", "ok"]
    filler = fill(middle)
    out = steps(fc, "w:0:0:%d:42" % CHUNK, retry_ms=5000)[0]
    assert out[:2] == ["w", "err"], out
    filler.unlink()
    assert steps(fc, "t:0:4096", retry_ms=20000)[0][:2] == ["t", "ok"]
    assert steps(fc, "w:0:131072:4096:44", retry_ms=20000)[0][:2] == ["w", "ok"]
    reads = replica_reads(fc, 0, CHUNK, members)
    assert_same(reads)
    runs = reads[members[2][0]][4]
    assert runs == "42x4096,00x126976,44x4096", reads
    check_copies(fc.storage, 3)


@pytest.mark.timeout(180)
def test_queued_write_at_new_head_starts(faults):
    """Bug 3: the tail stops (SIGSTOP) while a write is forwarded to it; the
    head dies. The middle, head once the map changes, still waits on its
    forward (a long RPC timeout) when the client's retry arrives and
    queues behind it: it must start once that forward times out (it waited
    forever), and a later write must go through too."""
    fc = faults(nstorage=3, replication=3, flags=["--rpc.timeout=8s"])
    chain_id, members = chain_and_members(fc)
    head, middle, tail = (fc.node(n) for _, n in members)
    tail.proc.send_signal(signal.SIGSTOP)
    try:
        w1 = spawn([FAULT, fc.mgmt_addr, "steps", INO, CHUNK, "w:0:0:4096:41"],
                   fc.dir / "w1.out", "fault_driver w1",
                   env={"STRATA_TORTURE_RETRY_MS": "25000"})
        # Time for the write to go head -> middle -> (stopped) tail; the
        # middle's forward then waits out its 8 s RPC timeout.
        time.sleep(1.0)
        fc.kill9(head)
        # The head and the stopped tail both miss their leases; the
        # client's retry reaches the middle, now head, while its forward
        # still waits, and queues.
        wait_until(lambda: members_now(fc, chain_id) == [members[1][0]], 20, 0.2,
                   "chain %d to shrink to the middle" % chain_id)
        try:
            rc = w1.wait(timeout=40)
        finally:
            REGISTRY.discard(w1.pid)
        out = (fc.dir / "w1.out").read_text()
        assert rc == 0 and "w ok" in out, "the queued write did not complete: %s" % out
        v1 = int(out.split()[2])
        # The next write comes right after: no stale attempt of the first
        # one ran in between (once the queue stalled, the client's next
        # retry ran first and the stale attempt was applied after it).
        out = steps(fc, "w:0:0:4096:42", retry_ms=15000)[0]
        assert out[:2] == ["w", "ok"], out
        assert int(out[2]) == v1 + 1, "versions %d then %s: a stale attempt ran" % (v1, out[2])
    finally:
        tail.proc.send_signal(signal.SIGCONT)
    line = steps(fc, "r:0:0:4096")[0]
    assert line[1] == "ok" and line[4] == "42x4096", line


def test_storage_restart_after_mgmt_restart_is_seen(faults):
    """Bug 4: mgmt restarts, then a storage daemon is killed and restarted
    within its lease. mgmt must still see the restart (the incarnation is
    stored) and have its targets resync before they serve."""
    fc = faults(nstorage=3, replication=3)
    assert steps(fc, "w:0:0:65536:41", "w:1:0:65536:42")[1][:2] == ["w", "ok"]
    mgmt = fc.mgmt
    fc.kill9(mgmt)
    fc.restart(mgmt)
    wait_until(lambda: fc.map_or_none() is not None, 20, 0.2, "mgmt to be back")
    victim = fc.storage[1]
    since = len(mgmt.log)
    fc.kill9(victim)
    fc.restart(victim)
    wait_until(lambda: "node %d restarted within its lease" % victim.id in mgmt.log[since:], 15,
               0.1, "mgmt to see node %d restarted" % victim.id)
    fc.wait_healthy()
    members = chain_of(fc)
    assert_same(replica_reads(fc, 0, 65536, members))
    check_copies(fc.storage, 3)


def test_restarted_last_serving_member_takes_what_it_lacks(faults, small_disks):
    """6 (R=2): the head's disk is full; an append fails there with ENOSPC
    after the tail applied it, and readers see it at the tail. The tail
    dies, then the head: mgmt saw the head leave last, so when its new
    process comes back it serves the chain again, having lost the mark of
    the append it lacks. It must take the append from the tail (back
    first, syncing) before it serves: reads keep the append, and the
    tail's resync from the head does not replace it by the older copy."""
    fc = faults(nstorage=2, replication=2, before_start=small_disks)
    chain_id, members = chain_and_members(fc)
    (head_t, head_n), (tail_t, tail_n) = members
    head, tail = fc.node(head_n), fc.node(tail_n)
    assert steps(fc, "w:0:0:65536:41")[0][:2] == ["w", "ok"]
    filler = fill(head)
    out = steps(fc, "w:0:65536:131072:42", retry_ms=5000)[0]
    assert out[:2] == ["w", "err"], out
    seen = [l for l in steps(fc, *["r:0:0:196608"] * 4) if l[1] == "ok"]
    assert seen and seen[-1][4] == "41x65536,42x131072", "the append is not read: %s" % seen
    fc.kill9(tail)
    wait_until(lambda: members_now(fc, chain_id) == [head_t], 20, 0.2,
               "chain %d to drop its tail" % chain_id)
    fc.kill9(head)
    wait_until(lambda: members_now(fc, chain_id) == [], 20, 0.2,
               "chain %d to lose its head" % chain_id)
    filler.unlink()
    fc.restart(tail)
    wait_until(lambda: members_now(fc, chain_id) == [tail_t], 20, 0.2,
               "target %d back in chain %d, syncing" % (tail_t, chain_id))
    since = len(head.log)
    fc.restart(head)
    fc.wait_healthy()
    line = steps(fc, "r:0:0:196608")[0]
    assert line[1] == "ok" and line[4] == seen[-1][4], "the append is gone: %s" % line
    assert int(line[2]) >= int(seen[-1][2]), "reads went back: %s then %s" % (seen[-1], line)
    assert_same(replica_reads(fc, 0, 196608, members))
    check_copies(fc.storage, 2)
    assert re.search(r"target %d: chain %d recovered \(\d+ newer cop" % (head_t, chain_id),
                     head.log[since:]), "no recovery of chain %d" % chain_id


def test_replica_cut_off_from_mgmt_stops_serving(faults):
    """Reads are fenced by the lease: a tail cut off from mgmt only (its
    packets to mgmt dropped) is taken out of its chain, a write then goes
    through the rest; a client that still routes by the old map and reads
    the old tail must not get the data the write replaced."""
    fc = faults(nstorage=3, replication=3, use_netns=True)
    chain_id, members = chain_and_members(fc)
    old_ver = chain_version(fc)
    tail = fc.node(members[2][1])
    assert steps(fc, "w:0:0:4096:41")[0][:2] == ["w", "ok"]
    fc.fabric.block_to(tail.k, fc.fabric.service_ip)
    try:
        wait_until(lambda: members_now(fc, chain_id) == [members[0][0], members[1][0]], 20,
                   0.2, "chain %d to drop its tail" % chain_id)
        assert steps(fc, "w:0:0:4096:42", retry_ms=15000)[0][:2] == ["w", "ok"]
        line = steps(fc, "R:0:0:4096:%d:%d" % (members[2][0], old_ver))[0]
        assert not (line[1] == "ok" and line[4] == "41x4096"), \
            "the cut-off tail served replaced data: %s" % line
    finally:
        fc.fabric.unblock(tail.k, fc.fabric.service_ip)
    fc.wait_healthy()
    assert_same(replica_reads(fc, 0, 4096, members))


def test_chain_without_a_serving_member_is_reported(faults):
    """Every member of a chain down: the chain has no replica to serve from,
    clients get an error (never another node's guess), and `strata status`
    names the chain unavailable; once the members return it is whole."""
    fc = faults(nstorage=2, replication=2)
    assert steps(fc, "w:0:0:4096:41")[0][:2] == ["w", "ok"]
    for n in fc.storage:
        fc.kill9(n)
    wait_until(lambda: all(s != "s" for c in fc.map().chains for _, s in c["members"]),
               30, 0.2, "mgmt to see no serving member")
    print(fc.map())
    env = dict(os.environ, STRATA_MGMT=fc.mgmt_addr)
    r = subprocess.run([str(STRATA), "status"], capture_output=True, text=True, timeout=60,
                       env=env)
    print(r.stdout, r.stderr)
    assert r.returncode == 1, r.stderr     # health is not ok
    assert re.search(r"^health\s+unavailable \(2 chains", r.stdout, re.M), r.stdout
    assert re.search(r"^chain \d+ unavailable: no replica serving", r.stdout, re.M), r.stdout
    line = steps(fc, "r:0:0:4096", retry_ms=1000, timeout_ms=3000)[0]
    assert line[1] != "ok", line
    for n in fc.storage:
        fc.restart(n)
    fc.wait_healthy()
    r = subprocess.run([str(STRATA), "status"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert "unavailable" not in r.stdout, r.stdout
    assert steps(fc, "r:0:0:4096")[0][:2] == ["r", "ok"]
