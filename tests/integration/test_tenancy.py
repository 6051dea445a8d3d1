"""Namespace permissions for client tokens (issue 15, docs/security.md,
"Namespace permissions"): meta checks POSIX permission bits with the
token's identity and keeps each token inside its path scopes.

One 'strata local up' cluster for the module. The admin token (uid 0,
root, rw:/) lays out the namespace; the tests then act through the CLI
with other tokens signed by the cluster's key, and through the wire
(strata_wire) for SETATTR, which the CLI has no command for.
"""
import struct

import pytest

import strata_wire as sw
from conftest import signed_token
from conftest import strata_nocred as strata

EPERM = -1
EACCES = -13
OP_LOOKUP, OP_SETATTR, OP_RESOLVE = 64, 74, 81
ATTR_MODE, ATTR_UID, ATTR_GID = 1, 2, 4


class Tenancy:
    def __init__(self, c, tmp):
        import json
        self.c = c
        self.tmp = tmp
        self.mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
        self.meta = next(n for n in c.nodes if "meta" in n.services.split(","))
        self.admin = c.dir / "admin.token"

    def token(self, name, *args):
        return signed_token(self.c.dir, self.tmp / name, "--expires", "1h", *args)

    def cli(self, token, *args):
        return strata(*args, "--token", token, "--mgmt", self.mgmt)

    def ok(self, token, *args):
        r = self.cli(token, *args)
        assert r.returncode == 0, "%s: %s" % (args, r.stderr)
        return r

    def denied(self, token, *args):
        r = self.cli(token, *args)
        assert r.returncode != 0, "%s succeeded: %s" % (args, r.stdout)
        assert "ermission denied" in r.stderr or "not permitted" in r.stderr, \
            "%s: %s" % (args, r.stderr)
        return r

    def wire(self, token):
        return sw.Client(self.meta.addr, token=token.read_text())

    @staticmethod
    def resolve(cl, path):
        """(status, (ino, mode, uid, gid))."""
        p = path.encode()
        f = cl.call(OP_RESOLVE, struct.pack("<I", len(p)) + p + struct.pack("<I", 0))
        if f.status:
            return f.status, None
        ino, _gen, mode, uid, gid = struct.unpack_from("<QQIII", f.body)
        return 0, (ino, mode, uid, gid)

    def setattr(self, token, path, mask, mode=0, uid=0, gid=0):
        with self.wire(self.admin) as a:
            st, at = self.resolve(a, path)
            assert st == 0, (path, st)
        body = struct.pack("<QQIIIIqqQQQ", at[0], 0, mask, mode, uid, gid, 0, 0, 0, 0, 0)
        with self.wire(token) as cl:
            return cl.call(OP_SETATTR, body).status

    def stat(self, path):
        with self.wire(self.admin) as a:
            st, at = self.resolve(a, path)
            assert st == 0, (path, st)
            return at


@pytest.fixture(scope="module")
def ten(tmp_path_factory, module_cluster):
    tmp = tmp_path_factory.mktemp("ten")
    c = module_cluster(1, timeout=90)
    t = Tenancy(c, tmp)
    src = tmp / "data.txt"
    src.write_bytes(b"secret data\n")
    a = t.admin
    for d in ("/t1", "/t2", "/ro"):
        t.ok(a, "mkdir", d)
    # The tenants own their directories; /ro and /t2 are open to all by
    # their bits, so what refuses there is the scope.
    assert t.setattr(a, "/t1", ATTR_UID | ATTR_GID, uid=1000, gid=1000) == 0
    assert t.setattr(a, "/t2", ATTR_UID | ATTR_GID, uid=2000, gid=2000) == 0
    assert t.setattr(a, "/t2", ATTR_MODE, mode=0o777) == 0
    assert t.setattr(a, "/ro", ATTR_MODE, mode=0o777) == 0
    t.ok(a, "put", src, "/ro/f")
    t.ok(a, "put", src, "/pub")
    t.ok(a, "put", src, "/secret")
    assert t.setattr(a, "/secret", ATTR_MODE, mode=0o600) == 0
    t.src = src
    return t


def test_root_only_file_is_unreadable_and_undeletable(ten):
    u = ten.token("u1000", "--uid", "1000", "--gid", "1000", "--path", "rw:/")
    ten.denied(u, "cat", "/secret")
    ten.denied(u, "rm", "/secret")
    ten.denied(u, "mv", "/secret", "/t1/stolen")
    # What the bits allow still works: / is 0755, /pub 0644.
    assert b"secret data" in ten.ok(u, "cat", "/pub").stdout.encode()
    assert "secret" in ten.ok(u, "ls", "/").stdout
    ten.denied(u, "put", ten.src, "/mine")
    # The admin token (root) still reads it.
    assert "secret data" in ten.ok(ten.admin, "cat", "/secret").stdout


def test_squashed_root_is_nobody(ten):
    sq = ten.token("squashed", "--uid", "0", "--gid", "0", "--path", "rw:/")
    ten.denied(sq, "cat", "/secret")
    ten.denied(sq, "rm", "/pub")


def test_tenant_works_inside_its_scope_only(ten):
    t1 = ten.token("t1", "--uid", "1000", "--gid", "1000", "--path", "rw:/t1")
    ten.ok(t1, "put", ten.src, "/t1/a")
    assert ten.ok(t1, "cat", "/t1/a").stdout == "secret data\n"
    ten.ok(t1, "mkdir", "/t1/d")
    # -p passes the parents it may look up but not create in.
    ten.ok(t1, "mkdir", "-p", "/t1/p/q/r")
    ten.ok(t1, "mkdir", "-p", "/t1/p/q/r")
    ten.denied(t1, "mkdir", "-p", "/t2/p")
    ten.ok(t1, "mv", "/t1/a", "/t1/d/b")
    assert "b" in ten.ok(t1, "ls", "/t1/d").stdout
    # Created inodes belong to the token's identity.
    assert ten.stat("/t1/d/b")[2:] == (1000, 1000)
    assert ten.stat("/t1/d")[2:] == (1000, 1000)
    ten.ok(t1, "put", ten.src, "/t1/c")
    ten.ok(t1, "rm", "/t1/c")

    ten.ok(ten.admin, "put", ten.src, "/t2/f")
    ten.denied(t1, "cat", "/t2/f")
    ten.denied(t1, "ls", "/t2")
    ten.denied(t1, "put", ten.src, "/t2/x")
    ten.denied(t1, "mv", "/t1/d/b", "/t2/b")
    ten.denied(t1, "rm", "/t2/f")
    ten.denied(t1, "mkdir", "/t2/sub")
    ten.denied(t1, "ls", "/")
    ten.denied(t1, "cat", "/pub")
    ten.denied(t1, "put", ten.src, "/top")
    ten.denied(t1, "rm", "/pub")
    ten.denied(t1, "mkdir", "/t1x")
    ten.denied(t1, "cat", "/ro/f")
    # A symlink or ".." does not carry a walk out of the scope.
    with ten.wire(t1) as cl:
        assert ten.resolve(cl, "/t1/../t2/f")[0] == EACCES
        assert ten.resolve(cl, "/t1")[0] == 0
        assert ten.resolve(cl, "/")[0] == 0
    ten.ok(ten.admin, "stat", "/t2/f")


def test_read_only_scope(ten):
    r = ten.token("ro", "--uid", "1000", "--gid", "1000", "--path", "r:/ro")
    assert ten.ok(r, "cat", "/ro/f").stdout == "secret data\n"
    assert "f" in ten.ok(r, "ls", "/ro").stdout
    ten.denied(r, "put", ten.src, "/ro/new")
    ten.denied(r, "rm", "/ro/f")
    ten.denied(r, "mkdir", "/ro/d")
    ten.denied(r, "mv", "/ro/f", "/ro/g")
    assert ten.setattr(r, "/ro/f", ATTR_MODE, mode=0o666) == EACCES


def test_second_tenant_cannot_see_the_first(ten):
    t1 = ten.token("t1b", "--uid", "1000", "--gid", "1000", "--path", "rw:/t1")
    t2 = ten.token("t2", "--uid", "2000", "--gid", "2000", "--path", "rw:/t2")
    ten.ok(t1, "put", ten.src, "/t1/private")
    ten.denied(t2, "cat", "/t1/private")
    ten.denied(t2, "ls", "/t1")
    ten.denied(t2, "stat", "/t1/private")
    ten.denied(t2, "rm", "/t1/private")
    ten.ok(t2, "put", ten.src, "/t2/own")
    assert ten.ok(t2, "cat", "/t2/own").stdout == "secret data\n"


def test_chmod_and_chown_need_the_owner(ten):
    u = ten.token("u1000c", "--uid", "1000", "--gid", "1000", "--path", "rw:/")
    t1 = ten.token("t1c", "--uid", "1000", "--gid", "1000", "--path", "rw:/t1")
    # /pub is root's: a non-owner may not chmod or chown it.
    assert ten.setattr(u, "/pub", ATTR_MODE, mode=0o666) == EPERM
    assert ten.setattr(u, "/pub", ATTR_UID, uid=1000) == EPERM
    assert ten.stat("/pub")[1] & 0o7777 == 0o644
    # The owner may chmod its own file, but not give it away.
    ten.ok(t1, "put", ten.src, "/t1/m")
    assert ten.setattr(t1, "/t1/m", ATTR_MODE, mode=0o600) == 0
    assert ten.stat("/t1/m")[1] & 0o7777 == 0o600
    assert ten.setattr(t1, "/t1/m", ATTR_UID, uid=2000) == EPERM
    assert ten.setattr(t1, "/t1/m", ATTR_GID, gid=2000) == EPERM
    # Root (the admin token) may.
    assert ten.setattr(ten.admin, "/t1/m", ATTR_UID | ATTR_GID, uid=2000, gid=2000) == 0
    ten.denied(t1, "cat", "/t1/m")


def test_sticky_directory(ten):
    a = ten.admin
    ten.ok(a, "mkdir", "/t1/tmp")
    assert ten.setattr(a, "/t1/tmp", ATTR_MODE, mode=0o1777) == 0
    t1 = ten.token("t1s", "--uid", "1000", "--gid", "1000", "--path", "rw:/t1")
    t3 = ten.token("t3s", "--uid", "3000", "--gid", "3000", "--path", "rw:/t1")
    ten.ok(t1, "put", ten.src, "/t1/tmp/mine")
    ten.denied(t3, "rm", "/t1/tmp/mine")
    ten.denied(t3, "mv", "/t1/tmp/mine", "/t1/tmp/theirs")
    ten.ok(t3, "put", ten.src, "/t1/tmp/t3file")
    ten.ok(t3, "rm", "/t1/tmp/t3file")
    ten.ok(t1, "rm", "/t1/tmp/mine")
