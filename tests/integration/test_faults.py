"""Fault tests (issue 5): real crashes (kill -9), real partitions (a node's
link taken down inside network namespaces, tests/integration/netns.py),
corrupted chunk files, a restarted mgmt and a drain, each under a stream
of writes, followed by an audit of every acknowledged byte.

The workload is tests/integration/fault_driver: 'writer' logs every
acknowledged write (chunk, offset, length, data seed, version) to a file;
'audit' rebuilds what each chunk must hold from that log and reads every
chunk R times in one client, which visits every serving replica. The
replicas are then compared on disk, chunk file by chunk file (version,
length, CRCs, data).

Clusters here are started by the harness itself (not 'strata local up'):
mgmt listens on a fixed port so that a restarted mgmt comes back at the
address everyone knows, and a storage daemon can run inside a network
namespace. Node 1 runs mgmt and meta, nodes 2.. storage; daemons run with
a short lease (FLAGS) so that a failure is noticed in about 2 s.

Seeds: every test prints the seeds it uses; the randomized test takes
STRATA_SOAK_SEED (default: from the clock, printed) and runs ~60 s, or
~10 min with STRATA_SOAK=1 (STRATA_SOAK_SECONDS overrides both;
STRATA_SOAK_PACE=0.5 halves the pauses between faults; STRATA_SOAK_FLAGS
adds daemon flags, e.g. "--storage.buffered_reads=true").
STRATA_FAULT_LEASE=S runs the daemons with another lease (default 2 s).
STRATA_FAULT_REPORT=FILE appends the measurements (kill-to-resume gap,
resync throughput) to FILE as JSON lines.
"""

import bisect
import json
import os
import random
import re
import signal
import subprocess
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest

import netns
import conftest
from conftest import (BUILD, REGISTRY, STRATA, STRATAD, LogFile, free_port, run,
                      sanitizer_reports, spawn, wait_until)
from test_storage import DATA_OFF, flip_byte, parse_chunk_file

FAULT = BUILD / "tests" / "integration" / "fault_driver"

# STRATA_FAULT_LEASE=S: another lease (the heartbeat is S/6, at most 1 s).
LEASE_S = float(os.environ.get("STRATA_FAULT_LEASE") or 2.0)
FLAGS = ["--mgmt.lease=%dms" % (LEASE_S * 1000),
         "--mgmt.heartbeat=%dms" % min(1000, LEASE_S * 1000 / 6), "--rpc.timeout=2s"]
CHUNK = 256 * 1024

SOAK = os.environ.get("STRATA_SOAK") == "1"


def _report(kind, **kw):
    """Prints a measurement and appends it to $STRATA_FAULT_REPORT."""
    rec = dict(kind=kind, **kw)
    print("MEASURE %s" % json.dumps(rec))
    path = os.environ.get("STRATA_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def _log_time(line):
    """Timestamp of a daemon log line (UTC, ms) as epoch seconds."""
    ts = line.split(" ", 1)[0]
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


# ---------------------------------------------------------------------------
# The cluster map, as 'fault_driver MGMT map' prints it.

class Map:
    def __init__(self, text):
        self.nodes, self.targets, self.chains = {}, {}, []
        self.services = {}      # (kind, node id) -> (addr, state)
        for line in text.splitlines():
            f = line.split()
            if not f:
                continue
            if f[0] == "map":
                self.version, self.replication = int(f[1]), int(f[2])
            elif f[0] == "node":
                self.nodes[int(f[1])] = (f[2], f[3])
            elif f[0] == "target":
                self.targets[int(f[1])] = (int(f[2]), f[3])
            elif f[0] == "service":
                self.services[(f[1], int(f[2]))] = (f[3], f[4])
            elif f[0] == "chain":
                members = [] if f[3] == "-" else [
                    (int(x.split(":")[0]), x.split(":")[1]) for x in f[3].split(",")]
                out = [int(x) for x in f[5].split(",")] if len(f) > 5 and f[4] == "out" else []
                self.chains.append(dict(id=int(f[1]), version=int(f[2]), members=members, out=out))
        self.text = text

    def node_of(self, target):
        return self.targets[target][0]

    def member_nodes(self, chain):
        return [self.node_of(t) for t, _ in chain["members"]]

    def chains_of_node(self, node_id):
        return [c for c in self.chains if node_id in self.member_nodes(c)]

    def full(self, r=None):
        """Every chain has R members, all serving."""
        r = r or self.replication
        return all(len(c["members"]) == r and all(s == "s" for _, s in c["members"])
                   for c in self.chains)

    def __str__(self):
        return self.text


# ---------------------------------------------------------------------------
# A cluster of stratad processes the test controls one by one.

class FNode(LogFile):
    def __init__(self, fc, node_id, services, argv, host, k=None):
        self.fc = fc
        self.id = node_id
        self.services = services
        self.argv = argv
        self.host = host                # address its RPC and metrics listen on
        self.k = k                      # index in the fabric (netns), or None
        self.data = fc.dir / ("node%d" % node_id)
        self.log_path = self.data / "stratad.log"
        self.proc = None
        self.pid = None
        self.addr = None
        self.metrics_port = None
        self.partitioned = False
        self.starts = 0

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def metrics(self):
        url = "http://%s:%d/metrics" % (self.host, self.metrics_port)
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name.strip()] = float(value)
        return out

    def metric(self, name):
        return self.metrics().get(name, 0.0)

    def __repr__(self):
        return "<node %d pid %s %s>" % (self.id, self.pid, self.addr)


class FaultCluster:
    """mgmt+meta on node 1 (fixed port), storage daemons on nodes 2..N+1,
    on loopback or each in its own network namespace of a Fabric. With
    meta_apart, node 1 runs mgmt alone and node N+2 the meta service."""

    def __init__(self, directory, nstorage, replication, flags=(), fabric=None,
                 meta_apart=False):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fabric = fabric
        self.replication = replication
        # A cluster key for the daemons (they listen beyond loopback in the
        # namespaces) and an admin token for the drivers and the CLI.
        self.token_file = self.dir / "admin.token"
        key = self.dir / "cluster.key"
        for argv in (["keygen", key],
                     ["token", "create", "--key", key, "--out", self.token_file, "--admin",
                      "--root", "--uid", "0", "--gid", "0", "--path", "rw:/",
                      "--expires", "never"]):
            r = run([STRATA, *[str(a) for a in argv]], timeout=30)
            assert r.returncode == 0, r.stderr
        # Plain TCP in the namespaces (node.insecure): these tests are
        # about failures, test_tls.py about TLS.
        self.flags = list(FLAGS) + ["--node.key_file=%s" % key,
                                    "--node.insecure=true"] + list(flags)
        host = fabric.service_ip if fabric else "127.0.0.1"
        self.mgmt_addr = "%s:%d" % (host, free_port(host))
        self.nodes = []
        first = "mgmt" if meta_apart else "mgmt,meta"
        argv = [STRATAD, "--data", self.dir / "node1", "--node.id=1",
                "--node.services=%s" % first, "--node.listen=%s" % self.mgmt_addr,
                "--node.metrics_listen=127.0.0.1:0", "--mgmt.replication=%d" % replication,
                "--mgmt.expect_nodes=%d" % nstorage] + self.flags
        self.nodes.append(FNode(self, 1, first, [str(a) for a in argv], "127.0.0.1"))
        for i in range(2, nstorage + 2):
            self.nodes.append(self._storage_node(i))
        self.meta_node = self.nodes[0]
        if meta_apart:
            i = nstorage + 2
            argv = [STRATAD, "--data", self.dir / ("node%d" % i), "--node.id=%d" % i,
                    "--node.services=meta", "--node.listen=127.0.0.1:0",
                    "--node.metrics_listen=127.0.0.1:0",
                    "--mgmt.address=%s" % self.mgmt_addr] + self.flags
            self.meta_node = FNode(self, i, "meta", [str(a) for a in argv], "127.0.0.1")
            self.nodes.append(self.meta_node)

    def _storage_node(self, i):
        """Storage node i: on loopback, or on host i of the fabric."""
        k = None
        prefix = []
        shost = "127.0.0.1"
        if self.fabric:
            k = i
            self.fabric.add_node(k)
            prefix = self.fabric.exec_prefix(k)
            shost = self.fabric.node_ip(k)
        argv = prefix + [STRATAD, "--data", self.dir / ("node%d" % i), "--node.id=%d" % i,
                         "--node.services=storage", "--node.listen=%s:0" % shost,
                         "--node.metrics_listen=%s:0" % shost,
                         "--mgmt.address=%s" % self.mgmt_addr] + self.flags
        return FNode(self, i, "storage", [str(a) for a in argv], shost, k)

    def add_storage(self):
        """Starts one more storage node (a new host of the fabric when the
        cluster has one), with the next free id. Returns it."""
        n = self._storage_node(max(x.id for x in self.nodes) + 1)
        self.nodes.append(n)
        return self.start_node(n)

    # -- processes --

    @property
    def mgmt(self):
        return self.nodes[0]

    @property
    def storage(self):
        return [n for n in self.nodes[1:] if n.services == "storage"]

    def node(self, node_id):
        return next(n for n in self.nodes if n.id == node_id)

    def start_node(self, n, timeout=30):
        assert not n.running, "%r already running" % n
        n.data.mkdir(parents=True, exist_ok=True)
        addr_file = n.data / "stratad.addr"
        if addr_file.exists():
            addr_file.unlink()
        n.proc = spawn(n.argv, n.log_path, "stratad node %d" % n.id, cwd=self.dir)
        n.pid = n.proc.pid
        n.starts += 1

        def started():
            try:
                lines = addr_file.read_text().split("\n")
            except OSError:
                lines = []
            if len(lines) >= 3 and lines[2].strip() == str(n.pid):
                return lines
            assert n.proc.poll() is None, "node %d exited with %s during start-up; log:\n%s" % (
                n.id, n.proc.returncode, n.log_tail())
            return None
        lines = wait_until(started, timeout, 0.02, "node %d to start" % n.id)
        n.addr = lines[0]
        n.metrics_port = int(lines[1])
        return n

    def start(self):
        for n in self.nodes:
            self.start_node(n)
        wait_until(lambda: self.map_or_none() and self.map_or_none().chains, 60, 0.2,
                   "mgmt to build the chains")
        return self

    def kill9(self, n):
        """SIGKILL; returns the time it was sent."""
        t = time.time()
        n.proc.send_signal(signal.SIGKILL)
        n.proc.wait(timeout=10)
        REGISTRY.discard(n.pid)
        return t

    def stop(self, n, sig=signal.SIGTERM, timeout=15):
        n.proc.send_signal(sig)
        try:
            rc = n.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait(timeout=10)
            raise AssertionError("node %d did not exit within %d s of signal %d; log:\n%s"
                                 % (n.id, timeout, sig, n.log_tail()))
        finally:
            REGISTRY.discard(n.pid)
        return rc

    def restart(self, n):
        """Starts n again with its command line (it must be stopped)."""
        return self.start_node(n)

    def partition(self, n):
        self.fabric.link_down(n.k)
        n.partitioned = True
        return time.time()

    def heal(self, n):
        self.fabric.link_up(n.k)
        n.partitioned = False
        return time.time()

    # -- the map --

    def map(self, timeout=15):
        r = run([FAULT, self.mgmt_addr, "map"], timeout=timeout)
        assert r.returncode == 0, "fault_driver map: %s%s" % (r.stdout, r.stderr)
        return Map(r.stdout)

    def map_or_none(self):
        try:
            r = run([FAULT, self.mgmt_addr, "map"], timeout=15)
        except subprocess.TimeoutExpired:
            return None
        return Map(r.stdout) if r.returncode == 0 else None

    def wait_healthy(self, timeout=60, nodes=None, what="the cluster to be whole again"):
        """Waits until the given storage nodes (default: all) are up and
        every chain has R serving members. Returns the map."""
        ids = [n.id for n in (nodes or self.storage)]
        last = [None]

        def ok():
            m = self.map_or_none()
            last[0] = m
            if m is None or not m.full(self.replication):
                return None
            if any(m.nodes.get(i, ("", ""))[1] != "up" for i in ids):
                return None
            return m
        try:
            return wait_until(ok, timeout, 0.25, what)
        except AssertionError as e:
            raise AssertionError("%s; last map:\n%s\n%s" % (e, last[0], self.logs_summary()))

    def logs_summary(self, n=15):
        return "\n".join("---- node %d ----\n%s" % (x.id, x.log_tail(n)) for x in self.nodes)

    # -- the end --

    def finish(self):
        problems = []
        for n in reversed(self.nodes):
            if n.running:
                if n.partitioned:
                    self.heal(n)
                try:
                    self.stop(n, timeout=15)
                except AssertionError as e:
                    problems.append(str(e))
        for n in self.nodes:
            problems += ["node %d: %s" % (n.id, l) for l in sanitizer_reports(n.log)]
        return problems


@pytest.fixture
def faults(tmp_path, request):
    """make(nstorage=3, replication=3, flags=(), netns=False) -> a started
    FaultCluster. netns=True runs every storage daemon in its own network
    namespace (skips with the reason when namespaces are not permitted).
    Teardown stops every daemon, checks their logs for sanitizer reports
    and removes the namespaces."""
    if not os.access(FAULT, os.X_OK):
        pytest.fail("%s not built (ninja -C %s tests/integration/fault_driver)" % (FAULT, BUILD),
                    pytrace=False)
    made, fabrics = [], []

    def make(nstorage=3, replication=3, flags=(), use_netns=False, before_start=None,
             meta_apart=False):
        """before_start(fc): called once the cluster's directories are
        named, before any daemon starts (e.g. to mount a target)."""
        fabric = None
        if use_netns:
            ok, why = netns.available()
            if not ok:
                pytest.skip("network namespaces unavailable: %s" % why)
            netns.sweep_stale()
            fabric = netns.Fabric()
            fabrics.append(fabric)
            fabric.create()
        fc = FaultCluster(tmp_path / ("c%d" % len(made)), nstorage, replication, flags, fabric,
                          meta_apart)
        made.append(fc)
        # The drivers and the CLI present its admin token.
        conftest.present_token_of(fc)
        if before_start:
            before_start(fc)
        return fc.start()

    def finish():
        for fc in made:
            conftest.forget_token_of(fc)
        problems = []
        try:
            for fc in made:
                problems += fc.finish()
        finally:
            for f in fabrics:
                problems += ["netns cleanup: %s" % e for e in f.destroy()]
        failed = any(getattr(request.node, "rep_" + w, None) is not None
                     and getattr(request.node, "rep_" + w).failed for w in ("setup", "call"))
        if failed:
            for fc in made:
                print(fc.logs_summary(40))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)

    request.addfinalizer(finish)
    return make


# ---------------------------------------------------------------------------
# The workload.

class Writer:
    """A fault_driver writer: writes (and some reads) until stopped, every
    acknowledged write in a log."""

    def __init__(self, fc, seed, ino, nchunks=24, depth=6, maxlen=65536, read_pct=15,
                 chunk=CHUNK, seconds=3600):
        self.fc = fc
        self.seed = seed
        self.log = fc.dir / ("writer-%d.log" % seed)
        self.out = fc.dir / ("writer-%d.out" % seed)
        self.argv = [FAULT, fc.mgmt_addr, "writer", self.log, seed, ino, nchunks, chunk, depth,
                     seconds, maxlen, read_pct]
        print("writer: %s" % " ".join(str(a) for a in self.argv))
        self.proc = spawn(self.argv, self.out, "fault_driver writer")
        self.summary = None
        self._pos = 0
        self._acks = []         # ack times, in log order (non-decreasing)

    def acks(self, since=0.0):
        """Times (epoch s) of the writes acknowledged after since (the log
        is read incrementally: only whole new lines)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self._pos)
                chunk = f.read()
        except OSError:
            chunk = b""
        end = chunk.rfind(b"\n") + 1
        self._pos += end
        for line in chunk[:end].decode().splitlines():
            if line.startswith("W "):
                self._acks.append(int(line.split()[1]) / 1e6)
        i = bisect.bisect_right(self._acks, since)
        return self._acks[i:]

    def wait_acks(self, n, since=0.0, timeout=30, what="writes to be acknowledged"):
        def enough():
            assert self.proc.poll() is None, "writer exited: %s" % self.output()
            return len(self.acks(since)) >= n
        wait_until(enough, timeout, 0.1, "%d %s (writer seed %d)" % (n, what, self.seed))

    def output(self):
        try:
            return self.out.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self, timeout=60):
        """SIGTERM: it finishes what is in flight. Asserts no I/O failed and
        no read mismatched. Returns the summary line."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("writer (seed %d) did not finish within %d s of SIGTERM: %s"
                                 % (self.seed, timeout, self.output()))
        finally:
            REGISTRY.discard(self.proc.pid)
        out = self.output()
        assert rc == 0, "writer seed %d exited %d: %s\n  command: %s" % (
            self.seed, rc, out, " ".join(str(a) for a in self.argv))
        self.summary = out.strip().splitlines()[-1]
        print(self.summary)
        return self.summary

    def gap_after(self, t_event, window=None):
        """The longest pause between two acknowledgements that spans or
        follows t_event (within window s): -> (start, end) epoch seconds."""
        window = window or LEASE_S + 20
        acks = self.acks(t_event - 5)
        best = None
        for a, b in zip(acks, acks[1:]):
            if b < t_event or a > t_event + window:
                continue
            if best is None or b - a > best[1] - best[0]:
                best = (a, b)
        return best


def audit(fc, log, times=3, timeout=120):
    """Reads every chunk of the writer log 'times' times (every replica)
    and checks every acknowledged byte."""
    argv = [FAULT, fc.mgmt_addr, "audit", log, times]
    r = run(argv, timeout=timeout)
    assert r.returncode == 0, "audit failed (%d):\n%s%s\n  command: %s" % (
        r.returncode, r.stdout[-4000:], r.stderr[-2000:], " ".join(str(a) for a in argv))
    print(r.stdout.strip())
    return r.stdout


def check_copies(nodes, copies, min_chunks=1):
    """Every chunk file on the nodes' targets exists on exactly 'copies' of
    them, with the same version, length, CRCs and bytes (docs/chunk-engine.md
    format, parsed by test_storage.parse_chunk_file). Returns the count."""
    names = {}
    for n in nodes:
        root = n.data / "targets" / "0"
        for p in (root / "chunks").glob("*/*"):
            assert not p.name.endswith(".tmp"), "temp file on a quiet cluster: %s" % p
            names.setdefault(p.relative_to(root), []).append(n)
    assert len(names) >= min_chunks, "only %d chunk files, expected >= %d" % (len(names),
                                                                              min_chunks)
    problems = []
    for rel, holders in sorted(names.items()):
        if len(holders) != copies:
            problems.append("%s on nodes %s, expected %d copies" % (rel, [n.id for n in holders],
                                                                  copies))
            continue
        ref = parse_chunk_file(holders[0].data / "targets" / "0" / rel)
        for n in holders[1:]:
            other = parse_chunk_file(n.data / "targets" / "0" / rel)
            for key in ("version", "length", "crc", "blocks", "data"):
                if other[key] != ref[key]:
                    what = key if key in ("data", "blocks") else "%s %r vs %r" % (
                        key, ref[key], other[key])
                    problems.append("%s: node %d and node %d differ in %s" % (
                        rel, holders[0].id, n.id, what))
                    break
    assert not problems, "replicas differ on disk:\n  " + "\n  ".join(problems[:20])
    return len(names)


def resync_window(fc, n, since):
    """(first 'resync of chain ... starts' on n, last 'in sync' for its
    target in mgmt's log) after epoch time since, from the log timestamps."""
    starts = [_log_time(l) for l in n.log.splitlines() if "resync of chain" in l and "starts" in l]
    starts = [t for t in starts if t >= since - 1]
    tids = set(re.findall(r"target (\d+): resync of chain", n.log))
    done = [_log_time(l) for l in fc.mgmt.log.splitlines()
            if re.search(r"target (%s) is in sync" % "|".join(tids or ["-"]), l)]
    done = [t for t in done if t >= since - 1]
    return (min(starts) if starts else None, max(done) if done else None)


def caught_up_by_copies(fc, n, since):
    """A node that missed writes got chunks copied: by its resync (the
    synced-chunks metric) or by whole-chunk resends from its predecessor
    (logged there), whichever reached a chunk first."""
    if n.metric("strata_storage_synced_chunks_total") > 0:
        return True
    mine = [t for t, (nd, _) in fc.map().targets.items() if nd == n.id]
    rx = re.compile(r"to target (%s) at .*the whole chunk is resent" % "|".join(map(str, mine)))
    return any(rx.search(l) and _log_time(l) >= since - 1
               for o in fc.storage if o is not n for l in o.log.splitlines())


# ---------------------------------------------------------------------------
# Tests.

@pytest.mark.timeout(150)
def test_kill9_storage_mid_writes(faults):
    """kill -9 of a storage daemon (R=3) under a stream of writes: writes
    pause about a lease and go on; the daemon comes back and resyncs; every
    acknowledged write reads back intact from every replica, and the
    replicas are identical on disk."""
    seed = 501
    rng = random.Random(seed)
    fc = faults(3, 3)
    w = Writer(fc, seed, ino=0x501, nchunks=24, depth=4, maxlen=16384, read_pct=10)
    w.wait_acks(100)
    victim = rng.choice(fc.storage)
    print("seed %d: kill -9 node %d" % (seed, victim.id))
    t_kill = fc.kill9(victim)
    w.wait_acks(100, since=t_kill, timeout=30, what="writes after the kill")
    gap = w.gap_after(t_kill)
    m = fc.map()
    assert all(victim.id not in m.member_nodes(c) for c in m.chains), m
    assert m.nodes[victim.id][1] == "offline", m
    _report("kill9_resume", lease_s=LEASE_S, flags=" ".join(FLAGS), build=str(BUILD),
            pause_s=round(gap[1] - gap[0], 3), resume_after_kill_s=round(gap[1] - t_kill, 3))
    # How long the pause lasts is measured (reported above), not asserted:
    # that writes resume at all is what wait_acks(timeout=30) checks.
    t_restart = time.time()
    fc.restart(victim)
    fc.wait_healthy(60)
    w.wait_acks(50, since=time.time(), what="writes after the resync")
    w.stop()
    audit(fc, w.log, 3)
    check_copies(fc.storage, 3, min_chunks=20)
    assert caught_up_by_copies(fc, victim, t_restart), \
        "node %d missed writes but neither resync nor a whole-chunk resend copied any" % victim.id
    start, done = resync_window(fc, victim, t_restart)
    assert start and done, "no resync logged on node %d / in sync in mgmt" % victim.id


@pytest.mark.timeout(200)
def test_kill_head_middle_tail(faults):
    """Chain 1's head, then its middle replica, then its tail (positions
    read from the map each time) are killed in turn, each brought back and
    resynced before the next, under a stream of writes."""
    seed = 502
    fc = faults(3, 3)
    w = Writer(fc, seed, ino=0x502, nchunks=24, depth=4, maxlen=16384, read_pct=10)
    w.wait_acks(50)
    for pos, name in ((0, "head"), (1, "middle"), (-1, "tail")):
        m = fc.map()
        chain = m.chains[0]
        assert len(chain["members"]) == 3, m
        victim = fc.node(m.member_nodes(chain)[pos])
        print("kill -9 of chain %d's %s: node %d" % (chain["id"], name, victim.id))
        t_kill = fc.kill9(victim)
        w.wait_acks(50, since=t_kill, timeout=30, what="writes after killing the %s" % name)
        m2 = fc.map()
        c2 = next(c for c in m2.chains if c["id"] == chain["id"])
        assert victim.id not in m2.member_nodes(c2) and len(c2["members"]) == 2, m2
        assert c2["version"] > chain["version"], m2
        fc.restart(victim)
        fc.wait_healthy(60, what="the %s (node %d) to resync" % (name, victim.id))
        w.wait_acks(30, since=time.time(), what="writes after the %s resynced" % name)
    w.stop()
    audit(fc, w.log, 3)
    check_copies(fc.storage, 3, min_chunks=20)


@pytest.mark.timeout(200)
def test_partition_heal_resync(faults):
    """A storage node's link goes down (network namespaces) for longer than
    the lease while writes go on: mgmt takes it out of its chains, writes
    continue on the shortened chains; the link comes back: the node
    re-registers, resyncs, and every replica of every chunk is identical on
    disk; every acknowledged write reads back from every replica."""
    seed = 503
    fc = faults(3, 3, use_netns=True)
    w = Writer(fc, seed, ino=0x503, nchunks=24, depth=4, maxlen=32768, read_pct=10)
    w.wait_acks(80)
    m = fc.map()
    victim = fc.node(m.member_nodes(m.chains[0])[1])
    print("seed %d: partition node %d (%s, netns %s)" % (seed, victim.id, victim.host,
                                                      fc.fabric.ns(victim.k)))
    t_cut = fc.partition(victim)
    wait_until(lambda: (fc.map_or_none() or m).nodes[victim.id][1] == "offline", 60,
               0.2, "mgmt to mark node %d offline" % victim.id)
    t_off = time.time()
    # Writes go on while it is cut off, for a while longer than the lease.
    w.wait_acks(100, since=t_off, timeout=30, what="writes during the partition")
    time.sleep(max(0.0, t_cut + 2 * LEASE_S + 1 - time.time()))
    assert victim.running, "the partitioned daemon died: %s" % victim.log_tail()
    w.wait_acks(20, since=time.time(), timeout=30, what="writes late in the partition")
    t_heal = fc.heal(victim)
    m = fc.wait_healthy(60, what="node %d to resync after the partition" % victim.id)
    w.wait_acks(50, since=time.time(), what="writes after the heal")
    w.stop()
    assert caught_up_by_copies(fc, victim, t_heal), \
        "node %d missed writes but neither resync nor a whole-chunk resend copied any" % victim.id
    audit(fc, w.log, 3)
    n = check_copies(fc.storage, 3, min_chunks=20)
    start, done = resync_window(fc, victim, t_heal)
    print("partition %.1f s; resync %s..%s; %d chunks identical on 3 replicas"
          % (t_heal - t_cut, start, done, n))


def _write_and_corrupt(fc, ino, nchunks, seed, precheck=True):
    """Writes nchunks whole chunks (fill), then flips one data byte of each
    chunk's copy on one node (chunk k on storage node k mod N); precheck:
    the on-disk comparison sees the damage (not with a scrubber running:
    it may already be repairing). Returns (writer log, [(node, chunk idx,
    path)])."""
    log = fc.dir / ("fill-%d.log" % seed)
    r = run([FAULT, fc.mgmt_addr, "fill", log, seed, ino, nchunks, CHUNK, 4], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = []
    for k in range(nchunks):
        n = fc.storage[k % len(fc.storage)]
        hits = list((n.data / "targets" / "0" / "chunks").glob("*/%016x.%016x" % (ino, k)))
        assert len(hits) == 1, hits
        flip_byte(hits[0], DATA_OFF + 70000 + 977 * k)
        bad.append((n, k, hits[0]))
    if precheck:
        with pytest.raises(AssertionError, match="differ in data"):
            check_copies(fc.storage, 3)
    return log, bad


@pytest.mark.timeout(120)
def test_corrupt_chunk_repaired_on_read(faults):
    """A byte flipped in a chunk file: reads stay correct (another replica
    serves), and the read that hit the bad copy has it rewritten from a good
    replica: the file on disk is correct again."""
    fc = faults(3, 3)
    log, bad = _write_and_corrupt(fc, 0x504, 6, 504)
    before = {n.id: n.metric("strata_storage_repaired_total") for n in fc.storage}
    audit(fc, log, 3)           # every replica read: each bad copy is hit
    wait_until(lambda: all(n.metric("strata_storage_repaired_total") >= before[n.id] + 2
                           for n in fc.storage), 30, 0.2, "the bad copies to be repaired")
    for n in fc.storage:
        assert n.metric("strata_storage_integrity_errors_total") >= 2, n
    check_copies(fc.storage, 3, min_chunks=6)
    audit(fc, log, 3)


@pytest.mark.timeout(120)
def test_corrupt_chunk_repaired_by_scrubber(faults):
    """With --storage.scrub_rate_mb the scrubber finds a flipped byte that no
    read touches and repairs the copy from a good replica."""
    fc = faults(3, 3, flags=["--storage.scrub_rate_mb=50"])
    log, bad = _write_and_corrupt(fc, 0x505, 6, 505, precheck=False)
    wait_until(lambda: all(n.metric("strata_storage_repaired_total") >= 2 for n in fc.storage),
               40, 0.25, "the scrubber to repair the bad copies")
    for n in fc.storage:
        assert n.metric("strata_storage_scrubbed_total") > 0
        assert n.metric("strata_storage_integrity_errors_total") >= 2
    check_copies(fc.storage, 3, min_chunks=6)
    audit(fc, log, 3)


@pytest.mark.timeout(150)
def test_meta_found_through_the_map(faults, tmp_path):
    """The meta service on a node of its own, not at the mgmt address:
    clients find it in the cluster map. Killed, it is marked offline; a
    client that connects meanwhile waits for it and goes on once it is
    back; after mgmt restarts, the service is listed again."""
    fc = faults(nstorage=2, replication=2, meta_apart=True)
    meta = fc.meta_node
    m = wait_until(lambda: (lambda mm: mm if ("meta", meta.id) in mm.services else None)(
        fc.map()), 20, 0.2, "the meta service in the map")
    assert m.services[("meta", meta.id)] == (meta.addr, "up"), m
    assert ("meta", 1) not in m.services, m
    env = dict(os.environ, STRATA_MGMT=fc.mgmt_addr)
    cli = [str(BUILD / "src/cli/strata")]
    src = tmp_path / "in"
    src.write_bytes(os.urandom(300000))
    r = subprocess.run(cli + ["put", "-q", str(src), "/f"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["get", "-q", "/f", str(tmp_path / "out")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out").read_bytes() == src.read_bytes()

    fc.kill9(meta)
    wait_until(lambda: fc.map().services.get(("meta", meta.id), ("", ""))[1] == "offline",
               LEASE_S * 3, 0.2, "mgmt to mark the meta service offline")
    r = subprocess.run(cli + ["status"], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr     # health is not ok
    assert re.search(r"^services\s+meta 0 up of 1", r.stdout, re.M), r.stdout
    assert re.search(r"^namespace\s+unavailable \(no meta service up", r.stdout, re.M), r.stdout
    assert re.search(r"^health\s+unavailable \(no meta service up\)", r.stdout, re.M), r.stdout
    assert re.search(r"^meta\s+%d\s+\S+\s+offline" % meta.id, r.stdout, re.M), r.stdout
    ls = subprocess.Popen(cli + ["ls", "/"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        assert ls.poll() is None, "ls did not wait for the meta service: %s" % (
            ls.communicate(),)
        fc.restart(meta)
        out, err = ls.communicate(timeout=40)
    finally:
        if ls.poll() is None:
            ls.kill()
            ls.wait()
    assert ls.returncode == 0, err
    assert "f" in out.split(), out
    assert fc.map().services[("meta", meta.id)][1] == "up"

    fc.kill9(fc.mgmt)
    fc.restart(fc.mgmt)
    wait_until(lambda: (lambda mm: mm is not None and
                        mm.services.get(("meta", meta.id), ("", ""))[1] == "up")(
        fc.map_or_none()), 30, 0.2, "the meta service listed again after mgmt restarted")


@pytest.mark.timeout(150)
def test_mgmt_restart_mid_workload(faults):
    """mgmt (node 1) killed with -9 under a stream of writes and started
    again with the same command line: the map is kept (same version or
    newer), the storage daemons reconnect and heartbeat, and a storage
    failure after that is handled (the client refreshes its map from the
    new mgmt); the workload completes and audits clean."""
    seed = 506
    fc = faults(3, 3)
    w = Writer(fc, seed, ino=0x506, nchunks=24, depth=4, maxlen=16384, read_pct=10)
    w.wait_acks(50)
    before = fc.map()
    fc.kill9(fc.mgmt)
    # The data path does not need mgmt.
    w.wait_acks(50, since=time.time(), what="writes while mgmt is down")
    mark = len(fc.mgmt.log)
    fc.restart(fc.mgmt)
    assert re.search(r"cluster map version \d+ loaded", fc.mgmt.log[mark:]), fc.mgmt.log_tail()
    after = fc.wait_healthy(30, what="the map after the mgmt restart")
    assert after.version >= before.version, (before, after)
    assert [c["members"] for c in after.chains] == [c["members"] for c in before.chains]
    # Every storage daemon heartbeats to the new mgmt: none is expired
    # after more than a lease.
    time.sleep(LEASE_S * 2)
    m = fc.wait_healthy(60)
    assert all(m.nodes[n.id][1] == "up" for n in fc.storage), m
    w.wait_acks(50, since=time.time(), what="writes after the mgmt restart")
    # A failure now needs the new mgmt: detection, a new map, clients refetch.
    victim = fc.storage[0]
    t_kill = fc.kill9(victim)
    w.wait_acks(50, since=t_kill, timeout=30, what="writes after a kill behind the new mgmt")
    fc.restart(victim)
    fc.wait_healthy(60)
    # And a clean SIGTERM restart of mgmt too.
    fc.stop(fc.mgmt)
    fc.restart(fc.mgmt)
    fc.wait_healthy(30)
    w.wait_acks(50, since=time.time(), what="writes after the second mgmt restart")
    w.stop()
    audit(fc, w.log, 3)
    check_copies(fc.storage, 3, min_chunks=20)


@pytest.mark.timeout(150)
def test_drain_node(faults, strata):
    """'strata node drain' with 4 storage hosts (network namespaces) and R=3, under writes: new
    replicas resync, then the drained node leaves every chain; no chain is
    ever short; all data reads back from every replica."""
    seed = 507
    # Nothing fails here: a long lease keeps a stall on this shared machine
    # from expiring a healthy node (which would shorten a chain).
    fc = faults(4, 3, flags=["--mgmt.lease=30000ms"], use_netns=True)
    w = Writer(fc, seed, ino=0x507, nchunks=32, depth=4, maxlen=32768, read_pct=10)
    w.wait_acks(100)
    m = fc.map()
    victim = max(fc.storage, key=lambda n: len(m.chains_of_node(n.id)))
    assert m.chains_of_node(victim.id), m
    r = strata("node", "drain", victim.id, "--mgmt", fc.mgmt_addr)
    assert r.returncode == 0, r.stdout + r.stderr
    short = []

    def drained():
        mm = fc.map_or_none()
        if mm is None:
            return None
        short.extend(c["id"] for c in mm.chains
                     if sum(1 for _, s in c["members"] if s == "s") < 3)
        if mm.chains_of_node(victim.id) or not mm.full(3):
            return None
        return mm
    m = wait_until(drained, 60, 0.2, "node %d to be drained" % victim.id)
    assert not short, "chains with fewer than 3 serving replicas during the drain: %s" % short
    assert m.nodes[victim.id][1] == "draining", m
    assert fc.mgmt.metric("strata_mgmt_chains_short") == 0
    w.wait_acks(50, since=time.time(), what="writes after the drain")
    w.stop()
    audit(fc, w.log, 3)
    others = [n for n in fc.storage if n is not victim]
    check_copies(others, 3, min_chunks=20)
    # The drained node removes its copies of the chains it left: it holds
    # no chunk (docs/failures.md, "Space of a chain a target left").
    wait_until(lambda: not list((victim.data / "targets" / "0" / "chunks").glob("*/*")), 30,
               0.3, "node %d to remove its copies" % victim.id)
    assert victim.metric("strata_storage_reclaimed_chunks_total") >= 20
    check_copies(fc.storage, 3, min_chunks=20)


@pytest.mark.timeout(240)
def test_resync_throughput(faults):
    """A storage node down while 24 MiB (STRATA_RESYNC_MB) is written, then
    started again: it copies what it missed; bytes copied / time from its
    resync's start to mgmt's 'in sync' is the resync throughput."""
    mb = int(os.environ.get("STRATA_RESYNC_MB", "24"))
    fc = faults(3, 3)
    victim = fc.storage[1]
    fc.kill9(victim)
    wait_until(
        lambda: (fc.map_or_none() or Map("")).nodes.get(victim.id, ("", ""))[1] == "offline",
        60, 0.2, "node %d offline" % victim.id)
    log = fc.dir / "fill.log"
    r = run([FAULT, fc.mgmt_addr, "fill", log, 508, 0x508, mb, 1 << 20, 8], timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip())
    t0 = time.time()
    fc.restart(victim)
    fc.wait_healthy(180, what="node %d to resync %d MiB" % (victim.id, mb))
    t_seen = time.time()
    start, done = resync_window(fc, victim, t0)
    copied = victim.metric("strata_storage_synced_bytes_total")
    chunks = victim.metric("strata_storage_synced_chunks_total")
    assert copied >= mb * (1 << 20), "copied %d bytes, expected >= %d MiB" % (copied, mb)
    assert start and done and done >= start
    dt = max(done - start, 1e-3)
    _report("resync", build=str(BUILD), mib=mb, chunks=chunks, bytes=copied,
            restart_to_in_sync_s=round(done - t0, 3), resync_s=round(dt, 3),
            mb_per_s=round(copied / 1e6 / dt, 1), seen_by_test_s=round(t_seen - t0, 3))
    audit(fc, log, 3)
    check_copies(fc.storage, 3, min_chunks=mb)


@pytest.mark.timeout(180)
def test_resync_source_killed_mid_pass(faults):
    """The source of a resync is killed while the returning target copies
    from it: the target must fall back to another source and must not
    delete what it already holds intact (chunks nobody wrote while it was
    away); everything reads back afterwards."""
    fc = faults(3, 3)
    kept = fc.dir / "kept.log"      # written before the target goes: it keeps them
    r = run([FAULT, fc.mgmt_addr, "fill", kept, 1, 0x702, 200, 65536, 8], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    m = fc.map()
    target = fc.node(m.member_nodes(m.chains[0])[-1])
    fc.kill9(target)
    wait_until(lambda: (fc.map_or_none() or m).nodes[target.id][1] == "offline", 60,
               0.2, "node %d offline" % target.id)
    missed = fc.dir / "missed.log"  # written while it is away; sorts before the kept ones
    r = run([FAULT, fc.mgmt_addr, "fill", missed, 2, 0x701, 400, CHUNK, 8], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    def files(ino):
        return len(list((target.data / "targets" / "0" / "chunks").glob("*/%016x.*" % ino)))

    def kept_files():
        return files(0x702)
    assert kept_files() == 200 and files(0x701) == 0
    mark = len(target.log)
    fc.restart(target)
    wait_until(lambda: "resync of chain" in target.log[mark:], 60, 0.01, "the resync to start")
    m = fc.map()
    chain = next(c for c in m.chains if c["members"][-1][1] == "y")
    source = fc.node(m.node_of([t for t, s in chain["members"] if s == "s"][-1]))
    # Kill the source once the copying is under way (past the listing).
    wait_until(lambda: files(0x701) >= 10, 60, 0.005, "the resync to copy chunks")
    # Frozen first, so that the check below holds at the kill: the copy of
    # the source's chain was still under way.
    os.kill(source.pid, signal.SIGSTOP)
    try:
        assert "caught up with chain %d" % chain["id"] not in target.log[mark:], \
            "the resync of chain %d ended before its source stopped: use more chunks" % chain["id"]
    finally:
        fc.kill9(source)
    low = kept_files()
    deadline = time.time() + 5
    while time.time() < deadline:
        low = min(low, kept_files())
        time.sleep(0.02)
    fc.restart(source)
    fc.wait_healthy(120)
    synced = target.metric("strata_storage_synced_chunks_total")
    print("source node %d killed mid-resync: node %d kept %d of its 200 intact chunks at the "
          "lowest, copied %d chunks (400 missed)" % (source.id, target.id, low, synced))
    audit(fc, missed, 3)
    audit(fc, kept, 3)
    check_copies(fc.storage, 3, min_chunks=600)
    assert low == 200, "the syncing target deleted %d intact chunks when its source died" % (
        200 - low)


@pytest.mark.timeout(900 if SOAK else 300)
def test_soak_random(faults):
    """A seeded random sequence of kills (-9), restarts, partitions (when
    network namespaces are available), heals and mgmt restarts under a
    stream of writes and reads, at most one storage node faulty at a time;
    then everything is healed, and every acknowledged byte is audited on
    every replica and the replicas compared on disk."""
    # make test replays one fixed sequence; make soak draws a new one.
    seed = int(os.environ.get("STRATA_SOAK_SEED") or
               (int(time.time() * 1000) % 1000000 if SOAK else 4242))
    seconds = float(os.environ.get("STRATA_SOAK_SECONDS") or (600 if SOAK else 60))
    print("test_soak_random: seed %d (STRATA_SOAK_SEED=%d to replay), %.0f s" % (seed, seed,
                                                                                seconds))
    pace = float(os.environ.get("STRATA_SOAK_PACE") or 1.0)     # scales the pauses
    rng = random.Random(seed)
    use_netns = netns.available()[0]
    flags = tuple(os.environ.get("STRATA_SOAK_FLAGS", "").split())
    fc = faults(4, 3, flags=flags, use_netns=use_netns)
    w = Writer(fc, seed, ino=0x5000 + seed % 1000, nchunks=32, depth=6, maxlen=65536,
               read_pct=20)
    w.wait_acks(50)
    faulty = {}                 # node -> "killed" | "partitioned"
    events = []
    t_end = time.time() + seconds

    def note(what):
        events.append("%.1f %s" % (time.time() - (t_end - seconds), what))
        print("seed %d: %s" % (seed, events[-1]))

    try:
        while time.time() < t_end:
            time.sleep(rng.uniform(0.5, 3.0) * pace)
            healthy = [n for n in fc.storage if n not in faulty]
            r = rng.random()
            if faulty and r < 0.2:
                continue        # the fault lasts longer
            if faulty:
                n = rng.choice(sorted(faulty, key=lambda x: x.id))
                if faulty.pop(n) == "killed":
                    fc.restart(n)
                    note("restart node %d" % n.id)
                else:
                    fc.heal(n)
                    note("heal node %d" % n.id)
                continue
            if r < 0.93:
                # A node restarted or healed a moment ago may still be
                # resyncing: a new fault waits until every chain is whole.
                fc.wait_healthy(90, what="the cluster to heal (seed %d)" % seed)
            if r < 0.55:
                n = rng.choice(healthy)
                fc.kill9(n)
                faulty[n] = "killed"
                note("kill -9 node %d" % n.id)
            elif r < 0.85 and use_netns:
                n = rng.choice(healthy)
                fc.partition(n)
                faulty[n] = "partitioned"
                note("partition node %d" % n.id)
            elif r < 0.93:
                if rng.random() < 0.5:
                    fc.kill9(fc.mgmt)
                    note("kill -9 mgmt")
                else:
                    fc.stop(fc.mgmt)
                    note("SIGTERM mgmt")
                time.sleep(rng.uniform(0.2, 1.5))
                fc.restart(fc.mgmt)
                note("restart mgmt")
            else:
                fc.wait_healthy(90, what="the cluster to heal (seed %d)" % seed)
                note("healthy (map version %d)" % fc.map().version)
            assert w.proc.poll() is None, "writer died (seed %d): %s" % (seed, w.output())
        for n, how in list(faulty.items()):
            if how == "killed":
                fc.restart(n)
                note("restart node %d" % n.id)
            else:
                fc.heal(n)
                note("heal node %d" % n.id)
        faulty.clear()
        fc.wait_healthy(120, what="the cluster to heal at the end (seed %d)" % seed)
        w.wait_acks(50, since=time.time(), timeout=60, what="writes at the end")
        w.stop(timeout=90)
        audit(fc, w.log, 3, timeout=240)
        n = check_copies(fc.storage, 3, min_chunks=20)
        note("audit ok, %d chunks identical on 3 replicas" % n)
    except BaseException:
        print("seed %d: events:\n  %s" % (seed, "\n  ".join(events)))
        raise


@pytest.mark.timeout(150)
@pytest.mark.parametrize("apart", [False, True], ids=["with-mgmt", "apart"])
def test_meta_restart_is_a_pause_for_namespace_calls(faults, tmp_path, apart):
    """One client process keeps making directories while the meta service
    is killed (-9) and started again: with mgmt on node 1 (same address),
    and on a node of its own (a new port, found in the map). Every call
    succeeds, late: a call meta could not receive is made again within
    the client's retry time, at the address the map gives."""
    from test_python import PY, py_env
    fc = faults(nstorage=2, replication=2, meta_apart=apart)
    meta = fc.meta_node
    env = dict(os.environ, **py_env())
    env["STRATA_MGMT"] = fc.mgmt_addr
    env["STRATA_TOKEN_FILE"] = str(fc.token_file)
    code = """
import sys, time, strata
c = strata.Client()
c.mkdir("/r")
n = 0
deadline = time.time() + 60
while n < 400 and time.time() < deadline:
    c.mkdir("/r/d%d" % n)
    n += 1
    print(n, flush=True)
    time.sleep(0.02)
assert sorted(c.listdir("/r")) == sorted("d%d" % i for i in range(n)), n
print("done", n, flush=True)
"""
    child = subprocess.Popen([PY, "-c", code], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        first = child.stdout.readline()
        assert first.strip() == "1", (first, child.stderr.read() if child.poll() else "")
        for _ in range(20):
            child.stdout.readline()
        if apart:
            fc.kill9(meta)
        else:
            fc.kill9(fc.mgmt)
        time.sleep(1.5)
        fc.restart(meta if apart else fc.mgmt)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err[-4000:]
    assert "done 400" in out, out[-500:] + err[-2000:]
