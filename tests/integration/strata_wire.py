"""The Strata frame (src/net/frame.h) in Python, and a small blocking client.

Used by the integration tests to talk to stratad directly, including on
purpose with frames that break the rules.

    offset size field
    0      4    magic      "STRA" (0x41525453 little-endian)
    4      2    version    1
    6      2    opcode
    8      4    flags      bit 0: response
    12     4    status     0 or a negative strata error (responses)
    16     8    req_id
    24     4    body_len   <= 4 MiB
    28     4    reserved   0
    32     8    bulk_len   <= 64 MiB
    40          body, then bulk

Every socket operation has a timeout; nothing here can block forever.
"""

import base64
import errno
import hashlib
import hmac
import json
import os
import socket
import struct
import time
from dataclasses import dataclass

MAGIC = 0x41525453
VERSION = 7
HDR_LEN = 40
MAX_BODY = 4 << 20
MAX_BULK = 64 << 20
F_RESPONSE = 0x1
F_CALLER = 0x2          # the body starts with a caller: uid, ngids, gids

OP_HELLO = 1
OP_PING = 2
OP_STATUS = 3
OP_AUTH = 4

ROLE_CLIENT = 0
ROLE_DAEMON = 1

_HDR = struct.Struct("<IHHIiQIIQ")
assert _HDR.size == HDR_LEN
_HELLO = struct.Struct("<IHHI")


class WireError(Exception):
    """The peer broke the protocol, closed, refused us (status), or did not
    answer in time."""

    def __init__(self, msg, status=None):
        super().__init__(msg)
        self.status = status


@dataclass
class Frame:
    opcode: int
    req_id: int = 0
    flags: int = 0
    status: int = 0
    body: bytes = b""
    bulk: bytes = b""
    magic: int = MAGIC
    version: int = VERSION
    reserved: int = 0
    body_len: int = -1     # -1: len(body)
    bulk_len: int = -1     # -1: len(bulk)


def encode_header(opcode, req_id=0, flags=0, status=0, body_len=0, bulk_len=0,
                  magic=MAGIC, version=VERSION, reserved=0):
    """The 40-byte header; every field can be set to a wrong value."""
    return _HDR.pack(magic, version, opcode, flags, status, req_id, body_len,
                     reserved, bulk_len)


def decode_header(data):
    """Returns a Frame with the header fields (body and bulk empty)."""
    if len(data) != HDR_LEN:
        raise WireError("header is %d bytes, not %d" % (len(data), HDR_LEN))
    magic, version, opcode, flags, status, req_id, body_len, reserved, bulk_len = \
        _HDR.unpack(data)
    return Frame(opcode=opcode, req_id=req_id, flags=flags, status=status,
                 magic=magic, version=version, reserved=reserved,
                 body_len=body_len, bulk_len=bulk_len)


def encode(frame):
    """Header, body and bulk of a Frame as bytes."""
    body_len = len(frame.body) if frame.body_len < 0 else frame.body_len
    bulk_len = len(frame.bulk) if frame.bulk_len < 0 else frame.bulk_len
    return encode_header(frame.opcode, frame.req_id, frame.flags, frame.status,
                         body_len, bulk_len, frame.magic, frame.version,
                         frame.reserved) + frame.body + frame.bulk


CRED_NONE, CRED_KEY, CRED_TOKEN = 0, 1, 2


def hello_body(role=ROLE_CLIENT, node_id=0, magic=MAGIC, version=VERSION, nonce=b"\0" * 16,
               kind=CRED_NONE, signed=b""):
    """A HELLO request: header fields, the client's nonce, the credential
    kind and the token's signed part (net/auth.h)."""
    return (_HELLO.pack(magic, version, role, node_id) + nonce + struct.pack("<BI", kind, len(signed))
            + signed)


def split_token(text):
    """(signed part, secret) of a token's text, as token_split does."""
    text = text.strip()
    signed, _, sig = text.rpartition(".")
    secret = base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))
    return signed.encode(), secret


def token_claims(text):
    """The claims of a token, as a dict (no signature check)."""
    signed, _ = split_token(text)
    b64 = signed.decode().split(".", 1)[1]
    return json.loads(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))


def proof(secret, label, nc, ns):
    return hmac.new(secret, label + nc + ns, hashlib.sha256).digest()


def decode_hello(body):
    """(magic, version, role, node_id) of a HELLO body."""
    if len(body) < _HELLO.size:
        raise WireError("HELLO body is %d bytes" % len(body))
    return _HELLO.unpack(body[:_HELLO.size])


def parse_addr(addr):
    host, _, port = addr.rpartition(":")
    return host, int(port)


class Client:
    """A blocking connection to a daemon. Not thread-safe."""

    def __init__(self, addr, timeout=10.0, hello=True, node_id=0, token=None, key=None):
        """token: a token's text; key: the cluster key (bytes): the
        credential HELLO presents (net/auth.h)."""
        self.addr = addr
        self.token = token
        self.key = key
        self.timeout = timeout
        self.sock = socket.create_connection(parse_addr(addr), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_id = 1
        self.hello_reply = None
        if hello:
            self.hello_reply = self.hello(node_id=node_id)

    # -- plumbing --

    @property
    def local_addr(self):
        """'host:port' of our side, as the daemon logs it."""
        host, port = self.sock.getsockname()[:2]
        return "%s:%d" % (host, port)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def new_id(self):
        rid = self._next_id
        self._next_id += 1
        return rid

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, frame):
        self.sock.sendall(encode(frame))

    def _recv_exact(self, n, deadline):
        chunks = []
        got = 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireError("timed out reading %d bytes from %s" % (n, self.addr))
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(min(n - got, 1 << 20))
            except socket.timeout:
                raise WireError("timed out reading %d bytes from %s" % (n, self.addr))
            if not b:
                raise WireError("%s closed the connection" % self.addr)
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def recv(self, timeout=None):
        """The next frame, body and bulk included."""
        deadline = time.monotonic() + (timeout or self.timeout)
        f = decode_header(self._recv_exact(HDR_LEN, deadline))
        if f.magic != MAGIC or f.version != VERSION:
            raise WireError("bad reply header: %r" % f)
        if f.body_len > MAX_BODY or f.bulk_len > MAX_BULK:
            raise WireError("reply lengths over limits: %r" % f)
        f.body = self._recv_exact(f.body_len, deadline) if f.body_len else b""
        f.bulk = self._recv_exact(f.bulk_len, deadline) if f.bulk_len else b""
        return f

    def call(self, opcode, body=b"", bulk=b"", timeout=None, flags=0):
        """Sends one request and waits for its response (same req_id)."""
        rid = self.new_id()
        self.send(Frame(opcode=opcode, req_id=rid, flags=flags, body=body, bulk=bulk))
        f = self.recv(timeout)
        if not f.flags & F_RESPONSE:
            raise WireError("expected a response, got %r" % f)
        if f.req_id != rid:
            raise WireError("response for id %d, expected %d" % (f.req_id, rid))
        return f

    # -- ops --

    def hello(self, role=ROLE_CLIENT, node_id=0):
        """HELLO with our credential, then AUTH when the server asks for it
        (after checking its proof). Raises WireError with the status."""
        nc = os.urandom(16)
        kind, signed, secret = CRED_NONE, b"", None
        if self.token:
            kind = CRED_TOKEN
            signed, secret = split_token(self.token)
        elif self.key:
            kind, secret = CRED_KEY, self.key
        f = self.call(OP_HELLO, hello_body(role, node_id, nonce=nc, kind=kind, signed=signed))
        if f.status != 0:
            raise WireError("HELLO failed: status %d" % f.status, status=f.status)
        reply = decode_hello(f.body)
        ns, sproof, flags = f.body[12:28], f.body[28:60], f.body[60]
        if secret is not None:
            if not flags & 1 or not hmac.compare_digest(sproof, proof(secret, b"strata-server", nc, ns)):
                raise WireError("the server did not prove the cluster key")
            a = self.call(OP_AUTH, proof(secret, b"strata-client", nc, ns))
            if a.status != 0:
                raise WireError("AUTH failed: status %d" % a.status, status=a.status)
        return reply

    def ping(self, bulk=b"", timeout=None):
        f = self.call(OP_PING, bulk=bulk, timeout=timeout)
        if f.status != 0:
            raise WireError("PING failed: status %d" % f.status)
        if f.bulk != bulk:
            raise WireError("PING echoed %d bytes, sent %d" % (len(f.bulk), len(bulk)))
        return f

    def status(self):
        f = self.call(OP_STATUS)
        if f.status != 0:
            raise WireError("STATUS failed: status %d" % f.status)
        return json.loads(f.body.decode())

    def wait_closed(self, timeout=5.0):
        """True when the peer closes (EOF or reset) within timeout; data
        received meanwhile is dropped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(left)
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                return False
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    return True
                raise
            if not b:
                return True


# ---- storage chunk requests (src/proto/storage.h) ----

OP_CHUNK_WRITE, OP_CHUNK_READ, OP_CHUNK_BATCH_READ, OP_CHUNK_REMOVE = 32, 33, 34, 35
OP_CHUNK_STAT, OP_CHUNK_TRUNCATE, OP_CHUNK_VERIFY = 36, 37, 41
OP_CHUNK_READ_SHM, OP_SHM_CHECK, OP_CHUNK_WRITE_SHM = 42, 43, 44
FWD_CLIENT, FWD_UPDATE, FWD_FULL, FWD_PUSH = 0, 1, 2, 3
CAP_READ, CAP_WRITE = 1, 2
CAP_LEN = 8 + 1 + 8 + 32
ZERO_CAP = b"\0" * CAP_LEN


def cap_bytes(ino, rights, expiry, mac):
    """An sp_cap: ino u64, rights u8, expiry i64, mac (32 bytes)."""
    assert len(mac) == 32
    return struct.pack("<QBq", ino, rights, expiry) + mac


def cap_sign(key, ino, rights, expiry):
    """A cap signed with the cluster key (bytes), as meta makes them
    (common/cap.h): HMAC-SHA256(key, "strata-cap" ino rights expiry)."""
    mac = hmac.new(key, b"strata-cap" + struct.pack("<QBq", ino, rights, expiry),
                   hashlib.sha256).digest()
    return cap_bytes(ino, rights, expiry, mac)


def cap_fields(cap):
    """(ino, rights, expiry, mac) of an sp_cap."""
    ino, rights, expiry = struct.unpack_from("<QBq", cap)
    return ino, rights, expiry, cap[17:]


def load_key(path):
    """The cluster key of a key file (64 hex digits)."""
    return bytes.fromhex(open(path).read().strip())


def sp_ref(target_id, ino, idx, cap=ZERO_CAP, chain_id=0, chain_ver=0):
    return struct.pack("<IQIQQ", chain_id, chain_ver, target_id, ino, idx) + cap


def sp_read(target_id, ino, idx, cap=ZERO_CAP, offset=0, length=4096, flags=0, **kw):
    return sp_ref(target_id, ino, idx, cap, **kw) + struct.pack("<III", offset, length, flags)


def sp_update(target_id, ino, idx, cap=ZERO_CAP, forwarded=FWD_CLIENT, offset=0, length=0,
              crc=0, version=0, base=0, **kw):
    return sp_ref(target_id, ino, idx, cap, **kw) + struct.pack(
        "<BIIIQQ", forwarded, offset, length, crc, version, base)


def sp_shm_write(update, region, secret, at):
    """sp_shm_write { sp_update upd, sp_shm shm { u32 region, u64 secret },
    u64 at }: a WRITE whose bytes are at offset at of the writer's region."""
    return update + struct.pack("<IQQ", region, secret, at)


def sp_batch(target_id, items, caps=()):
    """items: (chain_id, chain_ver, ino, idx, offset, len, cap index)."""
    b = struct.pack("<II", target_id, len(items))
    for it in items:
        b += struct.pack("<IQQQIII", *it)
    return b + struct.pack("<I", len(caps)) + b"".join(caps)


def caller_block(uid, gids=()):
    """The caller a FRAME_F_CALLER request acts for (net/auth.h)."""
    return struct.pack("<II", uid, len(gids)) + b"".join(struct.pack("<I", g) for g in gids)
