"""Adding storage hosts to a running cluster (issue 22, "add a host"): a
3-storage-node R=3 'strata local up' cluster under a writer, two more
storage daemons added with 'strata local add'; the rebalancer (paused,
then resumed) moves chain members onto them until every node's fill is
within mgmt.rebalance_band of the mean, never leaving a chain short of R;
every acknowledged byte reads back from every replica, and 'strata
status' says ok (exit 0) at every step, as loopback daemons like
test_node_remove.py's."""

import json
import time

import pytest

from conftest import STRATA, STRATAD, fetch_metrics_text, parse_metrics, run, wait_until
from test_faults import FAULT, Map, Writer, audit, check_copies, faults  # noqa: F401 (fixture)


class _Local:
    """What test_faults' Writer and audit need of a cluster."""

    def __init__(self, c):
        self.dir = c.dir
        self.mgmt_addr = json.loads((c.dir / "cluster.json").read_text())["mgmt"]

    def map(self):
        r = run([FAULT, self.mgmt_addr, "map"], timeout=15)
        assert r.returncode == 0, r.stdout + r.stderr
        return Map(r.stdout)


def _status(c):
    r = run([STRATA, "status", "--json", "--dir", c.dir], timeout=30)
    assert r.stdout.strip(), "status printed nothing (rc %d): %s" % (r.returncode, r.stderr)
    return r.returncode, json.loads(r.stdout)


def _rebalance(c, *args):
    r = run([STRATA, "rebalance", *args, "--dir", c.dir], timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _on_exactly(nodes, copies):
    """Whether every chunk file on the nodes' targets is on exactly copies
    of them (the members that left removed theirs)."""
    seen = {}
    for n in nodes:
        for p in (n.data / "targets" / "0" / "chunks").glob("*/*"):
            seen[p.name] = seen.get(p.name, 0) + 1
    return bool(seen) and all(v == copies for v in seen.values())


def _fill(m, node_ids):
    return {n: sum(1 for ch in m.chains for t, _ in ch["members"] if m.node_of(t) == n)
            for n in node_ids}


@pytest.mark.timeout(180)
def test_add_storage_rebalance(cluster):
    c = cluster(3)
    lc = _Local(c)
    old = [n.id for n in c.storage_nodes]
    w = Writer(lc, 701, ino=0x701, nchunks=24, depth=4, maxlen=32768, read_pct=10)
    w.wait_acks(60)
    rc, j = _status(c)
    assert rc == 0 and j["health"] == "ok", j
    assert j["rebalance"]["state"] == "balanced", j["rebalance"]

    # Paused first: the added nodes are up but take nothing.
    r = _rebalance(c, "pause")
    assert "rebalance paused" in r.stdout, r.stdout
    r = run([STRATA, "local", "add", "--dir", c.dir, "--storage", "2"], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 storage node(s) added" in r.stdout, r.stdout
    c.reload()
    new = [n.id for n in c.storage_nodes if n.id not in old]
    assert len(new) == 2 and min(new) > max(n.id for n in c.nodes if n.id not in new), c.nodes
    time.sleep(1.0)     # five rebalancer ticks
    rc, j = _status(c)
    assert rc == 0 and j["health"] == "ok", j
    rb = j["rebalance"]
    assert rb["state"] == "paused" and rb["moves_done"] == 0 and rb["moves_pending"] > 0, rb
    assert all(n in [x["id"] for x in j["nodes"] if x["state"] == "up"] for n in new), j
    m = lc.map()
    assert all(v == 0 for v in _fill(m, new).values()), m
    r = run([STRATA, "rebalance", "status", "--dir", c.dir], timeout=30)
    assert r.returncode == 0 and "rebalance  paused" in r.stdout, r.stdout

    # Resumed: moves, one at a time, each chain at R serving throughout.
    _rebalance(c, "resume")
    seen = []

    def balanced():
        rc, j = _status(c)
        rb = j["rebalance"]
        seen.append((rc, j["health"], rb["state"], rb["moves_done"], rb["moves_in_flight"]))
        assert rc == 0 and j["health"] == "ok", (j, seen)
        assert j["chains"]["healthy"] == j["chains"]["total"], j["chains"]
        assert rb["moves_in_flight"] <= 1, rb
        return j if rb["state"] == "balanced" else None
    j = wait_until(balanced, 90, 0.3, "the rebalance to finish")
    print("status while rebalancing: %s" % seen)
    assert any(s[2] == "moving" for s in seen), seen
    rb = j["rebalance"]
    assert rb["moves_done"] >= 2 and rb["moves_pending"] == 0, rb
    assert rb["bytes_moved"] > 0, rb

    m = lc.map()
    assert m.full(3), m
    fill = _fill(m, old + new)
    mean = sum(fill.values()) / len(fill)
    assert all(v >= 1 for v in _fill(m, new).values()), fill
    # Within 10% of the mean, rounded outward to whole chain entries.
    assert max(fill.values()) <= -(-mean * 1.1 // 1) and min(fill.values()) >= mean * 0.9 // 1, fill
    mx = parse_metrics(fetch_metrics_text(c.mgmt_node.metrics_port)[2])
    assert mx["strata_mgmt_rebalance_moves_total"] == rb["moves_done"], mx
    assert mx["strata_mgmt_rebalance_moves_in_flight"] == 0, mx
    assert mx["strata_mgmt_rebalance_bytes_total"] == rb["bytes_moved"], mx
    assert mx["strata_mgmt_chains_short"] == 0, mx

    w.wait_acks(30, since=time.time(), what="writes after the rebalance")
    w.stop()
    audit(lc, w.log, 3)
    # The members that left remove their copies: every chunk file is on
    # exactly 3 nodes again, the same bytes on each.
    storage = [n for n in c.nodes if (n.data / "targets" / "0").exists()]
    wait_until(lambda: _on_exactly(storage, 3), 30, 0.3, "the old members to remove their copies")
    check_copies(storage, 3, min_chunks=10)
    # 'local' knows the added daemons: status lists them; down stops them
    # (the fixture's teardown checks that none survives).
    r = run([STRATA, "local", "status", "--dir", c.dir], timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    for n in new:
        assert any(l.split()[:1] == [str(n)] for l in r.stdout.splitlines()), r.stdout


def test_add_and_rebalance_refusals(cluster, tmp_path):
    c = cluster(1, daemon_flags="--mgmt.rebalance_paused=true")
    r = run([STRATA, "local", "add", "--dir", c.dir], timeout=30)
    assert r.returncode == 2 and "--storage N is required" in r.stderr, r.stderr
    r = run([STRATA, "local", "add", "--dir", c.dir, "--storage", "0"], timeout=30)
    assert r.returncode == 2 and "'0' is not a number of daemons" in r.stderr, r.stderr
    r = run([STRATA, "local", "add", "--dir", tmp_path / "none", "--storage", "1"], timeout=30)
    assert r.returncode == 1 and "no local cluster recorded" in r.stderr, r.stderr
    r = run([STRATA, "rebalance", "go", "--dir", c.dir], timeout=30)
    assert r.returncode == 2 and "unknown action 'go'" in r.stderr, r.stderr
    r = run([STRATA, "rebalance", "--dir", c.dir], timeout=30)
    assert r.returncode == 2 and "usage: strata rebalance" in r.stderr, r.stderr
    r = run([STRATA, "rebalance", "pause", "x", "--dir", c.dir], timeout=30)
    assert r.returncode == 2 and "unexpected argument 'x'" in r.stderr, r.stderr
    for key, bad in (("rebalance_band", "0"), ("rebalance_band", "101"),
                     ("rebalance_max_moves", "0"), ("rebalance_max_moves", "65")):
        r = run([STRATAD, "--check-config", "--data", tmp_path / "d", "--node.services=mgmt",
                 "--mgmt.%s=%s" % (key, bad)], timeout=30)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "key 'mgmt.%s': %s is out of range" % (key, bad) in r.stderr, r.stderr
    # A one-node cluster is balanced: status says so, with JSON; it
    # started paused (mgmt.rebalance_paused) until resumed.
    r = run([STRATA, "rebalance", "status", "--json", "--dir", c.dir], timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    j = json.loads(r.stdout)
    assert j["state"] == "balanced" and j["band_pct"] == 10 and j["max_moves"] == 1, j
    assert j["paused"] is True and j["moves"] == [], j
    _rebalance(c, "resume")
    assert json.loads(_rebalance(c, "status", "--json").stdout)["paused"] is False


@pytest.mark.timeout(240)
def test_hosts_added_under_a_writer_on_network_namespace_hosts(faults, strata):
    """Issue 22's "done when" on network-namespace hosts: a 3-host R=3
    cluster (each storage daemon in its own namespace) under a writer gets
    a fourth and a fifth host; the rebalancer moves chains onto them until
    fill is within the band, no chain is ever short of R, the old members
    remove their copies (every chunk on exactly R hosts, the same bytes),
    and every acknowledged byte reads back."""
    # A long lease: a stall of this shared machine must not expire a host.
    fc = faults(3, 3, use_netns=True, flags=["--mgmt.lease=30000ms"])
    w = Writer(fc, 611, ino=0x611, nchunks=32, depth=4, maxlen=32768, read_pct=10)
    w.wait_acks(100)
    added = [fc.add_storage(), fc.add_storage()]
    ids = [n.id for n in fc.storage]
    short = []

    def balanced():
        m = fc.map_or_none()
        if m is None:
            return None
        short.extend(c["id"] for c in m.chains
                     if sum(1 for _, s in c["members"] if s == "s") < 3)
        fill = _fill(m, ids)
        mean = sum(fill.values()) / len(fill)
        moving = any(len(c["members"]) != 3 for c in m.chains)
        if moving or not m.full(3) or min(fill[n.id] for n in added) == 0:
            return None
        if max(fill.values()) > -(-mean * 1.1 // 1) or min(fill.values()) < mean * 0.9 // 1:
            return None
        return fill
    fill = wait_until(balanced, 150, 0.3, "the chains to spread over 5 hosts")
    print("fill: %s" % fill)
    assert not short, "chains with fewer than 3 serving replicas: %s" % short
    r = strata("status", "--mgmt", fc.mgmt_addr)
    assert r.returncode == 0, r.stdout + r.stderr
    w.wait_acks(50, since=time.time(), what="writes after the rebalance")
    w.stop()
    audit(fc, w.log, 3)
    wait_until(lambda: _on_exactly(fc.storage, 3), 30, 0.3,
               "the old members to remove their copies")
    check_copies(fc.storage, 3, min_chunks=20)
    assert all(list((n.data / "targets" / "0" / "chunks").glob("*/*")) for n in added)
