"""The strata CLI: 'local up/status/down' clusters on loopback, and 'ping'.

'local up --nodes N' starts N storage daemons plus node 1 running mgmt
(N + 1 processes), as src/cli/cmd_local.c does since 1cad3bd."""

import json
import os
import re
import socket
import subprocess

import pytest

from conftest import free_port, pid_alive, wait_until, REGISTRY, STRATA


def _procs_mentioning(text):
    """Pids of live processes whose command line holds text."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and pid_alive(int(name)):
            out.append(int(name))
    return out


def test_up_status_ping_down(cluster, strata):
    c = cluster(3)
    assert len(c.storage_nodes) == 3, c.nodes
    assert len(c.nodes) in (3, 4)
    assert [n.id for n in c.nodes] == list(range(1, len(c.nodes) + 1))
    assert c.mgmt_node is not None
    assert len({n.addr for n in c.nodes}) == len(c.nodes)
    assert len({n.pid for n in c.nodes}) == len(c.nodes)
    for n in c.nodes:
        assert n.alive
        assert n.metrics_port and n.metrics_port > 0

    r = c.status()
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["NODE", "ADDRESS", "PID"]
    for n in c.nodes:
        row = [l for l in lines if l.split()[:1] == [str(n.id)]]
        assert len(row) == 1, r.stdout
        assert n.addr in row[0] and str(n.pid) in row[0], row[0]
        assert "down" not in row[0]
    assert "down" not in r.stdout

    for n in c.nodes:
        r = strata("ping", n.addr, "--count", "2")
        assert r.returncode == 0, r.stdout + r.stderr
        assert len(re.findall(r"ping %s: ok" % re.escape(n.addr), r.stdout)) == 2
        with n.client() as cl:
            assert cl.hello_reply[3] == n.id
            st = cl.status()
            assert st["node_id"] == n.id and st["pid"] == n.pid

    pids = c.pids()
    r = c.down()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stopped" in r.stdout
    for pid in pids:
        wait_until(lambda: not pid_alive(pid), 5, what="pid %d to exit" % pid)
    assert not (c.dir / "cluster.json").exists()
    for n in c.nodes:
        assert "stopped" in n.log, n.log
    r = c.status()
    assert r.returncode == 1
    assert "no local cluster" in r.stderr


def test_up_twice_is_refused(cluster, strata):
    c = cluster(2)
    pids = c.pids()
    r = strata("local", "up", "--dir", c.dir, "--nodes", "2")
    assert r.returncode != 0
    assert "already" in r.stderr and "local down" in r.stderr, r.stderr
    assert c.reload() and c.pids() == pids
    assert all(pid_alive(p) for p in pids)
    assert c.status().returncode == 0


def _daemons_of(directory):
    """pids of the stratad processes whose data lies under directory."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"stratad") and any(
                a.startswith(str(directory).encode()) for a in cmd):
            out.append(int(p))
    return out


@pytest.mark.timeout(120)
def test_two_concurrent_ups_on_one_directory(tmp_path, strata):
    """Two 'local up' at once on one directory: one builds the cluster,
    the other is refused at once naming the first (or, if it came late,
    the recorded cluster); every daemon running is one cluster.json
    lists, and 'local down' leaves none."""
    d = tmp_path / "c"
    procs = [subprocess.Popen([STRATA, "local", "up", "--dir", str(d), "--nodes", "3"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        REGISTRY.add(p.pid, "strata local up")
    outs = [p.communicate(timeout=100) for p in procs]
    for p in procs:
        REGISTRY.discard(p.pid)
    rcs = sorted(p.returncode for p in procs)
    assert rcs == [0, 1], outs
    loser = next(o for p, o in zip(procs, outs) if p.returncode == 1)
    assert ("another 'strata local' command is working on '%s'" % d in loser[1] or
            "already recorded" in loser[1]), loser
    listed = sorted(n["pid"] for n in json.loads((d / "cluster.json").read_text())["nodes"])
    try:
        assert sorted(_daemons_of(d)) == listed
    finally:
        r = strata("local", "down", "--dir", d, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: not _daemons_of(d), 20, 0.2, "every daemon to stop")


def test_status_reports_a_killed_daemon_and_down_cleans_up(cluster):
    c = cluster(3)
    victim = c.storage_nodes[0]
    victim.kill9()
    r = c.status()
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {l.split()[0]: l for l in r.stdout.splitlines()[1:]
            if len(l.split()) > 1 and l.split()[1].startswith("127.0.0.1:")}
    assert set(rows) == {str(n.id) for n in c.nodes}, r.stdout
    for n in c.nodes:
        if n is victim:
            assert "down" in rows[str(n.id)] and victim.addr in rows[str(n.id)]
        else:
            assert "down" not in rows[str(n.id)], r.stdout
    assert "1 daemon(s) down" in r.stdout

    r = c.down()
    assert r.returncode == 0, r.stdout + r.stderr
    for n in c.nodes:
        wait_until(lambda: not pid_alive(n.pid), 5, what="pid %d to exit" % n.pid)
    assert not (c.dir / "cluster.json").exists()


def test_daemon_flags_reach_every_daemon(cluster):
    c = cluster(2, daemon_flags="--node.threads=1 --node.log_level=debug")
    for n in c.nodes:
        with n.client() as cl:
            assert cl.status()["threads"] == 1


def test_failed_up_leaves_nothing_running(tmp_path, strata):
    d = tmp_path / "badcluster"
    r = strata("local", "up", "--dir", d, "--nodes", "2", "--daemon-flags", "--node.bogus=1")
    assert r.returncode != 0
    assert "node 1" in r.stderr, r.stderr
    assert not (d / "cluster.json").exists()
    assert _procs_mentioning(str(d)) == []


def test_down_without_cluster(tmp_path, strata):
    r = strata("local", "down", "--dir", tmp_path / "nothing")
    assert r.returncode == 1
    assert "no local cluster" in r.stderr


def test_ping_unreachable(strata):
    addr = "127.0.0.1:%d" % free_port()
    r = strata("ping", addr, "--count", "1", timeout=30)
    assert r.returncode == 1
    assert addr in r.stdout + r.stderr


BAD_ARGS = [
    ("no-command", [], "usage"),
    ("unknown-command", ["frobnicate"], "frobnicate"),
    ("local-no-action", ["local"], "usage"),
    ("local-missing-dir", ["local", "up"], "--dir"),
    ("local-dir-without-value", ["local", "up", "--dir"], "--dir"),
    ("status-missing-dir", ["local", "status"], "--dir"),
    ("nodes-zero", ["local", "up", "--dir", "DIR", "--nodes", "0"], "--nodes"),
    ("nodes-negative", ["local", "up", "--dir", "DIR", "--nodes", "-3"], "--nodes"),
    ("nodes-not-a-number", ["local", "up", "--dir", "DIR", "--nodes", "three"], "three"),
    ("nodes-too-many", ["local", "up", "--dir", "DIR", "--nodes", "65"], "65"),
    ("unknown-action", ["local", "sideways", "--dir", "DIR"], "sideways"),
    ("unknown-option", ["local", "up", "--dir", "DIR", "--colour", "blue"], "--colour"),
    ("ping-no-addr", ["ping"], "usage"),
    ("ping-bad-addr", ["ping", "nohostport"], "nohostport"),
    ("ping-count-zero", ["ping", "127.0.0.1:9", "--count", "0"], "--count"),
    ("ping-extra-arg", ["ping", "127.0.0.1:9", "127.0.0.1:10"], "127.0.0.1:10"),
    ("replication-over-storage", ["local", "up", "--dir", "DIR", "--storage", "3",
                                  "--replication", "5"], "needs at least 5 storage daemons"),
    ("mgmt-port-out-of-range", ["ls", "--mgmt", "127.0.0.1:99999", "/"],
     "'127.0.0.1:99999' is neither a cluster directory nor HOST:PORT"),
    ("mgmt-not-an-address", ["ls", "--mgmt", "nonsense", "/"], "nor HOST:PORT"),
]


@pytest.mark.parametrize("args,word", [c[1:] for c in BAD_ARGS], ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments_exit_2(tmp_path, strata, args, word):
    d = tmp_path / "c"
    r = strata(*[str(d) if a == "DIR" else a for a in args])
    assert r.returncode == 2, "exit %d:\n%s%s" % (r.returncode, r.stdout, r.stderr)
    assert word in r.stderr, r.stderr
    assert "LeakSanitizer" not in r.stderr
    assert not (d / "cluster.json").exists()
    assert not d.exists()


def test_mem_pool_listed_in_the_map(cluster, daemon_factory):
    """A mem daemon pointed at mgmt announces itself: 'strata status' lists
    it in the cluster map, up while it runs and offline once killed."""
    c = cluster(1)
    mem = daemon_factory(node_id=20, extra_flags=[
        "--node.services=mem", "--node.threads=1", "--mem.capacity=16M",
        "--mgmt.address=%s" % c.mgmt_node.addr, "--mgmt.heartbeat=200ms",
        "--node.key_file=%s" % (c.dir / "cluster.key")])
    row = re.compile(r"^mem\s+20\s+%s\s+(\w+)" % re.escape(mem.addr), re.M)

    def state():
        r = c.strata("status", "--dir", c.dir)
        m = row.search(r.stdout)
        return m.group(1) if m else None

    wait_until(lambda: state() == "up", 20, 0.2, "the mem pool listed up in the map")
    r = c.strata("status", "--dir", c.dir)
    assert re.search(r"^services\s+meta 1 up of 1, mem 1 up of 1", r.stdout, re.M), r.stdout
    mem.kill9()
    wait_until(lambda: state() == "offline", 30, 0.3, "the mem pool marked offline")


def test_a_peer_that_is_not_strata_is_named_at_once(strata):
    """--mgmt pointed at something that is not Strata (an HTTP server
    here): the client gives up after its first answers, saying so, instead
    of reconnecting in a loop until its retry budget runs out."""
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)
    conns = [0]
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            conns[0] += 1
            try:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" + b"x" * 64)
            except OSError:
                pass
            c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        r = strata("ls", "--mgmt", "127.0.0.1:%d" % srv.getsockname()[1], "/", timeout=60)
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert r.returncode == 1, r.stderr
    assert "the peer is not Strata" in r.stderr, r.stderr
    assert conns[0] < 20, conns[0]


@pytest.mark.parametrize("cmd,line", [
    ("ping", "ping ADDR [--count N]"),
    ("local", "local up --dir DIR"),
    ("compose", "compose create"),
    ("token", "token revoke ID"),
    ("ls", "ls [-l] PATH..."),
    ("status", "status [--json]"),
])
def test_command_help(strata, cmd, line):
    """'strata CMD --help' answers (exit 0) with that command's lines of
    the usage, not "unexpected argument"."""
    for flag in ("--help", "-h"):
        r = strata(cmd, flag)
        assert r.returncode == 0, r.stderr
        assert line in r.stdout, r.stdout
        assert "unexpected argument" not in r.stderr
    r = strata("nosuch", "--help")
    assert r.returncode == 2 and "unknown command 'nosuch'" in r.stderr


def test_local_stop_start_restart_one_daemon(tmp_path, strata):
    """local stop|start|restart --node N: a storage daemon stopped shows
    down in status (exit 1), started again it runs from the command line
    'local up' recorded (a new pid); mgmt restarted keeps its address and
    the cluster serves; 'down' stops what runs, a stopped node included."""
    d = tmp_path / "c"
    r = strata("local", "up", "--dir", d, "--storage", "3", timeout=90)
    assert r.returncode == 0, r.stderr
    try:
        before = json.loads((d / "cluster.json").read_text())
        pid3 = next(n["pid"] for n in before["nodes"] if n["id"] == 3)
        r = strata("local", "stop", "--dir", d, "--node", "3")
        assert r.returncode == 0 and "node 3 (pid %d) stopped" % pid3 in r.stdout, r.stderr
        assert not os.path.exists("/proc/%d" % pid3) or \
            open("/proc/%d/stat" % pid3).read().split()[2] == "Z"
        r = strata("local", "status", "--dir", d)
        assert r.returncode == 1 and "1 daemon(s) down" in r.stdout, r.stdout
        r = strata("local", "start", "--dir", d, "--node", "3")
        assert r.returncode == 0 and "node 3 started" in r.stdout, r.stderr
        r = strata("local", "start", "--dir", d, "--node", "3")
        assert r.returncode == 1 and "is running" in r.stderr, r.stderr
        r = strata("local", "restart", "--dir", d, "--node", "1")
        assert r.returncode == 0 and "node 1 started" in r.stdout, r.stderr
        after = json.loads((d / "cluster.json").read_text())
        assert after["mgmt"] == before["mgmt"]
        assert all(n["pid"] > 0 for n in after["nodes"])
        f = tmp_path / "f"
        f.write_bytes(b"after restarts")
        r = strata("put", "--dir", d, f, "/f", timeout=60)
        assert r.returncode == 0, r.stderr
        r = strata("cat", "--dir", d, "/f")
        assert r.returncode == 0 and r.stdout == "after restarts", r.stderr
        r = strata("local", "status", "--dir", d)
        assert r.returncode == 0, r.stdout
        for args, word in [(["stop"], "needs --node"), (["stop", "--node", "9"], "no node 9"),
                           (["status", "--node", "2"], "--node is an option"),
                           (["stop", "--node", "x"], "is not a node id")]:
            r = strata("local", args[0], "--dir", d, *args[1:])
            assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
        assert strata("local", "stop", "--dir", d, "--node", "2").returncode == 0
    finally:
        r = strata("local", "down", "--dir", d, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not (d / "cluster.json").exists()
