"""'strata node remove' (issue 22, "remove a host"), on real daemons: a
node is retired for good once drained, or when dead (kill -9), its chains
then re-replicating from the survivors until health is ok again; a
removed node that comes back is refused at registration; bad arguments
and an up node are refused with the reason.

Clusters come from test_faults' harness: node 1 runs mgmt and meta,
nodes 2.. storage, with a 2 s lease."""

import json
import time

import pytest

from conftest import STRATA, run, wait_until
from test_faults import Map, Writer, audit, check_copies, faults  # noqa: F401 (fixture)


def _cli(fc, *args, timeout=30):
    return run([STRATA, *[str(a) for a in args], "--mgmt", fc.mgmt_addr], timeout=timeout)


def _status(fc):
    """(exit code, status --json as a dict)."""
    r = _cli(fc, "status", "--json")
    assert r.stdout.strip(), "status printed nothing (rc %d): %s" % (r.returncode, r.stderr)
    return r.returncode, json.loads(r.stdout)


def _node_ids(j):
    return sorted(n["id"] for n in j["nodes"])


def _refused_at_registration(fc, n):
    """n's log and mgmt's log say why n is kept out; n stays out of the map."""
    wait_until(lambda: "it was removed from the cluster" in n.log, 30, 0.2,
               "node %d to log its refusal" % n.id)
    assert "strata node remove" in n.log
    assert "give it a new node.id and an empty data directory" in n.log
    assert "registration of node %d refused: it was removed" % n.id in fc.mgmt.log
    assert n.id not in fc.map().nodes


@pytest.mark.timeout(120)
def test_remove_refusals(faults):
    """An up node in chains, an unknown node, node 0, a non-number, the
    mgmt node: each refused with the reason, the map unchanged."""
    fc = faults(4, 3)
    before = fc.map()
    up = fc.storage[0]
    held = sum(1 for c in before.chains for t, _ in c["members"] if before.node_of(t) == up.id)
    r = _cli(fc, "node", "remove", up.id)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("cannot remove node %d: it is up and holds %d replicas: drain it first "
            "('strata node drain %d')" % (up.id, held, up.id)) in r.stderr, r.stderr
    r = _cli(fc, "node", "remove", 99)
    assert r.returncode == 1 and "no node 99 in the cluster map" in r.stderr, r.stderr
    r = _cli(fc, "node", "remove", 1)
    assert r.returncode == 1 and "it runs the mgmt service" in r.stderr, r.stderr
    r = _cli(fc, "node", "remove", "-3")
    assert r.returncode == 2 and "unknown option '-3'" in r.stderr, r.stderr
    for bad in ("0", "abc", "4294967296", "3x"):
        r = _cli(fc, "node", "remove", bad)
        assert r.returncode == 2, (bad, r.stdout + r.stderr)
        assert "'%s' is not a node id" % bad in r.stderr, r.stderr
    r = run([STRATA, "node", "remove", "--mgmt", fc.mgmt_addr], timeout=30)
    assert r.returncode == 2 and "usage: strata node remove NODE_ID" in r.stderr, r.stderr
    after = fc.map()
    assert sorted(after.nodes) == sorted(before.nodes) and after.full(3), after


@pytest.mark.timeout(240)
def test_drain_then_remove(faults):
    """Drain, then remove: the node is gone from status, what was written
    reads back, health ok (exit 0); the still-running node is refused when
    it registers again."""
    # A long lease: nothing fails here (as test_drain_node).
    fc = faults(4, 3, flags=["--mgmt.lease=30000ms"])
    w = Writer(fc, 611, ino=0x611, nchunks=24, depth=4, maxlen=32768)
    w.wait_acks(80)
    victim = fc.storage[1]
    r = _cli(fc, "node", "drain", victim.id)
    assert r.returncode == 0, r.stdout + r.stderr
    # While it drains it may still hold replicas: refused, or already done.
    r = _cli(fc, "node", "remove", victim.id)
    if r.returncode:
        assert "it is draining and still holds" in r.stderr, r.stderr
    else:
        assert "removed" in r.stdout
    wait_until(lambda: (lambda m: m and not m.chains_of_node(victim.id) and m.full(3))(
        fc.map_or_none()), 90, 0.2, "node %d to be drained" % victim.id)
    w.wait_acks(20, since=time.time(), what="writes after the drain")
    w.stop()
    if victim.id in fc.map().nodes:
        r = _cli(fc, "node", "remove", victim.id)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "node %d removed from the cluster" % victim.id in r.stdout, r.stdout
    rc, j = wait_until(lambda: (lambda s: s if s[0] == 0 else None)(_status(fc)), 30, 0.5,
                       "status to say ok")
    assert j["health"] == "ok" and victim.id not in _node_ids(j), j
    audit(fc, w.log, 3)
    check_copies([n for n in fc.storage if n is not victim], 3, min_chunks=10)
    _refused_at_registration(fc, victim)
    # Removing it again: it is gone.
    r = _cli(fc, "node", "remove", victim.id)
    assert r.returncode == 1 and "no node %d in the cluster map" % victim.id in r.stderr


@pytest.mark.timeout(300)
def test_remove_dead_node(faults):
    """A storage node killed with kill -9 under a writer, then removed: its
    chains re-replicate from the survivors (status says so meanwhile),
    health and the exit code of status return to ok, every acknowledged
    byte reads back, and the node started again (after a restart of mgmt)
    is refused."""
    fc = faults(4, 3)
    w = Writer(fc, 612, ino=0x612, nchunks=24, depth=4, maxlen=32768)
    w.wait_acks(80)
    victim = fc.storage[2]
    fc.kill9(victim)
    wait_until(lambda: (fc.map_or_none() or Map("")).nodes.get(victim.id, ("", ""))[1]
               == "offline", 60, 0.2, "node %d offline" % victim.id)
    rc, j = _status(fc)
    assert rc == 1 and j["health"] == "degraded", j
    w.wait_acks(30, since=time.time(), what="writes with node %d dead" % victim.id)
    r = _cli(fc, "node", "remove", victim.id)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "node %d removed" % victim.id in r.stdout, r.stdout
    seen = []

    def ok():
        rc, j = _status(fc)
        seen.append((rc, j["health"], j["waiting_for"]))
        return (rc, j) if rc == 0 else None
    rc, j = wait_until(ok, 120, 0.3, "health ok after removing node %d" % victim.id)
    print("status after the remove, until ok: %s" % seen)
    # Until then it says why: the chains re-replicating, never a dead node.
    for src, health, why in seen[:-1]:
        assert src == 1 and health == "degraded", seen
        assert any(x.startswith("re-replicating") for x in why), seen
        assert not any("not up" in x for x in why), seen
    assert j["health"] == "ok" and victim.id not in _node_ids(j), j
    m = fc.map()
    assert m.full(3) and victim.id not in m.nodes, m
    assert fc.mgmt.metric("strata_mgmt_chains_resyncing") == 0
    assert fc.mgmt.metric("strata_mgmt_chains_short") == 0
    w.wait_acks(30, since=time.time(), what="writes after the re-replication")
    w.stop()
    audit(fc, w.log, 3)
    check_copies([n for n in fc.storage if n is not victim], 3, min_chunks=10)
    # The removal outlives mgmt: killed, started again, it still refuses.
    fc.kill9(fc.mgmt)
    fc.restart(fc.mgmt)
    fc.restart(victim)
    _refused_at_registration(fc, victim)
    rc, j = wait_until(lambda: (lambda s: s if s[0] == 0 else None)(_status(fc)), 30, 0.5,
                       "status ok after the mgmt restart")
    assert rc == 0 and j["health"] == "ok", j
