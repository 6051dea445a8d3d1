"""Credentials (issue 15, docs/security.md): the cluster key between
daemons, tokens for clients, and what a daemon refuses.

A cluster from 'strata local up' has a key (DIR/cluster.key, 0600) that
every daemon proves, and an admin token (DIR/admin.token). Every test
here talks to real daemons: through the strata CLI, or byte by byte with
strata_wire (forged and replayed credentials, a fake storage node).
"""
import os
import re
import stat
import struct
import time

import pytest

import strata_wire as sw
from conftest import STRATA, run, signed_token, wait_until
from conftest import strata_nocred as strata

ENOCRED = -(4096 + 12)
EACCES = -13
EDQUOT = -122
EKEYEXPIRED = -127
EKEYREJECTED = -129
OP_MGMT_REGISTER = 16
OP_MGMT_ADMIN = 20


def wait_log(node, pattern):
    wait_until(lambda: re.search(pattern, node.log), 10, 0.1, "log pattern %r" % pattern)


def mgmt_of(c):
    import json
    return json.loads((c.dir / "cluster.json").read_text())["mgmt"]


def make_token(c, tmp_path, name, *args):
    """A token signed with c's key, in a 0600 file; returns the path."""
    path = signed_token(c.dir, tmp_path / name, *args)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return path


@pytest.fixture(scope="module")
def sec_cluster(module_cluster):
    return module_cluster(2, timeout=90)


def test_local_up_writes_a_key_and_an_admin_token(sec_cluster):
    c = sec_cluster
    for f in ("cluster.key", "admin.token"):
        assert stat.S_IMODE((c.dir / f).stat().st_mode) == 0o600, f
    claims = sw.token_claims((c.dir / "admin.token").read_text())
    assert claims["admin"] is True and claims["paths"] == [{"prefix": "/", "access": "rw"}]
    r = strata("ls", "--dir", c.dir, "/")
    assert r.returncode == 0, r.stderr


def test_no_credential_is_a_clear_error(sec_cluster):
    r = strata("ls", "--mgmt", mgmt_of(sec_cluster), "/")
    assert r.returncode == 1
    assert "permission denied: no credential" in r.stderr, r.stderr
    with pytest.raises(sw.WireError) as e:
        sw.Client(sec_cluster.mgmt_node.addr)
    assert e.value.status == ENOCRED
    wait_log(sec_cluster.mgmt_node, r"refused '127\.0\.0\.1:\d+': no credential")


def test_a_wrong_cluster_key_is_refused(sec_cluster):
    """A peer with another key: the client sees that the daemon does not
    prove its key; the daemon refuses the proof (forged AUTH)."""
    node = sec_cluster.storage_nodes[0]
    with pytest.raises(sw.WireError, match="did not prove"):
        node.client(key=os.urandom(32))
    # Byte by byte: a HELLO as a daemon, then a proof made with a wrong key.
    cl = node.client(hello=False)
    nc = os.urandom(16)
    f = cl.call(sw.OP_HELLO, sw.hello_body(sw.ROLE_DAEMON, 99, nonce=nc, kind=sw.CRED_KEY))
    assert f.status == 0 and f.body[60] & 1
    ns = f.body[12:28]
    a = cl.call(sw.OP_AUTH, sw.proof(os.urandom(32), b"strata-client", nc, ns))
    assert a.status == EKEYREJECTED
    # Closed after the refusal: an orderly close or a reset, as timing has it.
    with pytest.raises((sw.WireError, OSError)):
        cl.ping()
    wait_log(node, r"refused '127\.0\.0\.1:\d+': wrong cluster key")


def test_requests_before_auth_close_the_connection(sec_cluster):
    node = sec_cluster.storage_nodes[0]
    cl = node.client(hello=False)
    f = cl.call(sw.OP_HELLO, sw.hello_body(kind=sw.CRED_KEY))
    assert f.status == 0
    cl.send(sw.Frame(opcode=sw.OP_PING, req_id=cl.new_id()))
    with pytest.raises((sw.WireError, OSError)):
        cl.recv(5)
    wait_log(node, "request before AUTH")


def test_a_replayed_exchange_is_refused(sec_cluster):
    """The proof of one exchange is worthless in the next: the server's
    nonce differs."""
    node = sec_cluster.storage_nodes[0]
    key = sec_cluster.key
    first = node.client(hello=False)
    nc = os.urandom(16)
    f = first.call(sw.OP_HELLO, sw.hello_body(kind=sw.CRED_KEY, nonce=nc))
    good = sw.proof(key, b"strata-client", nc, f.body[12:28])
    assert first.call(sw.OP_AUTH, good).status == 0
    first.ping()
    again = node.client(hello=False)
    f2 = again.call(sw.OP_HELLO, sw.hello_body(kind=sw.CRED_KEY, nonce=nc))
    assert f2.body[12:28] != f.body[12:28]
    assert again.call(sw.OP_AUTH, good).status == EKEYREJECTED


def test_a_fake_storage_node_cannot_register(sec_cluster, tmp_path):
    """A client token, even an admin one, is not a daemon: REGISTER is for
    daemons only. Without the key no HELLO gets through at all."""
    tok = make_token(sec_cluster, tmp_path, "t", "--tenant", "t1", "--uid", "1000",
                     "--path", "rw:/t1", "--expires", "1h")
    for text in (tok.read_text(), (sec_cluster.dir / "admin.token").read_text()):
        cl = sec_cluster.mgmt_node.client(key=None, token=text)
        f = cl.call(OP_MGMT_REGISTER, struct.pack("<IIQ", 77, 0, 1))
        assert f.status == EACCES, f
        cl.close()
    wait_log(sec_cluster.mgmt_node, r"refused op 16 from .*daemons only")
    r = strata("status", "--dir", sec_cluster.dir)
    assert "77" not in [l.split()[0] for l in r.stdout.splitlines() if l.split()], r.stdout


def test_admin_operations_need_an_admin_token(sec_cluster, tmp_path):
    tok = make_token(sec_cluster, tmp_path, "user", "--tenant", "t1", "--uid", "1000",
                     "--path", "rw:/t1", "--expires", "1h")
    r = strata("node", "drain", "2", "--mgmt", mgmt_of(sec_cluster), "--token", tok)
    assert r.returncode == 1 and "ermission denied" in r.stderr, r.stdout + r.stderr


def test_a_token_of_another_cluster_is_refused(sec_cluster, tmp_path):
    other = tmp_path / "other.key"
    assert strata("keygen", other).returncode == 0
    tok = tmp_path / "foreign"
    r = strata("token", "create", "--key", other, "--out", tok, "--admin", "--path", "rw:/",
               "--expires", "1h")
    assert r.returncode == 0, r.stderr
    r = strata("ls", "--mgmt", mgmt_of(sec_cluster), "--token", tok, "/")
    assert r.returncode == 1
    assert "credential rejected" in r.stderr, r.stderr
    # A claims part edited by hand keeps its old signature: refused too.
    text = (sec_cluster.dir / "admin.token").read_text().strip()
    signed, sig = text.rsplit(".", 1)
    claims = sw.token_claims(text)
    claims["tenant"] = "evil"
    import base64
    import json
    forged = "st1." + base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(sw.WireError) as e:
        sec_cluster.mgmt_node.client(key=None, token=forged + "." + sig)
    assert "did not prove" in str(e.value) or e.value.status == EKEYREJECTED


def test_an_expired_token_is_refused(sec_cluster, tmp_path):
    tok = make_token(sec_cluster, tmp_path, "short", "--admin", "--path", "rw:/",
                     "--expires", "2s")
    r = strata("ls", "--mgmt", mgmt_of(sec_cluster), "--token", tok, "/")
    assert r.returncode == 0, r.stderr
    time.sleep(3)
    r = strata("ls", "--mgmt", mgmt_of(sec_cluster), "--token", tok, "/")
    assert r.returncode == 1 and "token has expired" in r.stderr, r.stderr


def test_an_open_connection_stops_when_its_token_expires(sec_cluster, tmp_path):
    tok = make_token(sec_cluster, tmp_path, "brief", "--admin", "--path", "rw:/",
                     "--expires", "2s")
    cl = sec_cluster.mgmt_node.client(key=None, token=tok.read_text())
    cl.ping()
    time.sleep(3)
    f = cl.call(sw.OP_PING)
    assert f.status == EKEYEXPIRED


def test_token_files_and_keys_must_be_private(sec_cluster, tmp_path):
    tok = make_token(sec_cluster, tmp_path, "open", "--path", "r:/", "--expires", "1h")
    os.chmod(tok, 0o644)
    r = strata("ls", "--mgmt", mgmt_of(sec_cluster), "--token", tok, "/")
    assert r.returncode == 1 and "chmod 600" in r.stderr, r.stderr
    key = tmp_path / "k"
    assert strata("keygen", key).returncode == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    r = strata("keygen", key)
    assert r.returncode == 1 and "never overwritten" in r.stderr
    os.chmod(key, 0o640)
    r = run([str(STRATA).replace("cli/strata", "stratad/stratad"), "--node.key_file=%s" % key,
             "--node.listen=127.0.0.1:0", "--node.data=%s" % (tmp_path / "d")], timeout=30)
    assert r.returncode != 0 and "chmod 600" in r.stderr + r.stdout, r.stderr


@pytest.mark.parametrize("args, word", [
    (["--path", "rw:relative", "--expires", "1h"], "absolute"),
    (["--path", "x:/a", "--expires", "1h"], "r:PREFIX"),
    (["--path", "rw:/a/../b", "--expires", "1h"], "normalized"),
    (["--tenant", "bad tenant", "--expires", "1h"], "tenant"),
    (["--uid", "-1", "--expires", "1h"], "--uid"),
    (["--mem", "ns", "--expires", "1h"], "NAMESPACE:SIZE"),
    (["--expires", "soon"], "duration"),
    ([], "expires"),
])
def test_token_create_rejects_bad_claims(sec_cluster, tmp_path, args, word):
    r = strata("token", "create", "--key", sec_cluster.dir / "cluster.key", *args)
    assert r.returncode == 2 and word in r.stderr, r.stderr


def test_listening_beyond_loopback_needs_a_key(tmp_path):
    daemon = str(STRATA).replace("cli/strata", "stratad/stratad")
    r = run([daemon, "--node.listen=0.0.0.0:0", "--node.data=%s" % (tmp_path / "d")],
            timeout=30)
    assert r.returncode != 0
    assert "without a cluster key" in r.stderr + r.stdout, r.stderr


def test_mem_keys_stay_in_their_namespace(sec_cluster, daemon_factory, tmp_path):
    """A mem node with the cluster key: a token scoped to mem namespace t1
    puts and gets "t1/..." keys but not "t2/...", nor lists t2; an admin
    token reaches every namespace."""
    mem = daemon_factory(node_id=30, extra_flags=[
        "--node.services=mem", "--node.threads=1", "--mem.capacity=16M",
        "--node.key_file=%s" % (sec_cluster.dir / "cluster.key"),
        "--mgmt.address=%s" % sec_cluster.mgmt_node.addr])
    tok = make_token(sec_cluster, tmp_path, "m1", "--tenant", "t1", "--mem", "t1:1M",
                     "--expires", "1h")
    OP_PUT, OP_GET, OP_LIST = 96, 97, 101

    def put(cl, key, value):
        return cl.call(OP_PUT, struct.pack("<II", 0, len(key)) + key, bulk=value).status

    def get(cl, key):
        f = cl.call(OP_GET, struct.pack("<QI", 1 << 20, len(key)) + key)
        return f.status, f.bulk

    cl = sw.Client(mem.addr, token=tok.read_text())
    assert put(cl, b"t1/a", b"x" * 100) == 0
    assert get(cl, b"t1/a") == (0, b"x" * 100)
    assert put(cl, b"t2/a", b"y") == EACCES
    assert put(cl, b"t1", b"y") == EACCES          # no namespace at all
    assert cl.call(OP_LIST, struct.pack("<II", 10, 3) + b"t2/").status == EACCES
    assert cl.call(OP_LIST, struct.pack("<II", 10, 3) + b"t1/").status == 0
    admin = sw.Client(mem.addr, token=(sec_cluster.dir / "admin.token").read_text())
    assert put(admin, b"t2/a", b"z") == 0
    assert get(cl, b"t2/a")[0] == EACCES
    assert get(admin, b"t1/a") == (0, b"x" * 100)


def test_mem_capacity_is_enforced_exactly(sec_cluster, daemon_factory, tmp_path):
    """A token's mem scope "t1:SIZE" caps what namespace t1 holds on a mem
    node: puts fit up to the byte and the next one gets EDQUOT, losing
    nothing; a removal makes room; another tenant's namespace and an
    admin token are not charged against it. status and /metrics show the
    charge."""
    mem = daemon_factory(node_id=31, extra_flags=[
        "--node.services=mem", "--node.threads=1", "--mem.capacity=64M",
        "--node.key_file=%s" % (sec_cluster.dir / "cluster.key"),
        "--mgmt.address=%s" % sec_cluster.mgmt_node.addr])
    OP_PUT, OP_REMOVE = 96, 98
    cap = 1 << 20

    def put(cl, key, n=10000):
        return cl.call(OP_PUT, struct.pack("<II", 0, len(key)) + key, bulk=b"v" * n).status

    def used(ns):
        return int(mem.metrics().get('strata_mem_ns_used_bytes{ns="%s"}' % ns, 0))

    t1 = sw.Client(mem.addr, token=make_token(sec_cluster, tmp_path, "q1", "--tenant", "t1",
                                              "--mem", "t1:%d" % cap, "--expires", "1h").read_text())
    t2 = sw.Client(mem.addr, token=make_token(sec_cluster, tmp_path, "q2", "--tenant", "t2",
                                              "--mem", "t2:%d" % cap, "--expires", "1h").read_text())
    admin = sw.Client(mem.addr, token=(sec_cluster.dir / "admin.token").read_text())
    assert put(t1, b"t1/k00000") == 0
    each = used("t1")            # one object's charge, as the pool counts it
    assert 10000 < each < 20000
    fit = cap // each
    for i in range(1, fit):
        assert put(t1, b"t1/k%05d" % i) == 0, i
    assert used("t1") == fit * each <= cap
    assert put(t1, b"t1/k%05d" % fit) == EDQUOT
    assert put(t1, b"t1/k00000", n=cap) == EDQUOT       # a larger replacement
    assert used("t1") == fit * each                      # nothing lost or added
    assert put(t2, b"t2/k00000") == 0                    # another tenant: its own cap
    assert put(admin, b"t1/admin0") == 0              # admin: no quota, but charged
    assert used("t1") == (fit + 1) * each
    assert cl_remove(admin, OP_REMOVE, b"t1/admin0") == 0
    assert cl_remove(t1, OP_REMOVE, b"t1/k00001") == 0
    assert put(t1, b"t1/k%05d" % fit) == 0
    assert put(t1, b"t1/again0") == EDQUOT
    m = mem.metrics()
    assert m["strata_mem_over_quota_total"] == 3
    assert m['strata_mem_ns_objects{ns="t1"}'] == fit
    assert m['strata_mem_ns_used_bytes{ns="t2"}'] == each


def test_a_request_acts_for_its_caller_only_with_a_caller_token(sec_cluster, tmp_path):
    """FRAME_F_CALLER over the wire to meta: a token with "caller" may name
    the user it acts for; one without is refused (EACCES) and the daemon
    says why; a malformed caller (short, too many groups) is EBADMSG; the
    connection stays usable after each refusal."""
    OP_META_STATFS, EBADMSG = 80, -4103
    meta = next(n for n in sec_cluster.nodes if "meta" in n.services.split(","))
    yes = sw.Client(meta.addr, token=make_token(sec_cluster, tmp_path, "c1", "--tenant", "t1",
                                                "--caller", "--path", "r:/",
                                                "--expires", "1h").read_text())
    no = sw.Client(meta.addr, token=make_token(sec_cluster, tmp_path, "c2", "--tenant", "t1",
                                               "--path", "r:/", "--expires", "1h").read_text())
    who = sw.caller_block(1000, [1000, 27])
    assert yes.call(OP_META_STATFS, who, flags=sw.F_CALLER).status == 0
    assert no.call(OP_META_STATFS, who, flags=sw.F_CALLER).status == EACCES
    assert no.call(OP_META_STATFS).status == 0
    wait_log(meta, r'it acts for uid 1000, and the token has no "caller"')
    assert yes.call(OP_META_STATFS, who[:6], flags=sw.F_CALLER).status == EBADMSG
    many = struct.pack("<II", 1000, 33) + b"\0" * 4 * 33
    assert yes.call(OP_META_STATFS, many, flags=sw.F_CALLER).status == EBADMSG
    assert yes.call(OP_META_STATFS, who + b"x", flags=sw.F_CALLER).status == EBADMSG
    assert yes.call(OP_META_STATFS).status == 0


def cl_remove(cl, op, key):
    return cl.call(op, struct.pack("<I", len(key)) + key).status
