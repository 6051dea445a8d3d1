"""Malformed input on the wire: the daemon closes that one connection with a
logged reason, counts it in strata_net_bad_frames_total, and keeps serving
every other connection, old and new. A well-framed request whose body does
not decode is answered STRATA_EBADMSG instead, on a connection that stays
open."""

import errno
import random
import re
import select
import socket
import struct
import time

import pytest

import strata_wire as sw
from conftest import wait_until
from strata_wire import Frame, encode, encode_header, hello_body

BAD_FRAMES = "strata_net_bad_frames_total"
MID_FRAME = "connection closed in the middle of a frame"


def _hello():
    return encode(Frame(opcode=sw.OP_HELLO, req_id=1, body=hello_body()))


def _ping(rid=2, **kw):
    return encode(Frame(opcode=sw.OP_PING, req_id=rid, **kw))


# Each case: (id, say HELLO first?, bytes to send, half-close after?, reason regex)
CASES = [
    ("bad-magic", False, encode_header(sw.OP_HELLO, 1, body_len=len(hello_body()), magic=0xDEADBEEF)
     + hello_body(), False, "bad magic"),
    ("bad-magic-after-hello", True, encode_header(sw.OP_PING, 2, magic=0x41525454), False,
     "bad magic"),
    ("wrong-version", False, encode_header(sw.OP_HELLO, 1, body_len=len(hello_body()), version=sw.VERSION + 1)
     + hello_body(), False, "unsupported protocol version"),
    ("wrong-version-after-hello", True, encode_header(sw.OP_PING, 2, version=0), False,
     "unsupported protocol version"),
    ("huge-body-len", True, encode_header(sw.OP_PING, 2, body_len=sw.MAX_BODY + 1), False,
     "body length over limit"),
    ("max-u32-body-len", False, encode_header(sw.OP_HELLO, 1, body_len=0xFFFFFFFF), False,
     "body length over limit"),
    ("huge-bulk-len", True, encode_header(sw.OP_PING, 2, bulk_len=sw.MAX_BULK + 1), False,
     "bulk length over limit"),
    ("max-u64-bulk-len", True, encode_header(sw.OP_PING, 2, bulk_len=(1 << 64) - 1), False,
     "bulk length over limit"),
    ("nonzero-reserved", True, encode_header(sw.OP_PING, 2, reserved=1), False,
     "reserved field not zero"),
    ("nonzero-reserved-before-hello", False,
     encode_header(sw.OP_HELLO, 1, body_len=len(hello_body()), reserved=0x80000000) + hello_body(), False,
     "reserved field not zero"),
    ("unknown-flags", True, encode_header(sw.OP_PING, 2, flags=0x4), False, "unknown flags"),
    ("unknown-high-flag", True, encode_header(sw.OP_PING, 2, flags=0x80000001), False,
     "unknown flags"),
    ("truncated-header-then-close", False, _hello()[:20], True, MID_FRAME),
    ("truncated-header-after-hello", True, _ping()[:39], True, MID_FRAME),
    ("request-before-hello", False, _ping(), False, "first frame is not HELLO"),
    ("status-before-hello", False, encode(Frame(opcode=sw.OP_STATUS, req_id=5)), False,
     "first frame is not HELLO"),
    ("garbage-after-hello", True, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" + b"\0" * 16,
     False, "bad magic"),
    ("hello-twice", True, _hello(), False, "HELLO sent twice"),
    ("short-body-then-close", True, encode_header(sw.OP_PING, 2, body_len=100) + b"b" * 10,
     True, MID_FRAME),
    ("short-hello-body-then-close", False, _hello()[:40 + 6], True, MID_FRAME),
    ("short-bulk-then-close", True, encode_header(sw.OP_PING, 2, bulk_len=100000) + b"k" * 999,
     True, MID_FRAME),
    ("bad-hello-body-magic", False,
     encode(Frame(opcode=sw.OP_HELLO, req_id=1, body=hello_body(magic=0x1234))), False,
     "bad HELLO"),
    ("bad-hello-body-version", False,
     encode(Frame(opcode=sw.OP_HELLO, req_id=1, body=hello_body(version=9))), False,
     "bad HELLO"),
    ("hello-body-too-short", False, encode(Frame(opcode=sw.OP_HELLO, req_id=1, body=b"STRA")),
     False, "bad HELLO"),
    ("bulk-before-hello", False,
     encode(Frame(opcode=sw.OP_HELLO, req_id=1, body=hello_body(), bulk=b"x" * 64)), False,
     "bulk data before HELLO"),
    ("random-garbage", False, random.Random(20240601).randbytes(4096), False, "bad magic"),
    ("random-garbage-after-hello", True, random.Random(7).randbytes(300), False, "bad magic"),
]


@pytest.fixture(autouse=True)
def _daemon_survives(shared_daemon):
    assert shared_daemon.running, "the shared daemon died in an earlier test"
    yield
    assert shared_daemon.running, "the daemon died; log:\n" + shared_daemon.log_tail()


def _send_quietly(c, data, half_close):
    """Sends; the daemon may close (RST) before all of it is written."""
    try:
        c.send_raw(data)
        if half_close:
            c.sock.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        pass


def _attack(d, hello, payload, half_close, reason, expect_bad=1):
    before = d.metric(BAD_FRAMES)
    with d.client() as bystander:
        bystander.ping(b"before")
        atk = d.client(hello=hello, timeout=5)
        try:
            if hello:
                atk.ping(b"fine so far")
            peer = atk.local_addr
            mark = d.log_size()
            _send_quietly(atk, payload, half_close)
            assert atk.wait_closed(5), "the daemon kept the connection open"
        finally:
            atk.close()
        line = d.wait_log(r"WARN.*malformed frame from '%s': ([^;\n]*)" % re.escape(peer),
                          timeout=5, since=mark)
        assert re.search(reason, line.group(1)), \
            "reason %r does not match %r" % (line.group(1), reason)
        # The old connection still works, and so does a new one.
        bulk = random.randbytes(5000)
        assert bystander.ping(bulk).bulk == bulk
        with d.client() as fresh:
            fresh.ping(b"after")
            assert fresh.status()["bad_frames"] >= before + expect_bad
    assert d.metric(BAD_FRAMES) == before + expect_bad


@pytest.mark.parametrize("hello,payload,half_close,reason", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_malformed_closes_only_that_connection(shared_daemon, hello, payload, half_close,
                                               reason):
    _attack(shared_daemon, hello, payload, half_close, reason)


def test_byte_by_byte_bad_header(shared_daemon):
    """A bad header trickled one byte at a time is still caught."""
    d = shared_daemon
    before = d.metric(BAD_FRAMES)
    with d.client() as c:
        peer = c.local_addr
        mark = d.log_size()
        hdr = encode_header(sw.OP_PING, 3, reserved=7)
        for i in range(len(hdr) - 1):
            c.send_raw(hdr[i:i + 1])
            time.sleep(0.002)
        with d.client() as other:
            other.ping(b"meanwhile")
        _send_quietly(c, hdr[-1:], False)
        assert c.wait_closed(5)
    d.wait_log(r"malformed frame from '%s': reserved field not zero" % re.escape(peer),
               timeout=5, since=mark)
    assert d.metric(BAD_FRAMES) == before + 1


def test_clean_close_is_not_malformed(shared_daemon):
    d = shared_daemon
    before = d.metric(BAD_FRAMES)
    with d.client(hello=False):
        pass
    with d.client() as c:
        c.ping(b"x")
    with d.client() as c:
        c.ping(b"y")
        c.sock.shutdown(socket.SHUT_WR)
        assert c.wait_closed(5)
    time.sleep(0.1)
    assert d.metric(BAD_FRAMES) == before


def test_stray_response_is_ignored(shared_daemon):
    """A response for a request the daemon never sent is dropped, bulk and
    all; the connection stays usable."""
    d = shared_daemon
    before = d.metric(BAD_FRAMES)
    with d.client() as c:
        c.send(Frame(opcode=sw.OP_PING, req_id=999, flags=sw.F_RESPONSE, bulk=b"r" * 3000,
                     body=b"b" * 10))
        c.ping(b"still fine")
    assert d.metric(BAD_FRAMES) == before


@pytest.mark.timeout(90)
def test_flood_of_garbage_connections(shared_daemon):
    """200 connections sending garbage at once: all closed in bounded time,
    each counted, the log kept short, and the daemon still serves."""
    d = shared_daemon
    n = 200
    rnd = random.Random(99)
    before = d.metric(BAD_FRAMES)
    with d.client() as bystander:
        socks = []
        t0 = time.monotonic()
        try:
            for i in range(n):
                s = socket.create_connection(sw.parse_addr(d.addr), timeout=5)
                socks.append(s)
            for i, s in enumerate(socks):
                kind = i % 4
                if kind == 0:
                    data = rnd.randbytes(rnd.randint(40, 2000))
                elif kind == 1:
                    data = _hello() + rnd.randbytes(rnd.randint(40, 500))
                elif kind == 2:
                    data = encode_header(sw.OP_PING, i, body_len=0xFFFFFFF0)
                else:
                    data = _hello()[:rnd.randint(1, 39)]
                try:
                    s.sendall(data)
                    if kind == 3:
                        s.shutdown(socket.SHUT_WR)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            open_socks = set(socks)
            deadline = time.monotonic() + 30
            while open_socks and time.monotonic() < deadline:
                r, _, _ = select.select(list(open_socks), [], [], 1.0)
                for s in r:
                    try:
                        b = s.recv(65536)
                    except (ConnectionResetError, BrokenPipeError):
                        b = b""
                    if not b:
                        open_socks.discard(s)
                    # else: a HELLO reply (kind 1); keep waiting for EOF
            assert not open_socks, "%d garbage connections still open after 30 s" % len(open_socks)
            took = time.monotonic() - t0
            assert took < 30
        finally:
            for s in socks:
                s.close()
        bulk = rnd.randbytes(100000)
        assert bystander.ping(bulk).bulk == bulk
    with d.client() as c:
        c.ping(b"after the flood")
        st = c.status()
    assert st["bad_frames"] >= before + n
    wait_ok = d.metric(BAD_FRAMES)
    assert wait_ok == before + n
    # Every one is counted, but the log is rate-limited (src/common/log.h:
    # 32 lines per 10 s per call site), and says so.
    assert d.log.count("malformed frame from") < n
    assert "more lines like this in the next 10 s are dropped" in d.log


# The meta service's table (src/proto/meta.h).
OP_META_LOOKUP, OP_META_STATFS = 64, 80
STRATA_EBADMSG = -4103


def _lookup_body(ino, gen, name):
    return struct.pack("<QQI", ino, gen, len(name)) + name


def test_malformed_meta_request_is_answered(daemon_factory):
    """Bodies the meta table's decoders refuse (a name over 255 bytes, a
    body where none belongs) get STRATA_EBADMSG with the operation and the
    peer logged, and count as errors; the connection goes on, and a handle
    of another generation is -ESTALE."""
    d = daemon_factory(extra_flags=["--node.services=meta"])
    errors = d.metric("strata_meta_errors_total")
    lookups = d.metric("strata_meta_lookup_total")
    with d.client() as c:
        mark = d.log_size()
        f = c.call(OP_META_LOOKUP, _lookup_body(1, 1, b"n" * 256))
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed META_LOOKUP request from '%s' \(276 bytes\)"
                   % re.escape(c.local_addr), timeout=5, since=mark)
        f = c.call(OP_META_STATFS, b"x")
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed META_STATFS request", timeout=5, since=mark)
        # The same connection still serves: the root, by its handle.
        f = c.call(OP_META_LOOKUP, _lookup_body(1, 1, b"."))
        assert f.status == 0 and len(f.body) == 92
        assert struct.unpack_from("<QQ", f.body) == (1, 1)
        f = c.call(OP_META_LOOKUP, _lookup_body(1, 2, b"."))
        assert (f.status, f.body) == (-errno.ESTALE, b"")
        c.ping(b"after")
    assert d.metric("strata_meta_errors_total") == errors + 3
    assert d.metric("strata_meta_lookup_total") == lookups + 3


OP_META_CREATE_PATH, OP_META_OPEN_PATH, OP_META_UNLINK_PATH = 88, 89, 90


def _str(b):
    return struct.pack("<I", len(b)) + b


NO_ID = struct.pack("<QQ", 0, 0)        # a request id (client, seq): none


def test_malformed_meta_path_ops_are_answered(daemon_factory):
    """The compound operations by path (CREATE_PATH, OPEN_PATH,
    UNLINK_PATH) refuse what does not decode (a NUL in a path, a path over
    4096 bytes, access mode 3) with STRATA_EBADMSG and the operation
    logged; a decoded one runs: OPEN_PATH of "/" answers the root's
    attributes, a relative path is -EINVAL, a missing name -ENOENT."""
    d = daemon_factory(extra_flags=["--node.services=meta"])
    errors = d.metric("strata_meta_errors_total")
    with d.client() as c:
        mark = d.log_size()
        f = c.call(OP_META_CREATE_PATH,
                   _str(b"/a\0b") + _str(b"f") + struct.pack("<IIII", 0o644, 0, 0, 0))
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed META_CREATE_PATH request", timeout=5, since=mark)
        f = c.call(OP_META_OPEN_PATH, _str(b"/" * 4097) + struct.pack("<I", 0))
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        f = c.call(OP_META_OPEN_PATH, _str(b"/") + struct.pack("<I", 3))
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed META_OPEN_PATH request", timeout=5, since=mark)
        f = c.call(OP_META_UNLINK_PATH, _str(b"/") + b"\xff")
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed META_UNLINK_PATH request", timeout=5, since=mark)
        # Decoded requests run.
        f = c.call(OP_META_OPEN_PATH, _str(b"/") + struct.pack("<I", 0))
        assert f.status == 0
        created, ino, gen = struct.unpack_from("<BQQ", f.body)
        assert (created, ino, gen) == (0, 1, 1)
        f = c.call(OP_META_OPEN_PATH, _str(b"rel") + struct.pack("<I", 0))
        assert (f.status, f.body) == (-errno.EINVAL, b"")
        f = c.call(OP_META_UNLINK_PATH, _str(b"/") + _str(b"missing") + NO_ID)
        assert (f.status, f.body) == (-errno.ENOENT, b"")
        f = c.call(OP_META_UNLINK_PATH, _str(b"/missing") + _str(b"x") + NO_ID)
        assert (f.status, f.body) == (-errno.ENOENT, b"")
        c.ping(b"after")
    assert d.metric("strata_meta_errors_total") == errors + 7


OP_META_MKDIR, OP_META_RMDIR = 68, 72


def test_a_request_id_is_answered_from_its_record(daemon_factory):
    """MKDIR and RMDIR with a request id, sent twice as a client's retry
    would: the second gets the first's answer (the same inode, not
    EEXIST; 0, not ENOENT), counted as a replay; another client's id, or
    none, is applied afresh. (A lone meta daemon knows no chain table, so
    no regular file: directories it is.)"""
    d = daemon_factory(extra_flags=["--node.services=meta"])
    mkdir = _lookup_body(1, 1, b"once") + struct.pack("<IIII", 0o40755, 0, 0, 0)
    rmdir = _lookup_body(1, 1, b"once")
    with d.client() as c:
        first = c.call(OP_META_MKDIR, mkdir + struct.pack("<QQ", 0xfeed, 1))
        assert first.status == 0
        again = c.call(OP_META_MKDIR, mkdir + struct.pack("<QQ", 0xfeed, 1))
        assert again.status == 0
        assert struct.unpack_from("<QQ", again.body) == struct.unpack_from("<QQ", first.body)
        f = c.call(OP_META_MKDIR, mkdir + struct.pack("<QQ", 0xbeef, 1))
        assert f.status == -errno.EEXIST
        f = c.call(OP_META_MKDIR, mkdir + NO_ID)
        assert f.status == -errno.EEXIST
        assert c.call(OP_META_RMDIR, rmdir + struct.pack("<QQ", 0xfeed, 2)).status == 0
        assert c.call(OP_META_RMDIR, rmdir + struct.pack("<QQ", 0xfeed, 2)).status == 0
        f = c.call(OP_META_RMDIR, rmdir + NO_ID)
        assert f.status == -errno.ENOENT
        # A body without the id (a peer of the version before) is malformed.
        f = c.call(OP_META_RMDIR, rmdir)
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
    assert d.metric("strata_meta_request_replays_total") == 2


def test_a_request_ids_record_expires(daemon_factory):
    """With meta.request_ttl at 1 s, the server with the gc role prunes
    the record: the same id, sent again once the directory it made is
    gone, makes it anew instead of answering from the record."""
    d = daemon_factory(extra_flags=["--node.services=meta", "--meta.request_ttl=1s",
                                    "--meta.gc_interval=100ms"])
    mkdir = _lookup_body(1, 1, b"ttl") + struct.pack("<IIII", 0o40755, 0, 0, 0) + \
        struct.pack("<QQ", 0xa11, 1)
    with d.client() as c:
        assert c.call(OP_META_MKDIR, mkdir).status == 0
        assert c.call(OP_META_RMDIR, _lookup_body(1, 1, b"ttl") + NO_ID).status == 0

        def made_anew():
            assert c.call(OP_META_MKDIR, mkdir).status == 0
            return c.call(OP_META_LOOKUP, _lookup_body(1, 1, b"ttl")).status == 0
        wait_until(made_anew, 30, 0.2, "the record of request a11:1 to expire")


# The mem service's table (src/proto/mem.h).
OP_MEM_PUT, OP_MEM_GET, OP_MEM_MPUT, OP_MEM_STATS = 96, 97, 102, 106


def _mem_key(k):
    return struct.pack("<I", len(k)) + k


def test_malformed_mem_request_is_answered(daemon_factory):
    """Bodies the mem table's decoders refuse (a key over 1024 bytes, an
    unknown put flag, a body where none belongs) and an MPUT whose values
    do not add up to its bulk get STRATA_EBADMSG with the operation and
    the peer logged; the connection goes on, and serves a PUT and a GET
    laid out as the table says."""
    d = daemon_factory(extra_flags=["--node.services=mem", "--mem.capacity=16M"])
    with d.client() as c:
        mark = d.log_size()
        f = c.call(OP_MEM_GET, struct.pack("<Q", 100) + _mem_key(b"k" * 1025))
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed MEM_GET request from '%s' \(1037 bytes\)"
                   % re.escape(c.local_addr), timeout=5, since=mark)
        f = c.call(OP_MEM_PUT, struct.pack("<I", 4) + _mem_key(b"k"), bulk=b"v")
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed MEM_PUT request", timeout=5, since=mark)
        f = c.call(OP_MEM_STATS, b"x")
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed MEM_STATS request", timeout=5, since=mark)
        f = c.call(OP_MEM_MPUT, struct.pack("<IIQ", 1, 0, 3) + _mem_key(b"m"), bulk=b"7 bytes")
        assert (f.status, f.body) == (STRATA_EBADMSG, b"")
        d.wait_log(r"WARN.*malformed MEM_MPUT request from '%s': its values take 3 bytes, "
                   r"its bulk 7" % re.escape(c.local_addr), timeout=5, since=mark)
        # The same connection still serves.
        f = c.call(OP_MEM_PUT, struct.pack("<I", 0) + _mem_key(b"k"), bulk=b"value")
        assert (f.status, f.body) == (0, b"")
        f = c.call(OP_MEM_GET, struct.pack("<Q", 100) + _mem_key(b"k"))
        assert (f.status, f.body, f.bulk) == (0, struct.pack("<Q", 5), b"value")
        f = c.call(OP_MEM_GET, struct.pack("<Q", 4) + _mem_key(b"k"))
        assert (f.status, f.body, f.bulk) == (-errno.ENOBUFS, b"", b"")
        c.ping(b"after")
