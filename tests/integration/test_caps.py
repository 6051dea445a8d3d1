"""Chunk capabilities (issue 15, docs/security.md, "Chunk capabilities"):
storage serves a client token's chunk request only with a capability meta
signed for that file (common/cap.h), so a token cannot reach the chunks
of a file it cannot open by naming them on the wire.

One keyed 'strata local up' cluster (one node, every service) for the
module. The admin token (uid 0, rw:/) writes a root-only file; a tenant
token (uid 1000, rw:/t1) then sends raw chunk requests (strata_wire) to
the storage node. The test holds the cluster key, so it can also sign
caps itself: a correctly signed cap that has expired, or one edited.
"""
import json
import struct
import time

import pytest

import strata_wire as sw
from conftest import signed_token
from conftest import strata_nocred as strata

EACCES = -13
OP_OPEN, OP_SETATTR, OP_RESOLVE = 67, 74, 81
ATTR_MODE, ATTR_UID, ATTR_GID = 1, 2, 4
O_RDONLY, O_WRONLY = 0, 1


class Caps:
    def __init__(self, c, tmp):
        self.c = c
        self.tmp = tmp
        self.mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
        self.meta = next(n for n in c.nodes if "meta" in n.services.split(","))
        self.st = c.storage_nodes[0]
        self.target = self.st.id * 256        # storage_target_id(node, 0)
        self.admin = c.dir / "admin.token"
        self.key = sw.load_key(c.dir / "cluster.key")

    def token(self, name, *args):
        return signed_token(self.c.dir, self.tmp / name, "--expires", "1h", *args)

    def ok(self, token, *args):
        r = strata(*args, "--token", token, "--mgmt", self.mgmt)
        assert r.returncode == 0, "%s: %s" % (args, r.stderr)
        return r

    def meta_wire(self, token):
        return sw.Client(self.meta.addr, token=token.read_text())

    def storage(self, token):
        return sw.Client(self.st.addr, token=token.read_text())

    def ino(self, path):
        p = path.encode()
        with self.meta_wire(self.admin) as a:
            f = a.call(OP_RESOLVE, struct.pack("<I", len(p)) + p + struct.pack("<I", 0))
            assert f.status == 0, (path, f.status)
            return struct.unpack_from("<Q", f.body)[0]

    def setattr(self, path, mask, mode=0, uid=0, gid=0):
        body = struct.pack("<QQIIIIqqQQQ", self.ino(path), 0, mask, mode, uid, gid, 0, 0, 0, 0, 0)
        with self.meta_wire(self.admin) as a:
            assert a.call(OP_SETATTR, body).status == 0

    def open_cap(self, token, path, flags=O_RDONLY):
        """(status, cap) of a META_OPEN of path: the cap ends the reply."""
        with self.meta_wire(token) as cl:
            f = cl.call(OP_OPEN, struct.pack("<QQI", self.ino(path), 0, flags))
            return f.status, (f.body[-sw.CAP_LEN:] if f.status == 0 else None)


@pytest.fixture(scope="module")
def caps(tmp_path_factory, module_cluster):
    tmp = tmp_path_factory.mktemp("caps")
    c = module_cluster(1, timeout=90)
    t = Caps(c, tmp)
    src = tmp / "data.txt"
    src.write_bytes(b"secret data\n" * 100)
    t.ok(t.admin, "mkdir", "/t1")
    t.setattr("/t1", ATTR_UID | ATTR_GID, uid=1000, gid=1000)
    t.ok(t.admin, "put", src, "/secret")
    t.setattr("/secret", ATTR_MODE, mode=0o600)
    t.src = src
    t.t1 = t.token("t1", "--uid", "1000", "--gid", "1000", "--path", "rw:/t1")
    t.ok(t.t1, "put", src, "/t1/own")
    return t


def test_cli_io_inside_the_scope_works(caps):
    t1 = caps.t1
    caps.ok(t1, "put", caps.src, "/t1/a")
    assert caps.ok(t1, "cat", "/t1/a").stdout == caps.src.read_text()
    caps.ok(t1, "put", caps.src, "/t1/a")       # overwrite: CREATE with truncation
    assert caps.ok(t1, "cat", "/t1/a").stdout == caps.src.read_text()
    caps.ok(t1, "rm", "/t1/a")


def test_meta_gives_caps_by_access_mode(caps):
    now = time.time()
    st, cap = caps.open_cap(caps.t1, "/t1/own", O_RDONLY)
    assert st == 0
    ino, rights, expiry, _ = sw.cap_fields(cap)
    assert ino == caps.ino("/t1/own") and rights == sw.CAP_READ
    assert now + 300 < expiry < now + 3600
    st, cap = caps.open_cap(caps.t1, "/t1/own", O_WRONLY)
    assert st == 0 and sw.cap_fields(cap)[1] == sw.CAP_WRITE
    # The bits refuse an OPEN of the root-only file: no cap for it.
    assert caps.open_cap(caps.t1, "/secret")[0] == EACCES


def test_no_cap_is_refused(caps):
    secret = caps.ino("/secret")
    with caps.storage(caps.t1) as cl:
        assert cl.call(sw.OP_CHUNK_READ, sw.sp_read(caps.target, secret, 0)).status == EACCES
        assert cl.call(sw.OP_CHUNK_STAT, sw.sp_ref(caps.target, secret, 0)).status == EACCES
        assert cl.call(sw.OP_CHUNK_VERIFY, sw.sp_read(caps.target, secret, 0)).status == EACCES
        assert cl.call(sw.OP_CHUNK_REMOVE, sw.sp_update(caps.target, secret, 0)).status == EACCES
        assert cl.call(sw.OP_CHUNK_TRUNCATE,
                       sw.sp_update(caps.target, secret, 0, length=1)).status == EACCES
        data = b"x" * 16
        assert cl.call(sw.OP_CHUNK_WRITE, sw.sp_update(caps.target, secret, 0, length=len(data)),
                       bulk=data).status == EACCES
        items = [(0, 0, secret, 0, 0, 4096, 0)]
        f = cl.call(sw.OP_CHUNK_BATCH_READ, sw.sp_batch(caps.target, items))
        assert f.status == 0
        assert struct.unpack_from("<Ii", f.body)[1] == EACCES
    # Warned once for the connection, with the peer and the token's id.
    claims = sw.token_claims(caps.t1.read_text())
    assert caps.st.log.count("no valid chunk capability") >= 1
    assert "token %s" % claims["id"] in caps.st.log
    # The file itself is intact: the admin reads it whole.
    assert caps.ok(caps.admin, "cat", "/secret").stdout == caps.src.read_text()


def test_cap_of_another_ino_is_refused(caps):
    secret = caps.ino("/secret")
    st, cap = caps.open_cap(caps.t1, "/t1/own", 2)     # read and write
    assert st == 0
    with caps.storage(caps.t1) as cl:
        # The cap is good for its own file (STAT checks no chain) ...
        own = caps.ino("/t1/own")
        assert cl.call(sw.OP_CHUNK_STAT, sw.sp_ref(caps.target, own, 0, cap)).status == 0
        # ... and for no other.
        assert cl.call(sw.OP_CHUNK_READ, sw.sp_read(caps.target, secret, 0, cap)).status == EACCES
        assert cl.call(sw.OP_CHUNK_STAT, sw.sp_ref(caps.target, secret, 0, cap)).status == EACCES
        data = b"x" * 16
        assert cl.call(sw.OP_CHUNK_WRITE,
                       sw.sp_update(caps.target, secret, 0, cap, length=len(data)),
                       bulk=data).status == EACCES
        items = [(0, 0, own, 0, 0, 16, 0), (0, 0, secret, 0, 0, 16, 0)]
        f = cl.call(sw.OP_CHUNK_BATCH_READ, sw.sp_batch(caps.target, items, [cap]))
        assert f.status == 0
        # results: status i32, version u64, nread u32, crc u32 each
        assert struct.unpack_from("<i", f.body, 4 + 20)[0] == EACCES
        assert struct.unpack_from("<i", f.body, 4)[0] != EACCES


def test_edited_or_expired_cap_is_refused(caps):
    secret = caps.ino("/secret")
    st, cap = caps.open_cap(caps.t1, "/t1/own", O_RDONLY)
    ino, rights, expiry, mac = sw.cap_fields(cap)
    future = int(time.time()) + 600
    edits = [
        sw.cap_bytes(secret, rights, expiry, mac),                  # moved to /secret
        sw.cap_bytes(ino, sw.CAP_READ | sw.CAP_WRITE, expiry, mac),  # widened
        sw.cap_bytes(ino, rights, expiry + 3600, mac),               # extended
        sw.cap_bytes(ino, rights, expiry, bytes([mac[0] ^ 1]) + mac[1:]),
        sw.cap_sign(b"k" * 32, secret, sw.CAP_READ, future),         # another cluster's key
        sw.cap_sign(caps.key, secret, sw.CAP_READ, int(time.time()) - 1),  # expired
    ]
    with caps.storage(caps.t1) as cl:
        for i, e in enumerate(edits):
            target_ino = secret if sw.cap_fields(e)[0] == secret else ino
            assert cl.call(sw.OP_CHUNK_STAT,
                           sw.sp_ref(caps.target, target_ino, 0, e)).status == EACCES, i
        # A read cap does not write.
        assert cl.call(sw.OP_CHUNK_REMOVE, sw.sp_update(caps.target, ino, 0, cap)).status == EACCES
        # The same cap signed with the key, not expired, passes: the
        # refusals above are the cap's, not the request's.
        good = sw.cap_sign(caps.key, secret, sw.CAP_READ, future)
        assert cl.call(sw.OP_CHUNK_STAT, sw.sp_ref(caps.target, secret, 0, good)).status == 0


def test_forwarded_update_from_a_client_is_refused(caps):
    own = caps.ino("/t1/own")
    st, cap = caps.open_cap(caps.t1, "/t1/own", 2)
    assert st == 0
    data = b"y" * 16
    with caps.storage(caps.t1) as cl:
        for fwd in (sw.FWD_UPDATE, sw.FWD_FULL, sw.FWD_PUSH):
            f = cl.call(sw.OP_CHUNK_WRITE,
                        sw.sp_update(caps.target, own, 0, cap, forwarded=fwd, length=len(data),
                                     version=(1 << 40) + 5, base=0),
                        bulk=data)
            assert f.status == EACCES, fwd
    assert caps.ok(caps.t1, "cat", "/t1/own").stdout == caps.src.read_text()


def test_admin_token_needs_caps_too(caps):
    """An admin token is a client: raw chunk access still needs a cap."""
    secret = caps.ino("/secret")
    with caps.storage(caps.admin) as cl:
        assert cl.call(sw.OP_CHUNK_READ, sw.sp_read(caps.target, secret, 0)).status == EACCES
