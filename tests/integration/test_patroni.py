"""The namespace on PostgreSQL under Patroni (issue 18): the database's own
failover, under load.

Three network-namespace hosts on a private bridge (netns.Fabric): each
runs an etcd member (Debian's etcd-server); hosts 1 and 2 also run
PostgreSQL 15 under Patroni (Debian's patroni), in synchronous mode, so a
commit is acknowledged only once the standby has it and Patroni promotes
only that standby. Strata's daemons run in the root namespace; meta's
`meta.store` names both PostgreSQL hosts with
`target_session_attrs=read-write`, so libpq finds the primary, and meta's
store reconnects after a failure.

A writer puts small files in a loop. The primary's host loses its
PostgreSQL and Patroni (SIGKILL to every process of that namespace but
its etcd member). Patroni promotes the standby once the leader key
expires; meta reconnects to it; the writer resumes. Afterwards every put
that was acknowledged is listed and reads back, and the stall (the
longest time between two acknowledged puts) is printed for the record.

Needs root (namespaces; PostgreSQL runs as 'postgres', etcd as 'nobody').
Skips, saying why, where patroni, etcd or namespaces are unavailable.
"""

import json
import os
import pwd
import shutil
import signal
import subprocess
import threading
import time
import tempfile
import urllib.request
from pathlib import Path

import pytest

import netns
from conftest import REGISTRY, run_strata, spawn, wait_until

PGBIN = "/usr/lib/postgresql/15/bin"
TTL = 10            # Patroni's leader key: a dead primary is replaced after it
WRITER_S = 45       # the writer's whole run, failover included


def _missing():
    for prog in ("patroni", "etcd"):
        if not shutil.which(prog):
            return "%s is not installed (scripts/deps.sh installs it)" % prog
    if not os.path.exists(PGBIN + "/postgres"):
        return "no PostgreSQL 15 in %s" % PGBIN
    if os.geteuid() != 0:
        return "network namespaces and the postgres user need root"
    for u in ("postgres", "nobody"):
        try:
            pwd.getpwnam(u)
        except KeyError:
            return "no user '%s'" % u
    ok, why = netns.available()
    return None if ok else "network namespaces unavailable: %s" % why


PATRONI_YML = """\
scope: strata-test
name: pg{k}
restapi:
  listen: {ip}:8008
  connect_address: {ip}:8008
etcd3:
  hosts: {etcd_hosts}
bootstrap:
  dcs:
    ttl: {ttl}
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 40
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
  initdb:
    - encoding: UTF8
    - locale: C
  pg_hba:
    - local all all trust
    - host replication replicator {net} trust
    - host all all {net} trust
postgresql:
  listen: {ip}:5432
  connect_address: {ip}:5432
  data_dir: {dir}/data
  bin_dir: {pgbin}
  pgpass: {dir}/pgpass
  authentication:
    replication:
      username: replicator
      password: replicator-test
    superuser:
      username: postgres
      password: postgres-test
  parameters:
    unix_socket_directories: {dir}
    fsync: "on"
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
"""


class PatroniSite:
    """etcd on hosts 1-3, Patroni + PostgreSQL on hosts 1-2."""

    def __init__(self, base):
        self.base = base
        self.fabric = netns.Fabric()
        self.procs = {}         # name -> Popen

    def start(self):
        netns.sweep_stale()
        self.fabric.create()
        for k in (1, 2, 3):
            self.fabric.add_node(k)
        peers = ",".join("e%d=http://%s:2380" % (k, self.fabric.node_ip(k)) for k in (1, 2, 3))
        for k in (1, 2, 3):
            ip = self.fabric.node_ip(k)
            d = self.base / ("etcd%d" % k)
            d.mkdir(parents=True)
            shutil.chown(d, "nobody")
            d.chmod(0o700)
            argv = self.fabric.exec_prefix(k) + [
                "runuser", "-u", "nobody", "--", "etcd", "--name", "e%d" % k,
                "--data-dir", str(d / "data"),
                "--listen-client-urls", "http://%s:2379" % ip,
                "--advertise-client-urls", "http://%s:2379" % ip,
                "--listen-peer-urls", "http://%s:2380" % ip,
                "--initial-advertise-peer-urls", "http://%s:2380" % ip,
                "--initial-cluster", peers, "--initial-cluster-state", "new",
                "--initial-cluster-token", "strata-%s" % self.fabric.tag]
            self.procs["etcd%d" % k] = spawn(argv, d.parent / ("etcd%d.log" % k), "etcd %d" % k)
        hosts = ",".join("%s:2379" % self.fabric.node_ip(k) for k in (1, 2, 3))
        for k in (1, 2):
            d = self.base / ("pg%d" % k)
            d.mkdir(parents=True)
            shutil.chown(d, "postgres")
            d.chmod(0o700)
            yml = d / "patroni.yml"
            yml.write_text(PATRONI_YML.format(k=k, ip=self.fabric.node_ip(k), etcd_hosts=hosts,
                                              ttl=TTL, net=str(self.fabric.net), dir=d,
                                              pgbin=PGBIN))
            shutil.chown(yml, "postgres")
            yml.chmod(0o600)
            argv = self.fabric.exec_prefix(k) + ["runuser", "-u", "postgres", "--",
                                                 "patroni", str(yml)]
            self.procs["pg%d" % k] = spawn(argv, self.base / ("patroni%d.log" % k),
                                           "patroni %d" % k)
        def ready():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise AssertionError("%s exited during start-up" % ", ".join(dead))
            return self.leader() is not None and len(self.sync_standbys()) == 1

        try:
            wait_until(ready, 120, 1, "Patroni to elect a primary with a synchronous standby")
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.logs()))

    def member(self, k):
        """Patroni's REST view of host k (None when it does not answer)."""
        try:
            with urllib.request.urlopen("http://%s:8008/patroni" % self.fabric.node_ip(k),
                                        timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def cluster(self):
        for k in (1, 2):
            try:
                with urllib.request.urlopen("http://%s:8008/cluster" % self.fabric.node_ip(k),
                                            timeout=2) as r:
                    return json.loads(r.read())
            except (OSError, ValueError):
                continue
        return None

    def leader(self):
        c = self.cluster()
        for m in (c or {}).get("members", []):
            if m.get("role") == "leader" and m.get("state") == "running":
                return int(m["name"][2:])
        return None

    def sync_standbys(self):
        c = self.cluster()
        return [int(m["name"][2:]) for m in (c or {}).get("members", [])
                if m.get("role") == "sync_standby" and m.get("state") in ("running",
                                                                          "streaming")]

    def psql(self, k, sql, db="postgres"):
        return subprocess.run(["runuser", "-u", "postgres", "--", PGBIN + "/psql", "-X", "-q",
                               "-h", self.fabric.node_ip(k), "-U", "postgres", "-d", db,
                               "-v", "ON_ERROR_STOP=1", "-c", sql],
                              capture_output=True, text=True, timeout=30)

    def kill_postgres(self, k):
        """SIGKILL to every process in host k's namespace but etcd."""
        r = subprocess.run(["ip", "netns", "pids", self.fabric.ns(k)], capture_output=True,
                           text=True, timeout=10)
        etcd = self.procs["etcd%d" % k].pid
        killed = 0
        for pid in (int(p) for p in r.stdout.split()):
            if pid == etcd or self._is_child_of(pid, etcd):
                continue
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        return killed

    @staticmethod
    def _is_child_of(pid, parent):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return int(f.read().rsplit(")", 1)[1].split()[1]) == parent
        except (OSError, ValueError, IndexError):
            return False

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.base)):
            if name.endswith(".log"):
                text = (self.base / name).read_text(errors="replace").splitlines()
                out.append("--- %s\n%s" % (name, "\n".join(text[-25:])))
        return "\n".join(out)

    def stop(self):
        for name in ("pg1", "pg2", "etcd1", "etcd2", "etcd3"):
            p = self.procs.get(name)
            if p and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
        for k in list(self.fabric.nodes):
            r = subprocess.run(["ip", "netns", "pids", self.fabric.ns(k)], capture_output=True,
                               text=True, timeout=10)
            for pid in (int(p) for p in r.stdout.split()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            REGISTRY.discard(p.pid)
        self.fabric.destroy()


@pytest.fixture
def patroni_site():
    why = _missing()
    if why:
        pytest.skip(why)
    # Under /tmp, not pytest's 0700 tree: etcd runs as nobody and
    # PostgreSQL as postgres, each in its own 0700 directory below.
    base = Path(tempfile.mkdtemp(prefix="strata-patroni.", dir="/tmp"))
    base.chmod(0o711)
    site = PatroniSite(base)
    try:
        site.start()
        yield site
    finally:
        site.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout(300)
def test_patroni_failover_under_a_writer_loses_no_acknowledged_put(patroni_site, cluster,
                                                                    tmp_path):
    site = patroni_site
    first = site.leader()
    r = site.psql(first, "CREATE DATABASE strata")
    assert r.returncode == 0, r.stderr
    hosts = ",".join("%s:5432" % site.fabric.node_ip(k) for k in (1, 2))
    uri = "postgresql://postgres@%s/strata?target_session_attrs=read-write&connect_timeout=2" % hosts
    c = cluster(3, daemon_flags="--meta.store=%s" % uri)
    src = tmp_path / "src"
    src.write_bytes(os.urandom(4096))
    r = run_strata("mkdir", "/w", "--dir", c.dir)
    assert r.returncode == 0, r.stderr

    acked, failed, stamps = [], [], []
    stop = threading.Event()

    def writer():
        n = 0
        while not stop.is_set():
            name = "/w/f%d" % n
            n += 1
            r = run_strata("put", "-q", src, name, "--dir", c.dir, timeout=60)
            if r.returncode == 0:
                acked.append(name)
                stamps.append(time.monotonic())
            else:
                failed.append((name, (r.stderr or r.stdout).strip()[-200:]))

    t = threading.Thread(target=writer)
    t0 = time.monotonic()
    t.start()
    try:
        wait_until(lambda: len(acked) >= 10, 30, 0.2, "the writer to get going")
        before = len(acked)
        killed_at = time.monotonic()
        assert site.kill_postgres(first) > 0
        other = 2 if first == 1 else 1
        try:
            wait_until(lambda: site.leader() == other, 4 * TTL + 30, 0.5,
                       "Patroni to promote host %d" % other)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, site.logs()))
        promoted_at = time.monotonic()
        wait_until(lambda: len(acked) >= before + 10, 90, 0.5,
                   "puts to be acknowledged again after the failover")
        while time.monotonic() - t0 < WRITER_S and len(acked) < before + 40:
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(timeout=90)

    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    stall = max(gaps) if gaps else 0.0
    print("patroni failover: %d puts acknowledged, %d failed; primary host %d killed, "
          "host %d promoted %.1f s later; longest stall between acknowledged puts %.1f s"
          % (len(acked), len(failed), first, 2 if first == 1 else 1,
             promoted_at - killed_at, stall))
    # The audit: every acknowledged put is there, and reads back.
    r = run_strata("ls", "/w", "--dir", c.dir, timeout=60)
    assert r.returncode == 0, r.stderr
    listed = set(r.stdout.split())
    missing = [a for a in acked if a.rsplit("/", 1)[1] not in listed]
    assert not missing, "acknowledged puts lost in the failover: %s" % missing[:10]
    for name in acked[before - 2:before + 2] + acked[-3:]:
        out = tmp_path / "back"
        r = run_strata("get", name, out, "--dir", c.dir, timeout=60)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == src.read_bytes()
    # The failures were the outage's, said as such, not something else.
    for name, why in failed:
        assert why, name
