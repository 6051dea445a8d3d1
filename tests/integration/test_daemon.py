"""stratad as a process: the wire (HELLO, PING, STATUS, pipelining), /metrics,
config errors, --config, and clean shutdown on signals."""

import json
import random
import re
import signal
import socket
import time
import urllib.error
import urllib.request

import pytest

import strata_wire as sw
from conftest import fetch_metrics_text, run_strata, parse_metrics, spawn, wait_until, REGISTRY, STRATAD

STRATA_EBADOP = -(4096 + 10)
NO_LEAKS = {"ASAN_OPTIONS": "detect_leaks=0"}


# ---------------------------------------------------------------------------
# The wire

def test_hello_reply_names_the_daemon(daemon_factory):
    d = daemon_factory(node_id=7)
    with d.client() as c:
        magic, version, role, node_id = c.hello_reply
        assert magic == sw.MAGIC
        assert version == sw.VERSION
        assert role == sw.ROLE_DAEMON
        assert node_id == 7


def test_ping_echoes_bulk(daemon):
    with daemon.client() as c:
        for size in (0, 1, 39, 40, 4095, 65536, 1 << 20, 3 * (1 << 20) + 7):
            bulk = random.Random(size).randbytes(size)
            f = c.ping(bulk)
            assert f.flags & sw.F_RESPONSE
            assert f.status == 0
            assert f.opcode == sw.OP_PING
            assert f.bulk == bulk


def test_status_is_json_about_this_daemon(daemon_factory):
    d = daemon_factory(node_id=42)
    with d.client() as c:
        c.ping(b"x")
        st = c.status()
    assert st["node_id"] == 42
    assert st["address"] == d.addr
    assert st["pid"] == d.pid
    assert st["uptime_ms"] >= 0
    assert st["threads"] >= 1
    assert st["services"] == []
    assert st["frames_in"] >= 2
    assert st["bad_frames"] == 0


def test_unknown_opcode_is_an_error_reply_not_a_close(daemon):
    with daemon.client() as c:
        f = c.call(200)
        assert f.flags & sw.F_RESPONSE
        assert f.status == STRATA_EBADOP
        c.ping(b"still here")


def test_pipelined_requests_matched_by_id(daemon):
    """50 PINGs with distinct ids and bulk sizes, all sent before any reply
    is read; every reply carries its request's id and bulk."""
    rnd = random.Random(1234)
    ids = rnd.sample(range(1, 1 << 63), 50)
    sent = {}
    blob = []
    for i, rid in enumerate(ids):
        size = (i * 7919) % 20000 if i % 5 else 0
        bulk = rnd.randbytes(size)
        sent[rid] = bulk
        blob.append(sw.encode(sw.Frame(opcode=sw.OP_PING, req_id=rid, bulk=bulk)))
    # One STATUS in the middle of the pipeline too.
    blob.insert(25, sw.encode(sw.Frame(opcode=sw.OP_STATUS, req_id=7)))
    with daemon.client() as c:
        c.send_raw(b"".join(blob))
        got = {}
        status_seen = False
        for _ in range(len(blob)):
            f = c.recv(timeout=20)
            assert f.flags & sw.F_RESPONSE
            assert f.status == 0
            if f.req_id == 7:
                assert f.opcode == sw.OP_STATUS
                assert b'"node_id"' in f.body
                status_seen = True
                continue
            assert f.req_id in sent, "reply with an id never sent: %d" % f.req_id
            assert f.req_id not in got, "two replies for id %d" % f.req_id
            assert f.opcode == sw.OP_PING
            got[f.req_id] = f.bulk
        assert status_seen
        assert set(got) == set(sent)
        for rid, bulk in sent.items():
            assert got[rid] == bulk, "id %d: echoed bulk differs" % rid
        c.ping(b"after")


def test_many_clients_at_once(daemon):
    clients = [daemon.client() for _ in range(20)]
    try:
        for i, c in enumerate(clients):
            c.send(sw.Frame(opcode=sw.OP_PING, req_id=1000 + i, bulk=bytes([i]) * (i * 100)))
        for i, c in enumerate(clients):
            f = c.recv()
            assert f.req_id == 1000 + i
            assert f.bulk == bytes([i]) * (i * 100)
    finally:
        for c in clients:
            c.close()


# ---------------------------------------------------------------------------
# /metrics

METRIC_LINE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? (-?[0-9.eE+\-]+|NaN|[+-]Inf)$")


def test_metrics_prometheus_text(daemon):
    with daemon.client() as c:
        for _ in range(3):
            c.ping(b"abc")
    code, ctype, text = fetch_metrics_text(daemon.metrics_port)
    assert code == 200
    assert ctype.startswith("text/plain")
    assert "version=0.0.4" in ctype
    assert text.endswith("\n")
    helped, typed = set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            typed[name] = kind
        else:
            assert METRIC_LINE.match(line), "not a Prometheus sample line: %r" % line
            name = re.split(r"[{ ]", line, 1)[0]
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in typed or base in typed, "sample %s has no # TYPE" % name
    assert set(typed) <= helped
    m = parse_metrics(text)
    assert m["strata_up"] == 1
    assert m["strata_uptime_seconds"] >= 0
    for name in ("strata_net_frames_in_total", "strata_net_frames_out_total",
                 "strata_net_bytes_in_total", "strata_net_bytes_out_total",
                 "strata_net_bad_frames_total", "strata_net_connections_accepted_total"):
        assert typed[name] == "counter", name
        assert name in m, name
    assert m["strata_net_frames_in_total"] >= 4       # HELLO + 3 PINGs
    assert m["strata_net_connections_accepted_total"] >= 1
    assert m["strata_net_bad_frames_total"] == 0


def test_metrics_counters_grow(daemon):
    before = daemon.metrics()
    with daemon.client() as c:
        for _ in range(10):
            c.ping(b"y" * 1000)
    # A reply's bytes are counted once its write completed, which may be
    # after the client read it: wait for the counters, do not race them.
    def grown():
        after = daemon.metrics()
        return (after["strata_net_frames_in_total"] >= before["strata_net_frames_in_total"] + 11
                and after["strata_net_bytes_in_total"] >= before["strata_net_bytes_in_total"]
                + 10000 and after["strata_net_bytes_out_total"]
                >= before["strata_net_bytes_out_total"] + 10000)
    wait_until(grown, 10, 0.05, "the net counters to count 10 pings")


def test_metrics_other_paths(daemon):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen("http://127.0.0.1:%d/nope" % daemon.metrics_port, timeout=5)
    assert e.value.code == 404
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % daemon.metrics_port,
                                 data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 405


def test_metrics_off_by_default(daemon_factory):
    d = daemon_factory(extra_flags=["--node.metrics_listen="])
    assert d.metrics_port == 0
    d.client().ping()


# ---------------------------------------------------------------------------
# Config errors: a clear message and exit code 2.

def _ini(tmp_path, text, name="stratad.ini"):
    p = tmp_path / name
    p.write_text(text)
    return p


BAD_CONFIGS = [
    # id, flags (FILE stands for the INI file), INI text or None, words the message must hold
    ("unknown-ini-key", ["--config", "FILE"], "[node]\nid = 3\nfoo = 1\n", ["FILE:3", "foo"]),
    ("unknown-ini-section", ["--config", "FILE"], "# c\n[nosuch]\nid = 3\n", ["FILE:", "nosuch"]),
    ("bad-ini-value", ["--config", "FILE"], "[mgmt]\nlease = soon\n", ["FILE:2", "lease", "soon"]),
    ("out-of-range-ini", ["--config", "FILE"], "[node]\n\nthreads = 999\n",
     ["FILE:3", "threads", "999"]),
    ("unknown-flag", ["--node.bogus=1"], None, ["node.bogus"]),
    ("unknown-flag-no-section", ["--bogus=1"], None, ["bogus"]),
    ("flag-without-value", ["--node.id"], None, ["node.id"]),
    ("bad-int", ["--node.id=abc"], None, ["node.id", "abc"]),
    ("out-of-range", ["--node.id=70000"], None, ["node.id", "70000", "range"]),
    ("zero-id", ["--node.id=0"], None, ["node.id", "range"]),
    ("bad-bool", ["--storage.sync_writes=maybe"], None, ["sync_writes", "maybe"]),
    ("bad-duration", ["--mgmt.lease=5 parsecs"], None, ["mgmt.lease"]),
    ("bad-log-level", ["--node.log_level=loud"], None, ["log_level", "loud"]),
    ("inline-max-too-big", ["--meta.inline_max=100K"], None, ["meta.inline_max", "100K"]),
    ("inline-max-not-a-size", ["--meta.inline_max=small"], None, ["meta.inline_max", "small"]),
    ("positional", ["extra"], None, ["extra"]),
    ("missing-config-file", ["--config", "/nonexistent/strata.ini"], None,
     ["/nonexistent/strata.ini"]),
    ("config-without-value", ["--config"], None, ["--config"]),
]


@pytest.mark.parametrize("flags,ini,words", [c[1:] for c in BAD_CONFIGS],
                         ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_exits_2(tmp_path, run_stratad, flags, ini, words):
    path = _ini(tmp_path, ini) if ini is not None else None
    flags = [str(path) if f == "FILE" else f for f in flags]
    # Leak checking is off here: the exit code is the subject (see
    # test_bad_config_does_not_leak for the leak).
    r = run_stratad("--data", tmp_path / "data", "--node.listen=127.0.0.1:0", *flags,
                    env=NO_LEAKS)
    msg = r.stderr + r.stdout
    assert r.returncode == 2, "exit %d, output:\n%s" % (r.returncode, msg)
    for w in words:
        w = w.replace("FILE", str(path)) if path else w
        assert w in msg, "%r not in the message:\n%s" % (w, msg)
    assert "serving on" not in msg
    assert not (tmp_path / "data" / "stratad.addr").exists()


def test_bad_config_does_not_leak(tmp_path, run_stratad):
    r = run_stratad("--data", tmp_path / "data", "--node.bogus=1")
    assert "LeakSanitizer" not in r.stderr, r.stderr
    assert r.returncode == 2


def test_unknown_service_names_it(tmp_path, run_stratad):
    r = run_stratad("--data", tmp_path / "data", "--node.listen=127.0.0.1:0",
                    "--node.services=warpdrive", timeout=30)
    msg = r.stderr + r.stdout
    assert r.returncode != 0, msg
    assert "warpdrive" in msg
    assert re.search(r"ERROR.*key 'node.services': unknown service 'warpdrive' "
                     r"\(known: mgmt, meta, storage", msg), msg
    assert r.returncode == 2
    assert "serving on" not in msg      # refused before anything started
    assert not (tmp_path / "data" / "stratad.lock").exists()
    assert "AddressSanitizer" not in msg and "LeakSanitizer" not in msg, msg


def test_check_config(tmp_path, run_stratad, daemon_factory):
    """--check-config: what a start would refuse, refused the same way
    (exit 2, the key named), and nothing started, bound or locked; a good
    configuration says ok, even beside a live daemon on the same directory
    and port."""
    conf = tmp_path / "stratad.conf"
    conf.write_text("[node]\nlisten = 127.0.0.1:0\nservices = mgmt,meta,storage\n")
    r = run_stratad("--check-config", "--config", conf, "--data", tmp_path / "d")
    assert r.returncode == 0, r.stderr
    assert "configuration ok" in r.stdout and "mgmt,meta,storage" in r.stdout
    assert not (tmp_path / "d").exists()
    for flag, key in [("--node.services=mgmt,warp", "node.services"),
                      ("--node.services=mgmt,mgmt", "node.services"),
                      ("--node.listen=0.0.0.0:7300", "node.key_file"),
                      ("--node.key_file=%s" % (tmp_path / "missing"), "missing"),
                      ("--mem.low_pct=95", "mem.low_pct"),
                      ("--node.bogus=1", "node.bogus")]:
        r = run_stratad("--check-config", "--config", conf, flag)
        assert r.returncode == 2, (flag, r.stdout, r.stderr)
        assert key in r.stderr, (flag, r.stderr)
        assert "configuration ok" not in r.stdout
    d = daemon_factory()
    r = run_stratad("--check-config", "--data", d.data, "--node.listen=%s" % d.addr)
    assert r.returncode == 0, r.stderr
    assert d.running


def test_help_lists_keys(run_stratad):
    r = run_stratad("--help")
    assert r.returncode == 0
    for key in ("node.id", "node.listen", "node.metrics_listen", "node.services", "--config"):
        assert key in r.stdout


# ---------------------------------------------------------------------------
# --config FILE, and flags over the file.

def test_config_file_is_read(tmp_path, daemon_factory):
    ini = _ini(tmp_path, "; a comment\n[node]\nid = 5\nthreads = 1\n")
    d = daemon_factory(node_id=None, extra_flags=["--config", str(ini)])
    st = d.client().status()
    assert st["node_id"] == 5
    assert st["threads"] == 1


@pytest.mark.parametrize("order", ["flag-after", "flag-before"])
def test_flags_override_config_file(tmp_path, daemon_factory, order):
    ini = _ini(tmp_path, "[node]\nid = 5\nthreads = 1\nlisten = 127.0.0.1:1\n")
    flags = ["--node.id=9", "--node.listen=127.0.0.1:0"]
    cfg = ["--config", str(ini)]
    d = daemon_factory(node_id=None, extra_flags=cfg + flags if order == "flag-after" else flags + cfg)
    st = d.client().status()
    assert st["node_id"] == 9          # the flag wins
    assert st["threads"] == 1          # the file still applies
    assert d.port != 1


def test_config_equals_form(tmp_path, daemon_factory):
    ini = _ini(tmp_path, "[node]\nid = 5\n")
    d = daemon_factory(node_id=None, extra_flags=["--config=%s" % ini])
    assert d.client().status()["node_id"] == 5


def test_data_equals_form(tmp_path):
    data = tmp_path / "eqdata"
    p = spawn([STRATAD, "--data=%s" % data, "--node.listen=127.0.0.1:0"], cwd=tmp_path,
              log_path=tmp_path / "eq.log")
    try:
        wait_until(lambda: (data / "stratad.addr").exists()
                   or (tmp_path / "strata-data" / "stratad.addr").exists(), 15,
                   what="an address file")
        assert (data / "stratad.addr").exists()
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            REGISTRY.discard(p.pid)


# ---------------------------------------------------------------------------
# Clean shutdown.

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly_with_clients(daemon, sig):
    idle = daemon.client()
    busy = daemon.client()
    # A client in the middle of a frame: half a header.
    partial = daemon.client()
    partial.send_raw(sw.encode_header(sw.OP_PING, req_id=1, bulk_len=100)[:20])
    # A client in the middle of a bulk.
    midbulk = daemon.client()
    midbulk.send_raw(sw.encode_header(sw.OP_PING, req_id=2, bulk_len=1 << 20) + b"z" * 1000)
    # A connection that never said HELLO.
    raw = daemon.client(hello=False)
    busy.ping(b"q" * 100000)
    mark = daemon.log_size()
    # A daemon that hung on the half-sent frames would not exit at all.
    rc = daemon.stop(sig, timeout=30)
    assert rc == 0, "exit %d; log:\n%s" % (rc, daemon.log_tail())
    daemon.wait_log(r"stopped", timeout=5, since=mark)
    daemon.wait_log(r"signal %d" % sig, timeout=5, since=mark)
    for c in (idle, busy, partial, midbulk, raw):
        assert c.wait_closed(3), "a client connection stayed open after exit"
        c.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", daemon.port), timeout=2).close()
    assert not daemon.sanitizer_reports()


def test_log_file_follows_a_rotation(daemon_factory, tmp_path, run_stratad):
    """node.log_file: the log goes there; after logrotate's move, SIGHUP
    reopens the path and the daemon goes on there, still serving."""
    path = tmp_path / "logs" / "stratad.log"
    path.parent.mkdir()
    d = daemon_factory(extra_flags=["--node.log_file=%s" % path])
    wait_until(lambda: path.exists() and "serving on" in path.read_text(), 10, 0.05,
               "the log in node.log_file")
    rotated = path.with_suffix(".log.1")
    path.rename(rotated)
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: path.exists() and "reopened" in path.read_text(), 10, 0.05,
               "a new log file after SIGHUP")
    assert "reopened" not in rotated.read_text()
    d.client().ping()
    assert d.running
    assert d.stop() == 0
    assert "stopped" in path.read_text()
    r = run_stratad("--data", tmp_path / "x", "--node.log_file=%s" % (tmp_path / "no" / "f"))
    assert r.returncode == 1 and "key 'node.log_file': cannot open" in r.stderr, r.stderr


def test_restart_on_same_data_dir(daemon):
    daemon.client().ping()
    assert daemon.stop() == 0
    daemon.start()
    assert daemon.client().status()["pid"] == daemon.pid


def test_stop_with_clients_does_not_leak(daemon):
    """Connections open at shutdown are closed and freed (they leaked
    before 1cad3bd: LeakSanitizer turned exit code 0 into 1)."""
    daemon.ignore_sanitizer = True
    c = daemon.client()
    c.ping(b"x")
    rc = daemon.stop(signal.SIGTERM, timeout=10)
    c.close()
    assert "LeakSanitizer" not in daemon.log, daemon.log_tail(30)
    assert rc == 0


def test_bad_listen_address_is_named(tmp_path, run_stratad):
    for bad in ("127.0.0.1:99999", "127.0.0.1:http", "nohostport", "[::1]7300"):
        r = run_stratad("--data", tmp_path / "data", "--node.listen=%s" % bad)
        assert r.returncode == 1, (bad, r.stderr)
        assert "key 'node.listen': '%s' is not HOST:PORT" % bad in r.stderr, r.stderr


def test_one_daemon_per_data_directory(daemon_factory, run_stratad):
    """A second stratad on a live daemon's data directory refuses to start,
    naming the first one's pid; once the first is gone (even by kill -9),
    the directory is free again."""
    d = daemon_factory(node_id=3)
    r = run_stratad("--data", d.data, "--node.listen=127.0.0.1:0", "--node.id=4")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("data directory '%s' is in use by another stratad (pid %d)" % (d.data, d.pid)
            in r.stderr + r.stdout), r.stderr
    d.kill9()
    d.start()
    assert d.running


def _node_addr(mgmt, node_id):
    r = run_strata("status", "--json", "--mgmt", mgmt.addr, timeout=30)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return next((n["address"] for n in json.loads(r.stdout)["nodes"] if n["id"] == node_id), None)


@pytest.mark.timeout(120)
def test_second_directory_cannot_take_a_live_node_id(daemon_factory):
    """Two storage daemons configured with one node.id, each with its own
    data directory: the second is refused at registration while the first
    is alive (mgmt keeps the first's address; both logs say why), and is
    admitted only once the first is dead and its lease has run out (a
    replaced disk: it resyncs like a restarted node)."""
    mgmt = daemon_factory(node_id=1, extra_flags=[
        "--node.services=mgmt", "--mgmt.expect_nodes=1", "--mgmt.replication=1",
        "--mgmt.lease=2s"])
    flags = ["--node.services=storage", "--mgmt.address=%s" % mgmt.addr,
             "--mgmt.heartbeat=300ms"]
    first = daemon_factory(node_id=2, extra_flags=flags)
    wait_until(lambda: _node_addr(mgmt, 2) == first.addr, 20, 0.2, "node 2 to register")
    ident = (first.data / "node.ident").read_text()
    assert re.fullmatch(r"[0-9a-f]{16}\n", ident), ident
    assert (first.data / "node.ident").stat().st_mode & 0o777 == 0o600
    second = daemon_factory(node_id=2, extra_flags=flags, name="second")
    assert (second.data / "node.ident").read_text() != ident
    wait_until(lambda: "refuses node 2: a daemon with another data directory" in second.log,
               20, 0.2, "the second daemon to be refused")
    assert re.search(r"registration of node 2 from '%s' refused: node 2 is alive at '%s' "
                     r"with another data directory" % (re.escape(second.addr),
                                                       re.escape(first.addr)), mgmt.log), \
        mgmt.log_tail()
    # Well past a lease: the first keeps the id, and its heartbeats.
    time.sleep(3)
    assert _node_addr(mgmt, 2) == first.addr
    assert "registered with mgmt" not in second.log
    # The first dies: once its lease has run out, the second takes over.
    first.kill9()
    wait_until(lambda: _node_addr(mgmt, 2) == second.addr, 30, 0.3,
               "the second directory to be admitted as node 2")
    # The first, back with its own directory, is now the one refused.
    first.start(flags)
    wait_until(lambda: "refuses node 2: a daemon with another data directory" in first.log,
               20, 0.2, "the restarted first daemon to be refused")
    assert _node_addr(mgmt, 2) == second.addr
