"""A daemon under connection abuse (issue 14, "Daemons under abuse"): the
caps of net.max_conns and net.max_conns_per_peer, the HELLO deadline of
net.hello_timeout, and accept() pausing on EMFILE instead of spinning.

The flood comes from 127.0.0.2 (every 127/8 address reaches the loopback
daemon), so one address holds it while the real client, on 127.0.0.1,
is another peer, as a flooding host and a compute node would be."""

import os
import resource
import socket
import subprocess
import sys
import time

import pytest

FLOOD = 25000


# A flooding process: opens N idle connections to HOST:PORT from SRC,
# prints how many, holds them until its stdin closes.
FLOODER = r"""
import resource, socket, sys, time
host, port, src, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks = []
failed = 0
end = time.monotonic() + 180
while len(socks) < n and time.monotonic() < end:
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((src, 0))
        s.connect((host, port))
    except OSError as e:
        # A full accept queue drops the SYN and the connect times out
        # (a loaded machine); the daemon drains it: try again, a bounded
        # number of times.
        s.close()
        failed += 1
        if failed > 200:
            print("stopped:", e, file=sys.stderr)
            break
        continue
    socks.append(s)
print(len(socks), flush=True)
sys.stdin.read()
"""


class Flood:
    """FLOOD idle connections from src, split over processes (one process
    may not hold them all under the open-file limit)."""

    def __init__(self, addr, total, src, per_proc=10000):
        host, port = addr.rsplit(":", 1)
        self.procs = []
        left = total
        while left > 0:
            n = min(per_proc, left)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", FLOODER, host, port, src, str(n)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            left -= n
        self.opened = sum(int(p.stdout.readline() or 0) for p in self.procs)

    def close(self):
        for p in self.procs:
            try:
                p.stdin.close()
                p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait()


def _open_idle(addr, n, src=None, deadline_s=120):
    """n connections to addr (from src), saying nothing. A connect the
    backlog cannot take any more fails; the caller sees how many opened."""
    host, port = addr.rsplit(":", 1)
    socks = []
    end = time.monotonic() + deadline_s
    for _ in range(n):
        if time.monotonic() > end:
            break
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            if src:
                s.bind((src, 0))
            s.connect((host, int(port)))
        except OSError:
            s.close()
            break
        socks.append(s)
    return socks


def _wait_metric(d, name, pred, timeout=30):
    end = time.monotonic() + timeout
    v = None
    while time.monotonic() < end:
        v = d.metric(name)
        if pred(v):
            return v
        time.sleep(0.2)
    raise AssertionError("metric %s never got there: last %r" % (name, v))


def _fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


@pytest.mark.timeout(360)
def test_idle_flood_is_held_off_by_the_per_address_cap(daemon_factory, strata):
    """25,000 idle connections from one address: the daemon holds at most
    net.max_conns_per_peer of them, closes the rest at accept, closes the
    ones it held once net.hello_timeout passes, logs a bounded number of
    lines, and a real client on another address is served throughout."""
    cap = 300
    d = daemon_factory(extra_flags=["--net.max_conns_per_peer=%d" % cap,
                                    "--net.hello_timeout=3s"])
    log_before = len(d.log)
    flood = None
    started = time.monotonic()
    try:
        with d.client() as real:
            flood = Flood(d.addr, FLOOD, "127.0.0.2")
            assert flood.opened >= FLOOD * 9 // 10, "only %d connects went through" % flood.opened
            # Served during the flood, over the connection it already had
            # and over a new one.
            assert real.ping(b"during").bulk == b"during"
            with d.client() as again:
                assert again.ping(b"new").bulk == b"new"
            r = strata("ping", d.addr, "--count", "1")
            assert r.returncode == 0, r.stderr
            # (A connect can "succeed" with the accept queue full: the
            # kernel drops the handshake's last ACK, and the daemon never
            # sees that one; so most, not all, reach the cap.)
            refused = _wait_metric(d, "strata_net_connections_refused_peer_total",
                                   lambda v: v >= FLOOD // 2, timeout=60)
            assert refused <= flood.opened
            assert _fds(d.pid) < cap + 200, "daemon holds %d descriptors" % _fds(d.pid)
            # The ones it took never said HELLO: closed after the deadline.
            _wait_metric(d, "strata_net_hello_timeouts_total", lambda v: v >= cap)
            _wait_metric(d, "strata_net_connections", lambda v: v <= 10)
            assert real.ping(b"after").bulk == b"after"
    finally:
        if flood:
            flood.close()
    log = d.log[log_before:]
    # Rate-limited per call site (32 lines per 10 s window), and says so.
    # How many windows the flood spans depends on how fast this machine
    # opens 25,000 connections, so the bound is counted in windows; either
    # way it is far below the thousands of refusals the daemon made.
    windows = int((time.monotonic() - started) / 10) + 2
    refused_lines = log.count("refused a connection from '127.0.0.2")
    assert 0 < refused_lines <= 32 * windows < refused, (refused_lines, windows, refused)
    assert "net.max_conns_per_peer" in log
    assert "more lines like this in the next 10 s are dropped" in log
    assert log.count("no HELLO within 3000 ms") <= 32 * windows


@pytest.mark.timeout(120)
def test_daemon_wide_cap_refuses_then_recovers(daemon_factory):
    """net.max_conns: idle sockets fill it; a new connection is closed at
    once (whoever it is); once the HELLO deadline frees the idle ones,
    clients are served again."""
    d = daemon_factory(extra_flags=["--net.max_conns=40", "--net.max_conns_per_peer=0",
                                    "--net.hello_timeout=2s"])
    idle = _open_idle(d.addr, 60)
    try:
        _wait_metric(d, "strata_net_connections_refused_total", lambda v: v >= 15)
        assert d.metric("strata_net_connections") <= 40
        _wait_metric(d, "strata_net_hello_timeouts_total", lambda v: v >= 30)
        _wait_metric(d, "strata_net_connections", lambda v: v < 40)
        with d.client() as c:
            assert c.ping(b"x").bulk == b"x"
    finally:
        for s in idle:
            s.close()
    assert "net.max_conns)" in d.log


@pytest.mark.timeout(120)
def test_accept_pauses_on_emfile_and_resumes(daemon_factory):
    """Out of descriptors, accept() fails with EMFILE while the socket stays
    ready: the daemon pauses accepting (counted, one rate-limited line)
    instead of spinning, and takes connections again once some close."""
    d = daemon_factory(extra_flags=["--net.max_conns=100000", "--net.hello_timeout=0"])
    used = _fds(d.pid)
    limit = used + 20
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (limit, limit))
    idle = _open_idle(d.addr, 60)
    try:
        # (Not through /metrics: its HTTP server, libmicrohttpd, is out of
        # descriptors too.)
        end = time.monotonic() + 30
        while "pausing new connections" not in d.log and time.monotonic() < end:
            time.sleep(0.2)
        assert "pausing new connections" in d.log
        assert d.running
    finally:
        for s in idle:
            s.close()
    # The daemon sees the closes, frees the descriptors, and accepts again.
    end = time.monotonic() + 30
    while True:
        try:
            with d.client(timeout=3) as c:
                assert c.ping(b"back").bulk == b"back"
            break
        except (OSError, ConnectionError, AssertionError):
            if time.monotonic() > end:
                raise
            time.sleep(0.3)
    assert d.metric("strata_net_accept_pauses_total") >= 1


@pytest.mark.parametrize("flag, key", [
    ("--net.max_conns=-1", "net.max_conns"),
    ("--net.max_conns_per_peer=abc", "net.max_conns_per_peer"),
    ("--net.hello_timeout=2 days", "net.hello_timeout"),
])
def test_bad_net_values_are_refused(run_stratad, flag, key):
    r = run_stratad(flag)
    assert r.returncode != 0
    assert key in r.stderr, r.stderr
