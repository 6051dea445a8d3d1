"""The composer (issue 16, docs/composer.md): a cluster of 'strata local
up' with one storage node, two mem nodes and three compute nodes that
declare 4 GPUs each; compositions through the Redfish-style HTTP API (as
any client would, with urllib) and through 'strata compose'.

Covered: the shape of every resource, authentication, bad requests
(400 with a message), compose and release with the credential reaching
the volume and the namespace and nothing else (and refused after
release), the volume's quota, all or nothing when one part does not fit,
200 concurrent requests from 8 clients audited against the inventory,
TTL expiry, mgmt (and the composer) killed and restarted mid-flight, and
a compute node killed with kill -9 marking its compositions Degraded.
"""
import json
import os
import re
import random
import signal
import struct
import threading
import time
import urllib.error
import urllib.request

import pytest

import strata_wire as sw
from conftest import (fetch_metrics_text, parse_metrics, restart_control_node, signed_token,
                      wait_until)
from conftest import strata_nocred as strata

EACCES = -13
EDQUOT = -122
OP_MEM_PUT = 96
GPUS_PER_NODE = 4
COMPUTE = 3
MEM_NODES = 2
MEM_CAP = 64 << 20
# Bounds only keep a broken build from hanging; nothing is timed.
BOUND_S = 60
RF = "/redfish/v1"


@pytest.fixture(scope="module")
def cc(module_cluster):
    return module_cluster(1, daemon_flags="--mem.capacity=64M --composer.meter_interval=1s",
                          timeout=120,
                          local_args=["--mem", str(MEM_NODES), "--compute", str(COMPUTE),
                                      "--gpus-per-node", str(GPUS_PER_NODE)])


def composer_addr(c):
    return json.loads((c.dir / "cluster.json").read_text())["composer"]


def admin(c):
    return (c.dir / "admin.token").read_text().strip()


def http(c, method, path, body=None, token=True, raw=None, headers=None):
    """(status, JSON body) of a request to the composer."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    rq = urllib.request.Request("http://%s%s" % (composer_addr(c), path), data=data,
                                method=method, headers=headers or {})
    if token:
        rq.add_header("Authorization", "Bearer " + (admin(c) if token is True else token))
    if data is not None:
        rq.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(rq, timeout=BOUND_S) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")



def _answers(c):
    try:
        return http(c, "GET", RF, token=False)[0] == 200
    except OSError:
        return False


def inventory(c):
    code, svc = http(c, "GET", RF + "/CompositionService")
    assert code == 200, svc
    return svc["Oem"]["Strata"]["Inventory"]


def systems(c):
    code, coll = http(c, "GET", RF + "/Systems")
    assert code == 200, coll
    return coll["Oem"]["Strata"]["Systems"]


def compose(c, **rq):
    return http(c, "POST", RF + "/Systems", rq)


def release(c, sid):
    code, s = http(c, "DELETE", RF + "/Systems/" + sid)
    assert code == 200, s
    assert s["Oem"]["Strata"]["State"] == "Released", s
    return s


def error_of(body):
    """The message, checked to be in Redfish's error shape."""
    e = body["error"]
    info = e["@Message.ExtendedInfo"]
    assert info and info[0]["MessageId"] == e["code"] and info[0]["Message"] == e["message"]
    assert info[0]["@odata.type"].startswith("#Message.")
    return e["message"]


def audit(c, quiet=True):
    """Every GPU held by at most one composition that holds resources
    (one snapshot: the Systems collection is read in one step of the
    composer), and, when nothing changes meanwhile (quiet), the
    inventory's counts the compositions' sums."""
    inv = inventory(c)
    held = {}
    storage = memory = 0
    for s in systems(c):
        o = s["Oem"]["Strata"]
        if o["State"] not in ("Allocating", "Composed", "Degraded", "Decomposing"):
            continue
        for g in o["Gpus"]:
            key = (g["Node"], g["Index"])
            assert key not in held, "GPU %s held by %s and %s" % (key, held[key], s["Id"])
            held[key] = s["Id"]
        storage += (o["Volume"] or {}).get("Size", 0)
        memory += (o["Memory"] or {}).get("Size", 0)
    if not quiet:
        return inv, held
    g = inv["Gpus"]
    assert g["Composed"] + g["Free"] + g["Failed"] + g["Unavailable"] == g["Total"], g
    up_held = [k for k in held if any(n["Node"] == k[0] and n["Up"] for n in inv["ComputeNodes"])]
    assert g["Composed"] == len(up_held), (g, held)
    assert inv["Storage"]["Used"] == storage
    assert inv["Memory"]["Used"] == memory
    return inv, held


def test_service_root_and_inventory(cc):
    code, root = http(cc, "GET", RF, token=False)
    assert code == 200
    assert root["@odata.id"] == RF and root["RedfishVersion"]
    assert root["CompositionService"]["@odata.id"] == RF + "/CompositionService"
    assert root["Systems"]["@odata.id"] == RF + "/Systems"
    inv = inventory(cc)
    total = COMPUTE * GPUS_PER_NODE
    assert inv["Gpus"]["Total"] == total and inv["Gpus"]["Free"] == total, inv
    assert inv["Gpus"]["Models"] == {"H100-80GB": {"Total": total, "Free": total}}
    assert len(inv["ComputeNodes"]) == COMPUTE and all(n["Up"] for n in inv["ComputeNodes"])
    assert all(n["Gpus"] == GPUS_PER_NODE and n["HostMemory"] > 0 for n in inv["ComputeNodes"])
    # The NICs: the compute daemons run here, so theirs are this host's
    # (/sys/class/net but loopback), with the link speed the driver says.
    want = {}
    for name in os.listdir("/sys/class/net"):
        if name == "lo":
            continue
        try:
            speed = max(0, int(open("/sys/class/net/%s/speed" % name).read()))
        except (OSError, ValueError):
            speed = 0
        want[name] = speed
    for n in inv["ComputeNodes"]:
        got = {x["Name"]: x["SpeedMbps"] for x in n["Nics"]}
        assert set(got) <= set(want) | {k for k in got if k.startswith(("veth", "sf"))}, n
        assert all(got[k] == want[k] for k in got if k in want), (got, want)
        assert all(x["State"] for x in n["Nics"]), n
        assert {k for k in want if not k.startswith(("veth", "sf"))} <= set(got), (got, want)
    assert inv["Memory"] == {"Total": MEM_NODES * MEM_CAP, "Used": 0, "Free": MEM_NODES * MEM_CAP,
                             "Nodes": MEM_NODES}
    assert inv["Storage"]["Total"] > 0 and inv["Storage"]["Used"] == 0
    code, blocks = http(cc, "GET", RF + "/CompositionService/ResourceBlocks")
    assert code == 200 and blocks["Members@odata.count"] == total + 2
    node = inv["ComputeNodes"][0]["Node"]
    code, b = http(cc, "GET", RF + "/CompositionService/ResourceBlocks/gpu-%d-3" % node)
    assert code == 200, b
    assert b["ResourceBlockType"] == ["Processor"]
    assert b["CompositionStatus"]["CompositionState"] == "Unused"
    assert b["Oem"]["Strata"]["Model"] == "H100-80GB" and b["Oem"]["Strata"]["State"] == "free"
    code, b = http(cc, "GET", RF + "/CompositionService/ResourceBlocks/memory")
    assert code == 200 and b["Oem"]["Strata"]["Total"] == MEM_NODES * MEM_CAP
    # The compute nodes report the same in their STATUS.
    st = cc.node(inv["ComputeNodes"][0]["Node"]).client().status()
    svc = next(s for s in st["services"] if s["name"] == "compute")
    assert [g["state"] for g in svc["gpus"]] == ["free"] * GPUS_PER_NODE
    r = strata("compose", "inventory", "--dir", cc.dir)
    assert r.returncode == 0, r.stderr
    assert "%d total, %d free" % (total, total) in r.stdout, r.stdout


def test_every_resource_but_the_root_needs_an_admin_token(cc, tmp_path):
    for path in ("/CompositionService", "/Systems", "/CompositionService/ResourceBlocks"):
        code, body = http(cc, "GET", RF + path, token=False)
        assert code == 401 and "no credential" in error_of(body)
    code, body = http(cc, "GET", RF + "/Systems", token="st1.bogus.token")
    assert code == 401 and "refused" in error_of(body)
    tenant = signed_token(cc.dir, tmp_path / "t.token", "--tenant", "t1", "--path", "rw:/t1",
                          "--expires", "1h")
    code, body = http(cc, "POST", RF + "/Systems", {"Gpus": {"Count": 1}},
                      token=tenant.read_text().strip())
    assert code == 403 and "not an admin token" in error_of(body)
    assert inventory(cc)["Gpus"]["Composed"] == 0


@pytest.mark.parametrize("raw,says", [
    (b"{nope", "the body is not JSON"),
    (b"[1]", "must be a JSON object"),
    (b"{}", "at least one of"),
    (b'{"Gpus": {"Count": 1}, "Colour": "red"}', "'Colour' is not a property"),
    (b'{"Gpus": {"Count": -1}}', "'Gpus.Count' must be an integer in 0..64"),
    (b'{"Gpus": {"Count": "2"}}', "'Gpus.Count' must be an integer"),
    (b'{"Gpus": {"Count": 65}}', "'Gpus.Count' must be an integer in 0..64"),
    (b'{"Gpus": 2}', "'Gpus' must be an object"),
    (b'{"Gpus": {"Count": 1, "Model": "H 100"}}', "'Gpus.Model' must be a model name"),
    (b'{"Gpus": {"Count": 1, "Rack": "a"}}', "'Gpus.Rack' is not a property"),
    (b'{"Gpus": {"Model": "H100-80GB"}}', "without 'Gpus.Count'"),
    (b'{"Gpus": {"Count": 1, "SameNode": 1}}', "'Gpus.SameNode' must be true or false"),
    (b'{"Storage": {"Size": "1Q"}}', "'Storage.Size' must be a positive number of bytes"),
    (b'{"Storage": {"Size": 0}}', "'Storage.Size' must be a positive"),
    (b'{"Storage": {"Size": -5}}', "'Storage.Size' must be a positive"),
    (b'{"Storage": "1G"}', "'Storage' must be an object"),
    (b'{"Memory": {"Size": "256M", "Speed": 1}}', "'Memory.Speed' is not a property"),
    (b'{"Memory": {"Size": 2000000000000000000}}', "more than 1 EiB"),
    (b'{"Memory": {"Size": "1M"}, "TtlSeconds": -1}', "'TtlSeconds' must be an integer"),
    (b'{"Memory": {"Size": "1M"}, "Tenant": "a b"}', "'Tenant' must be 1..63"),
    (b'{"Memory": {"Size": "1M"}, "Retain": "yes"}', "'Retain' must be true or false"),
    (b'{"Memory": {"Size": "1M"}, "Name": ""}', "'Name' must be 1..63"),
    (b'{"Memory": {"Size": "1M"}, "Owner": 1000}', "'Owner' must be an object"),
    (b'{"Memory": {"Size": "1M"}, "Owner": {"Uid": 0}}', "not root"),
    (b'{"Memory": {"Size": "1M"}, "Owner": {"Uid": 70000}}', "'Owner.Uid' must be a uid"),
    (b'{"Memory": {"Size": "1M"}, "Owner": {"Uid": 5, "Gid": -1}}', "'Owner.Gid' a gid"),
    (b'{"Memory": {"Size": "1M"}, "Owner": {"Uid": 5, "Home": "/"}}',
     "'Owner.Home' is not a property"),
    (b'{"Gpus": {"Ids": []}}', "'Gpus.Ids' must be an array of 1..64"),
    (b'{"Gpus": {"Ids": ["gpu-1"]}}', "'Gpus.Ids[0]' must be a GPU's ResourceBlock id"),
    (b'{"Gpus": {"Ids": ["gpu-1-0x"]}}', "'Gpus.Ids[0]' must be"),
    (b'{"Gpus": {"Ids": ["gpu--1-0"]}}', "'Gpus.Ids[0]' must be"),
    (b'{"Gpus": {"Ids": ["gpu-1-0", "gpu-1-0"]}}', "'Gpus.Ids' names gpu-1-0 twice"),
    (b'{"Gpus": {"Ids": ["gpu-1-0"], "Count": 2}}', "'Gpus.Ids' names the GPUs"),
    (b'{"Gpus": {"Ids": ["gpu-1-0"], "SameNode": true}}', "'Gpus.Ids' names the GPUs"),
    (b'{"Memory": {"Size": "1M"}, "Paths": "/d"}', "'Paths' must be an array"),
    (b'{"Memory": {"Size": "1M"}, "Paths": [{"Path": "/d", "Access": "x"}]}',
     "'Paths[0]' needs 'Path'"),
    (b'{"Memory": {"Size": "1M"}, "Paths": [{"Path": "/d"}, {"Path": "d", "Access": "r"}]}',
     "'Paths[0]' needs"),
    (b'{"Memory": {"Size": "1M"}, "Paths": [{"Path": "/d", "Access": "r"}, '
     b'{"Path": "/a/../b", "Access": "r"}]}', "'Paths[1]' needs 'Path' (an absolute, normalized"),
    (b'{"Memory": {"Size": "1M"}, "Paths": [{"Path": "/d", "Access": "r", "Mode": 1}]}',
     "'Paths[0].Mode' is not a property"),
    (b'{"Memory": {"Size": "1M"}, "Paths": [' + b','.join(
        [b'{"Path": "/d", "Access": "r"}'] * 9) + b']}', "at most 8"),
])
def test_bad_requests_get_400_with_the_reason(cc, raw, says):
    code, body = http(cc, "POST", RF + "/Systems", raw=raw)
    assert code == 400, body
    assert says in error_of(body), body


def test_unknown_resources_and_methods(cc):
    code, body = http(cc, "GET", RF + "/Systems/comp-999999")
    assert code == 404 and "no composition 'comp-999999'" in error_of(body)
    code, body = http(cc, "DELETE", RF + "/Systems/comp-999999")
    assert code == 404
    code, body = http(cc, "GET", RF + "/Chassis")
    assert code == 404 and "no resource at" in error_of(body)
    code, body = http(cc, "PUT", RF + "/Systems", {"x": 1})
    assert code == 405 and "PUT is not allowed" in error_of(body)
    code, body = http(cc, "GET", RF + "/CompositionService/ResourceBlocks/gpu-99-0")
    assert code == 404
    r = strata("compose", "create", "--dir", cc.dir, "--gpus", "lots")
    assert r.returncode == 2 and "--gpus: 'lots' is not a number" in r.stderr, r.stderr
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "1X")
    assert r.returncode == 2 and "is not a size" in r.stderr, r.stderr
    r = strata("compose", "show", "--dir", cc.dir, "a b")
    assert r.returncode == 2 and "is not a composition ID" in r.stderr, r.stderr


def mem_put(addr, token, key, n):
    cl = sw.Client(addr, token=token)
    try:
        return cl.call(OP_MEM_PUT, struct.pack("<II", 0, len(key)) + key, bulk=b"v" * n).status
    finally:
        cl.close()


def test_compose_attach_and_release(cc, tmp_path):
    """Through the CLI: 2 GPUs on one node, a 1 MiB volume, 8 MiB of pooled
    memory. The credential reaches its volume (within the quota) and its
    namespace, nothing else, and is refused once the composition is
    released; the volume is then gone and the GPUs free."""
    cred = tmp_path / "job.token"
    r = strata("compose", "create", "--dir", cc.dir, "--gpus", "2", "--same-node",
               "--storage", "1M", "--memory", "8M", "--tenant", "t1", "--name", "job1",
               "--token-out", cred, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    o = s["Oem"]["Strata"]
    sid = s["Id"]
    assert s["SystemType"] == "Composed" and s["Name"] == "job1"
    assert o["State"] == "Composed" and o["Tenant"] == "t1" and "Credential" not in o
    assert len(o["Gpus"]) == 2 and o["Gpus"][0]["Node"] == o["Gpus"][1]["Node"]
    node = str(o["Gpus"][0]["Node"])
    assert o["CudaVisibleDevices"] == {node: "%d,%d" % (o["Gpus"][0]["Index"],
                                                        o["Gpus"][1]["Index"])}
    assert o["Volume"] == {"Path": "/volumes/" + sid, "Size": 1 << 20}
    assert o["Memory"]["Namespace"] == sid and o["Memory"]["Size"] == 8 << 20
    assert o["Memory"]["PerNodeCapacity"] == 4 << 20 and len(o["Memory"]["Addresses"]) == 2
    assert len(s["Links"]["ResourceBlocks"]) == 4
    code, b = http(cc, "GET", RF + "/CompositionService/ResourceBlocks/gpu-%s-%d"
                   % (node, o["Gpus"][0]["Index"]))
    assert b["CompositionStatus"]["CompositionState"] == "Composed"
    assert b["Oem"]["Strata"]["Composition"] == sid
    audit(cc)
    tok = cred.read_text().strip()
    claims = sw.token_claims(tok)
    assert claims["id"] == o["CredentialId"] and claims.get("admin") is not True
    mgmt = o["Addresses"]["Mgmt"]

    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(os.urandom(100000))
    big.write_bytes(os.urandom(2 << 20))
    vol = o["Volume"]["Path"]
    r = strata("put", "--mgmt", mgmt, "--token", cred, small, vol + "/small")
    assert r.returncode == 0, r.stderr
    r = strata("put", "--mgmt", mgmt, "--token", cred, big, vol + "/big")
    assert r.returncode == 1 and "Disk quota exceeded" in r.stderr, r.stderr   # the quota
    r = strata("cat", "--mgmt", mgmt, "--token", cred, vol + "/small")
    assert r.returncode == 0
    r = strata("put", "--mgmt", mgmt, "--token", cred, small, "/escaped")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
    r = strata("ls", "--mgmt", mgmt, "--token", cred, "/volumes")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
    # Its namespace, up to the capacity on each mem node; nothing else.
    mem = o["Memory"]["Addresses"][0]
    assert mem_put(mem, tok, sid.encode() + b"/k1", 100000) == 0
    assert mem_put(mem, tok, sid.encode() + b"/k2", 5 << 20) == EDQUOT
    assert mem_put(mem, tok, b"other/k1", 10) == EACCES

    r = strata("compose", "list", "--dir", cc.dir)
    assert r.returncode == 0 and sid in r.stdout and "Composed" in r.stdout, r.stdout
    r = strata("compose", "delete", sid, "--dir", cc.dir)
    assert r.returncode == 0 and "Released" in r.stdout, r.stderr
    code, s = http(cc, "GET", RF + "/Systems/" + sid)
    assert code == 200 and s["Oem"]["Strata"]["State"] == "Released"
    assert s["Status"]["State"] == "Absent"

    def refused():
        r = strata("ls", "--mgmt", mgmt, "--token", cred, vol)
        return r.returncode == 1 and "revoked" in r.stderr
    wait_until(refused, BOUND_S, 0.2, "the released credential to be refused")
    r = strata("ls", "--dir", cc.dir, "/volumes")
    assert r.returncode == 0 and sid not in r.stdout.split(), r.stdout
    assert inventory(cc)["Gpus"]["Composed"] == 0
    code, body = http(cc, "DELETE", RF + "/Systems/" + sid)
    assert code == 409 and "already Released" in error_of(body)
    audit(cc)


def test_owner_gets_the_volume_and_the_credential(cc, tmp_path):
    """Owner {Uid, Gid}: the volume is the owner's (0700) and the
    credential acts as the owner, so what the job writes is theirs; without
    it, both are nobody's (65534)."""
    cred = tmp_path / "owned.token"
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "1M", "--owner", "1234:4321",
               "--token-out", cred, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    o = s["Oem"]["Strata"]
    assert o["Owner"] == {"Uid": 1234, "Gid": 4321}
    claims = sw.token_claims(cred.read_text().strip())
    assert claims["uid"] == 1234 and claims["gids"] == [4321], claims
    mgmt, vol = o["Addresses"]["Mgmt"], o["Volume"]["Path"]
    r = strata("stat", "--dir", cc.dir, vol)
    assert r.returncode == 0 and re.search(r"Uid: 1234\b", r.stdout) and \
        re.search(r"Gid: 4321\b", r.stdout) and "0700" in r.stdout, r.stdout
    f = tmp_path / "f"
    f.write_bytes(b"mine")
    r = strata("put", "--mgmt", mgmt, "--token", cred, f, vol + "/f")
    assert r.returncode == 0, r.stderr
    r = strata("stat", "--dir", cc.dir, vol + "/f")
    assert r.returncode == 0 and re.search(r"Uid: 1234\b", r.stdout), r.stdout
    assert strata("compose", "delete", s["Id"], "--dir", cc.dir).returncode == 0
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "1M", "--owner", "0")
    assert r.returncode == 2 and "not root" in r.stderr, r.stderr
    r = strata("compose", "create", "--dir", cc.dir, "--memory", "1M", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["Oem"]["Strata"]["Owner"] == {"Uid": 65534, "Gid": 65534}
    assert strata("compose", "delete", s["Id"], "--dir", cc.dir).returncode == 0
    audit(cc)


def test_usage_counts_the_bytes_a_tenant_moved(cc, tmp_path):
    """Bytes moved: what a composition's credential wrote to and read from
    the storage daemons shows in its tenant's usage (sampled every
    composer.meter_interval, 1 s here), and in 'compose usage'."""
    cred = tmp_path / "bytes.token"
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "8M", "--tenant", "mover",
               "--token-out", cred, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    o = s["Oem"]["Strata"]
    mgmt, vol = o["Addresses"]["Mgmt"], o["Volume"]["Path"]
    f = tmp_path / "f"
    f.write_bytes(os.urandom(1 << 20))
    r = strata("put", "--mgmt", mgmt, "--token", cred, f, vol + "/f")
    assert r.returncode == 0, r.stderr
    r = strata("get", "--mgmt", mgmt, "--token", cred, vol + "/f", tmp_path / "back")
    assert r.returncode == 0, r.stderr

    def moved():
        code, u = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage")
        row = [t for t in u["Tenants"] if t["Tenant"] == "mover"]
        return row and row[0]["BytesWritten"] >= 1 << 20 and row[0]["BytesRead"] >= 1 << 20 \
            and row[0]
    row = wait_until(moved, BOUND_S, 0.3, "the bytes moved to show in the usage")
    assert row["BytesMoved"] == row["BytesRead"] + row["BytesWritten"]
    assert row["BytesWritten"] < 2 << 20, row     # one put of 1 MiB, R=1
    r = strata("compose", "usage", "--dir", cc.dir)
    assert r.returncode == 0 and re.search(r"^mover\s.*\s1(\.0)? MiB\s+1(\.0)? MiB$", r.stdout,
                                           re.M), r.stdout
    assert strata("compose", "delete", s["Id"], "--dir", cc.dir).returncode == 0
    audit(cc)


def test_paths_reach_beyond_the_volume_as_the_owner(cc, tmp_path):
    """Paths: the credential also reaches a dataset to read and a place to
    write results, still as the owner, so the namespace's permissions
    decide: a dataset the owner may not read stays closed; paths outside
    those given stay out of reach."""
    f = tmp_path / "f"
    f.write_bytes(b"sample")
    for cmd in (("mkdir", "-p", "/pathsds/open", "/pathsds/closed", "/pathsout/u1234"),
                ("put", f, "/pathsds/open/a"), ("put", f, "/pathsds/closed/a"),
                ("chmod", "755", "/pathsds/open"), ("chmod", "644", "/pathsds/open/a"),
                ("chmod", "700", "/pathsds/closed"), ("chown", "1234:1234", "/pathsout/u1234")):
        r = strata(*cmd[:1], "--dir", cc.dir, *cmd[1:])
        assert r.returncode == 0, (cmd, r.stderr)
    cred = tmp_path / "paths.token"
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "1M", "--owner", "1234",
               "--path", "r:/pathsds", "--path", "rw:/pathsout/u1234", "--token-out", cred,
               "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    o = s["Oem"]["Strata"]
    assert o["Paths"] == [{"Path": "/pathsds", "Access": "r"},
                          {"Path": "/pathsout/u1234", "Access": "rw"}], o
    claims = sw.token_claims(cred.read_text().strip())
    assert {"prefix": "/pathsds", "access": "r"} in claims["paths"], claims
    mgmt = o["Addresses"]["Mgmt"]
    r = strata("cat", "--mgmt", mgmt, "--token", cred, "/pathsds/open/a")
    assert r.returncode == 0 and r.stdout == "sample", r.stderr
    r = strata("cat", "--mgmt", mgmt, "--token", cred, "/pathsds/closed/a")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
    r = strata("put", "--mgmt", mgmt, "--token", cred, f, "/pathsds/open/b")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr   # r only
    r = strata("put", "--mgmt", mgmt, "--token", cred, f, "/pathsout/u1234/res")
    assert r.returncode == 0, r.stderr
    r = strata("put", "--mgmt", mgmt, "--token", cred, f, "/pathsout/other")
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
    r = strata("compose", "show", s["Id"], "--dir", cc.dir)
    assert r.returncode == 0 and "path     /pathsds (r)" in r.stdout, r.stdout
    assert strata("compose", "delete", s["Id"], "--dir", cc.dir).returncode == 0
    r = strata("compose", "create", "--dir", cc.dir, "--memory", "1M", "--path", "x:/d")
    assert r.returncode == 2 and "--path: 'x:/d' is not r:PATH or rw:PATH" in r.stderr, r.stderr
    audit(cc)


def test_named_gpus(cc):
    """Gpus.Ids: exactly the GPUs named (a scheduler's choice); one held
    already, or not in the inventory, is refused with its name."""
    free = [b for b in http(cc, "GET", RF + "/CompositionService/ResourceBlocks")[1]["Members"]
            if b["@odata.id"].rsplit("/", 1)[1].startswith("gpu-")]
    ids = [b["@odata.id"].rsplit("/", 1)[1] for b in free]
    inv_free = [i for i in ids if http(cc, "GET", RF + "/CompositionService/ResourceBlocks/" + i)[1]
                ["CompositionStatus"]["CompositionState"] == "Unused"]
    assert len(inv_free) >= 2, ids
    want = [inv_free[-1], inv_free[0]]
    r = strata("compose", "create", "--dir", cc.dir, "--gpu-ids", ",".join(want), "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    got = ["gpu-%d-%d" % (g["Node"], g["Index"]) for g in s["Oem"]["Strata"]["Gpus"]]
    assert sorted(got) == sorted(want), (got, want)
    r = strata("compose", "create", "--dir", cc.dir, "--gpu-ids", want[0])
    assert r.returncode == 1 and "%s is composed already" % want[0] in r.stderr, r.stderr
    r = strata("compose", "create", "--dir", cc.dir, "--gpu-ids", "gpu-999-0")
    assert r.returncode == 1 and "gpu-999-0 is not in the inventory" in r.stderr, r.stderr
    assert strata("compose", "delete", s["Id"], "--dir", cc.dir).returncode == 0
    audit(cc)


def test_usage_per_tenant(cc):
    """Metering: a tenant's GPU-, TB- and GB-hours are what its
    compositions held over the window, and stop growing once released.
    Checked against the composition's own times (nothing here is timed)."""
    r = strata("compose", "create", "--dir", cc.dir, "--gpus", "2", "--storage", "2M",
               "--memory", "8M", "--tenant", "metered", "--json")
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["Id"]
    time.sleep(1.2)
    r = strata("compose", "delete", sid, "--dir", cc.dir, "--json")
    assert r.returncode == 0, r.stderr
    o = json.loads(r.stdout)["Oem"]["Strata"]
    held = o["Changed"] - o["Created"]
    code, u = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage")
    assert code == 200, u
    row = [t for t in u["Tenants"] if t["Tenant"] == "metered"]
    assert len(row) == 1 and row[0]["Compositions"] == 1, u
    assert row[0]["GpuHours"] == pytest.approx(2 * held / 3600.0), (row, held)
    assert row[0]["StorageTBHours"] == pytest.approx((2 << 20) / 1e12 * held / 3600.0)
    assert row[0]["MemoryGBHours"] == pytest.approx((8 << 20) / 1e9 * held / 3600.0)
    # Released: it no longer grows.
    time.sleep(1.1)
    code, u2 = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage")
    assert [t for t in u2["Tenants"] if t["Tenant"] == "metered"] == row
    # A window after its release holds nothing of it.
    code, u3 = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage?Since=%d" % u2["Until"])
    assert code == 200 and not [t for t in u3["Tenants"] if t["Tenant"] == "metered"], u3
    r = strata("compose", "usage", "--dir", cc.dir)
    assert r.returncode == 0 and re.search(r"^metered\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+1\s+0 B\s+0 B$",
                                           r.stdout, re.M), r.stdout
    r = strata("compose", "usage", "--dir", cc.dir, "--since", "1h", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["Since"] > 0, r.stdout
    for bad in ("-5", "soon", str(int(time.time()) + 3600), "1e3"):
        code, body = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage?Since=" + bad)
        assert code == 400 and "'Since' must be seconds since the epoch" in error_of(body), body
    r = strata("compose", "usage", "--dir", cc.dir, "--since", "never")
    assert r.returncode == 2 and "--since: 'never' is not a time" in r.stderr, r.stderr
    r = strata("compose", "list", "--dir", cc.dir, "--since", "1h")
    assert r.returncode == 2 and "is an option of 'compose usage'" in r.stderr, r.stderr
    code, body = http(cc, "GET", RF + "/CompositionService/Oem/Strata/Usage", token=False)
    assert code == 401
    # The pools' gauges in the control daemon's /metrics.
    ctl = next(n for n in cc.nodes if "composer" in n.services)
    m = parse_metrics(fetch_metrics_text(ctl.metrics_port)[2])
    inv = inventory(cc)
    assert m["strata_composer_storage_bytes"] == inv["Storage"]["Total"], m
    assert m["strata_composer_memory_used_bytes"] == inv["Memory"]["Used"], m
    assert m["strata_composer_gpus_stranded"] == 0 and "strata_composer_storage_stranded_bytes" in m


def test_swordfish_volumes_view(cc, tmp_path):
    """StorageServices/strata/Volumes: every composition's volume with its
    capacity, what it holds now (meta's quota use) and a link to its
    composition; gone from the view once released."""
    code, root = http(cc, "GET", RF)
    assert root["StorageServices"] == {"@odata.id": RF + "/StorageServices"}, root
    code, coll = http(cc, "GET", RF + "/StorageServices")
    assert code == 200 and coll["Members"] == [{"@odata.id": RF + "/StorageServices/strata"}]
    code, svc = http(cc, "GET", RF + "/StorageServices/strata")
    assert code == 200 and svc["Volumes"] == {"@odata.id": RF + "/StorageServices/strata/Volumes"}
    cred = tmp_path / "vol.token"
    r = strata("compose", "create", "--dir", cc.dir, "--storage", "4M", "--name", "swordfish",
               "--token-out", cred, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    sid, o = s["Id"], s["Oem"]["Strata"]
    f = tmp_path / "f"
    f.write_bytes(os.urandom(300000))
    r = strata("put", "--mgmt", o["Addresses"]["Mgmt"], "--token", cred, f, o["Volume"]["Path"] + "/f")
    assert r.returncode == 0, r.stderr
    code, vols = http(cc, "GET", RF + "/StorageServices/strata/Volumes")
    assert code == 200, vols
    mine = [v for v in vols["Members"] if v["Id"] == sid]
    assert len(mine) == 1 and vols["Members@odata.count"] == len(vols["Members"]), vols
    v = mine[0]
    assert v["@odata.type"].startswith("#Volume.") and v["CapacityBytes"] == 4 << 20, v
    assert v["Capacity"]["Data"]["AllocatedBytes"] == 4 << 20
    assert v["Capacity"]["Data"]["ConsumedBytes"] >= 300000, v
    assert v["Oem"]["Strata"]["Path"] == o["Volume"]["Path"] and v["Name"] == "swordfish"
    assert v["Links"]["Oem"]["Strata"]["Composition"]["@odata.id"] == RF + "/Systems/" + sid
    code, one = http(cc, "GET", RF + "/StorageServices/strata/Volumes/" + sid)
    assert code == 200 and one["Id"] == sid and one["Status"]["State"] == "Enabled", one
    assert strata("compose", "delete", sid, "--dir", cc.dir).returncode == 0
    code, body = http(cc, "GET", RF + "/StorageServices/strata/Volumes/" + sid)
    assert code == 404 and "no volume '%s'" % sid in error_of(body), body
    code, body = http(cc, "GET", RF + "/StorageServices/other")
    assert code == 404 and "no storage service 'other'" in error_of(body)
    code, _ = http(cc, "GET", RF + "/StorageServices/strata/Volumes", token=False)
    assert code == 401
    code, _ = http(cc, "POST", RF + "/StorageServices/strata/Volumes", {"x": 1})
    assert code == 405


def test_all_or_nothing(cc):
    """A request one part of which does not fit takes nothing: the answer
    names every part that does not fit, the pools are as before, no
    composition or volume is left."""
    before, _ = audit(cc)
    n = len(systems(cc))
    code, body = compose(cc, Gpus={"Count": 2}, Storage={"Size": "1M"},
                         Memory={"Size": "1G"})
    assert code == 409, body
    msg = error_of(body)
    assert msg == "needs 1 GiB of memory, 128 MiB free of 128 MiB on 2 mem node(s)", msg
    code, body = compose(cc, Gpus={"Count": 13, "Model": "H100-80GB"}, Storage={"Size": "10T"})
    assert code == 409
    assert error_of(body).startswith("needs 13 H100-80GB, 12 free; needs 10 TiB of storage, "), body
    code, body = compose(cc, Gpus={"Count": 5, "SameNode": True})
    assert code == 409
    assert error_of(body) == "needs 5 GPUs on one node, at most 4 free on a node (12 free in all)"
    code, body = compose(cc, Gpus={"Count": 1, "Model": "A100-40GB"})
    assert code == 409 and error_of(body) == "needs 1 A100-40GB, 0 free"
    after, _ = audit(cc)
    assert after == before
    assert len(systems(cc)) == n
    r = strata("compose", "create", "--dir", cc.dir, "--memory", "1G")
    assert r.returncode == 1 and "needs 1 GiB of memory" in r.stderr, r.stderr


def test_concurrent_requests_never_double_allocate(cc):
    """8 clients, 25 requests each: composes of 1..3 GPUs with a volume and
    memory, and releases of their own compositions. No GPU is ever held
    twice, refusals say why, and once every composition is released the
    pools are whole again."""
    errors = []
    composed = []
    lock = threading.Lock()

    def client(k):
        rng = random.Random(k)
        mine = []
        for i in range(25):
            if mine and rng.random() < 0.45:
                sid = mine.pop(rng.randrange(len(mine)))
                code, body = http(cc, "DELETE", RF + "/Systems/" + sid)
                if code != 200:
                    errors.append((sid, code, body))
                continue
            code, body = compose(cc, Tenant="c%d" % k,
                                 Gpus={"Count": rng.randint(1, 3),
                                       "SameNode": rng.random() < 0.5},
                                 Storage={"Size": "1M"}, Memory={"Size": "4M"})
            if code == 201:
                mine.append(body["Id"])
                with lock:
                    composed.append(body["Id"])
            elif code != 409 or "needs" not in error_of(body):
                errors.append((code, body))
        for sid in mine:
            code, body = http(cc, "DELETE", RF + "/Systems/" + sid)
            if code != 200:
                errors.append((sid, code, body))

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    # Audit while they run, too: the inventory is consistent at any time.
    while any(t.is_alive() for t in threads):
        audit(cc, quiet=False)
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    assert len(composed) > 20
    inv, held = audit(cc)
    assert not held
    assert inv["Gpus"]["Free"] == COMPUTE * GPUS_PER_NODE
    assert inv["Storage"]["Used"] == 0 and inv["Memory"]["Used"] == 0
    states = {s["Id"]: s["Oem"]["Strata"]["State"] for s in systems(cc)}
    assert all(states[sid] == "Released" for sid in composed)


def test_ttl_expiry_releases(cc):
    code, s = compose(cc, Gpus={"Count": 1}, TtlSeconds=1)
    assert code == 201, s
    assert s["Oem"]["Strata"]["Expires"] > 0

    def released():
        code, x = http(cc, "GET", RF + "/Systems/" + s["Id"])
        return x["Oem"]["Strata"] if x["Oem"]["Strata"]["State"] == "Released" else None
    o = wait_until(released, BOUND_S, 0.2, "the TTL to release the composition")
    assert o["Reason"] == "TTL expired"
    audit(cc)


def test_restart_mid_flight_recovers_every_composition(cc):
    """mgmt's process (mgmt, meta, the composer) is killed with kill -9
    while 4 clients compose and release, and started again: every
    composition is then Composed, Released or Failed, never stuck, the
    one made before the kill is intact with its GPUs and credential, and
    the audit holds."""
    code, keep = compose(cc, Gpus={"Count": 2, "SameNode": True}, Memory={"Size": "4M"})
    assert code == 201, keep
    stop = threading.Event()

    def client(k):
        while not stop.is_set():
            try:
                code, body = compose(cc, Gpus={"Count": 1}, Storage={"Size": "1M"})
                if code == 201:
                    http(cc, "DELETE", RF + "/Systems/" + body["Id"])
            except (OSError, ValueError):
                pass          # the composer is down for a while: expected

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    try:
        n = len(systems(cc))
        wait_until(lambda: len(systems(cc)) > n + 3, BOUND_S, 0.05, "requests in flight")
        restart_control_node(cc, signal.SIGKILL)
        wait_until(lambda: _answers(cc), BOUND_S, 0.1, "the composer to answer after the restart")
    finally:
        stop.set()
        for t in threads:
            t.join(BOUND_S)

    def settled():
        ss = systems(cc)
        return ss if all(s["Oem"]["Strata"]["State"] in ("Composed", "Released", "Failed")
                         for s in ss) else None
    ss = wait_until(settled, BOUND_S, 0.2, "every composition to settle after the restart")
    # A Failed one says why: rolled back after the restart, or refused
    # by a part of the cluster that was not back yet (meta, mgmt).
    for s in ss:
        if s["Oem"]["Strata"]["State"] == "Failed":
            assert s["Oem"]["Strata"]["Reason"], s
    # The compute and mem nodes are listed again (they announce anew).
    def listed():
        inv = inventory(cc)
        return (len(inv["ComputeNodes"]) == COMPUTE and all(n["Up"] for n in inv["ComputeNodes"])
                and inv["Memory"]["Nodes"] == MEM_NODES)
    wait_until(listed, BOUND_S, 0.2, "the compute and mem nodes to announce again")
    code, k2 = http(cc, "GET", RF + "/Systems/" + keep["Id"])
    assert k2["Oem"]["Strata"]["State"] == "Composed"
    assert k2["Oem"]["Strata"]["Gpus"] == keep["Oem"]["Strata"]["Gpus"]
    # Its credential is still good: it reaches its namespace.
    tok = keep["Oem"]["Strata"]["Credential"]
    mem = k2["Oem"]["Strata"]["Memory"]["Addresses"][0]
    assert mem_put(mem, tok, keep["Id"].encode() + b"/x", 1000) == 0
    audit(cc)
    # What the clients composed but could not release (the composer was
    # down) stands until released.
    for s in systems(cc):
        if s["Oem"]["Strata"]["State"] == "Composed":
            release(cc, s["Id"])
    assert inventory(cc)["Gpus"]["Free"] == COMPUTE * GPUS_PER_NODE


def test_compute_node_killed_degrades_its_compositions(cc):
    """kill -9 of a compute node: within its lease the map lists it
    offline, and every composition with a GPU on it is Degraded, with the
    reason; its GPUs are unavailable; the composition can be released."""
    code, s = compose(cc, Gpus={"Count": 3, "SameNode": True})
    assert code == 201, s
    code, other = compose(cc, Storage={"Size": "1M"})
    assert code == 201
    node_id = s["Oem"]["Strata"]["Gpus"][0]["Node"]
    cc.node(node_id).kill9()

    def degraded():
        code, x = http(cc, "GET", RF + "/Systems/" + s["Id"])
        return x if x["Oem"]["Strata"]["State"] == "Degraded" else None
    x = wait_until(degraded, BOUND_S, 0.2, "the composition to be Degraded")
    assert "compute node %d" % node_id in x["Oem"]["Strata"]["Reason"]
    assert "missed its lease" in x["Oem"]["Strata"]["Reason"]
    assert x["Status"]["Health"] == "Warning"
    code, o = http(cc, "GET", RF + "/Systems/" + other["Id"])
    assert o["Oem"]["Strata"]["State"] == "Composed"
    inv = inventory(cc)
    assert inv["Gpus"]["Unavailable"] == GPUS_PER_NODE
    assert [n["Up"] for n in inv["ComputeNodes"] if n["Node"] == node_id] == [False]
    # What is left: 2 nodes of 4.
    code, body = compose(cc, Gpus={"Count": 9})
    assert code == 409 and error_of(body) == "needs 9 GPUs, 8 free"
    audit(cc)
    release(cc, s["Id"])
    release(cc, other["Id"])
    audit(cc)


def test_failed_gpus_and_models(cc, daemon_factory):
    """A compute node joining with other GPUs, one reported failed: the
    inventory counts it Failed, its block says so, and compositions get
    only its healthy GPU (by model)."""
    n = daemon_factory(node_id=40, extra_flags=[
        "--node.services=compute", "--compute.gpus=2xL4-24GB", "--compute.failed=1",
        "--node.key_file=%s" % (cc.dir / "cluster.key"),
        "--mgmt.address=%s" % cc.mgmt_node.addr])
    wait_until(lambda: any(x["Node"] == 40 and x["Up"] for x in inventory(cc)["ComputeNodes"]),
               BOUND_S, 0.2, "the new compute node in the inventory")
    inv = inventory(cc)
    assert inv["Gpus"]["Failed"] == 1
    assert inv["Gpus"]["Models"]["L4-24GB"] == {"Total": 2, "Free": 1}
    code, b = http(cc, "GET", RF + "/CompositionService/ResourceBlocks/gpu-40-1")
    assert b["CompositionStatus"]["CompositionState"] == "Failed"
    assert b["Oem"]["Strata"]["State"] == "failed" and b["Status"]["Health"] == "Critical"
    code, body = compose(cc, Gpus={"Count": 2, "Model": "L4-24GB"})
    assert code == 409 and error_of(body) == "needs 2 L4-24GB, 1 free"
    code, s = compose(cc, Gpus={"Count": 1, "Model": "L4-24GB"})
    assert code == 201, s
    assert s["Oem"]["Strata"]["Gpus"] == [{"Node": 40, "Index": 0, "Model": "L4-24GB",
                                          "Address": n.addr, "Zone": "default"}]
    audit(cc)
    release(cc, s["Id"])
