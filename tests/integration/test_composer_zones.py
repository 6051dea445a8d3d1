"""The composer's zones and recompose (issue 16, docs/composer.md):
a cluster of 'strata local up --compute 3 --zones 2' (compute nodes in
zones a, b, a, 2 declared GPUs each) and one storage node.

Covered: ResourceZones and each block's zone, compute.zone in the compute
STATUS and refused when malformed, Gpus.Zone and Gpus.SameZone through the
API and the CLI with refusals that say why, and recompose: a compute node
killed with kill -9, its compositions Degraded, a stale If-Match refused
(412), a composition recomposed onto a node that is up (its credential
still valid), one whose zone has nothing left refused with the reason,
the inventory audited after each step.
"""
import json
import urllib.request

import pytest

from conftest import wait_until
from conftest import strata_nocred as strata
from test_composer import (BOUND_S, RF, admin, audit, composer_addr, compose, error_of, http,
                           inventory, release)

PER = 2


@pytest.fixture(scope="module")
def zc(module_cluster):
    return module_cluster(1, timeout=120,
                          local_args=["--compute", "3", "--gpus-per-node", str(PER),
                                      "--zones", "2"])


def nodes_in(c, zone):
    return [n["Node"] for n in inventory(c)["ComputeNodes"] if n["Zone"] == zone]


def test_resource_zones(zc):
    inv = inventory(zc)
    assert sorted(n["Zone"] for n in inv["ComputeNodes"]) == ["a", "a", "b"], inv
    code, svc = http(zc, "GET", RF + "/CompositionService")
    assert svc["ResourceZones"]["@odata.id"] == RF + "/CompositionService/ResourceZones"
    code, coll = http(zc, "GET", RF + "/CompositionService/ResourceZones")
    assert code == 200, coll
    assert coll["@odata.type"] == "#ZoneCollection.ZoneCollection"
    assert [m["@odata.id"] for m in coll["Members"]] == [
        RF + "/CompositionService/ResourceZones/a", RF + "/CompositionService/ResourceZones/b"]
    code, a = http(zc, "GET", RF + "/CompositionService/ResourceZones/a")
    assert code == 200, a
    assert a["@odata.type"].startswith("#Zone.") and a["ZoneType"] == "ZoneOfResourceBlocks"
    blocks = [b["@odata.id"].rsplit("/", 1)[1] for b in a["Links"]["ResourceBlocks"]]
    want = ["gpu-%d-%d" % (n, i) for n in nodes_in(zc, "a") for i in range(PER)]
    assert blocks == want + ["storage", "memory"], blocks
    assert a["Oem"]["Strata"]["Nodes"] == nodes_in(zc, "a")
    assert a["Oem"]["Strata"]["Gpus"]["Total"] == 2 * PER
    assert a["Status"]["State"] == "Enabled"
    assert coll["Oem"]["Strata"]["Zones"][0] == a
    code, b = http(zc, "GET", RF + "/CompositionService/ResourceBlocks/%s" % want[0])
    assert b["Oem"]["Strata"]["Zone"] == "a"
    assert b["Links"]["Zones"] == [{"@odata.id": RF + "/CompositionService/ResourceZones/a"}]
    code, body = http(zc, "GET", RF + "/CompositionService/ResourceZones/c")
    assert code == 404 and "no resource zone 'c'" in error_of(body)
    code, body = http(zc, "GET", RF + "/CompositionService/ResourceZones", token=False)
    assert code == 401
    # The compute node says its zone in its STATUS.
    st = zc.node(nodes_in(zc, "b")[0]).client().status()
    assert next(s for s in st["services"] if s["name"] == "compute")["zone"] == "b"
    r = strata("compose", "inventory", "--dir", zc.dir)
    assert r.returncode == 0 and "ZONE" in r.stdout, r.stdout


def test_a_malformed_zone_is_refused(daemon_factory):
    d = daemon_factory(start=False)
    with pytest.raises(Exception):
        d.start(["--node.services=compute", "--compute.gpus=1xL4-24GB",
                 "--compute.zone=rack 1"])
    assert "compute.zone: 'rack 1' is not a zone name" in d.log, d.log_tail()


@pytest.mark.parametrize("body,says", [
    ({"Gpus": {"Count": 1, "Zone": "a b"}}, "'Gpus.Zone' must be a zone name"),
    ({"Gpus": {"Count": 1, "Zone": 3}}, "'Gpus.Zone' must be a zone name"),
    ({"Gpus": {"Count": 1, "SameZone": "yes"}}, "'Gpus.SameZone' must be true or false"),
    ({"Gpus": {"Zone": "a"}, "Storage": {"Size": "1M"}}, "'Gpus.Zone' is given without 'Gpus.Count'"),
    ({"Gpus": {"Ids": ["gpu-3-0"], "SameZone": True}}, "'Gpus.Ids' names the GPUs"),
])
def test_bad_zone_requests(zc, body, says):
    code, b = compose(zc, **body)
    assert code == 400 and says in error_of(b), b


def test_same_zone_and_named_zone(zc):
    code, s1 = compose(zc, Gpus={"Count": 3, "SameZone": True})
    assert code == 201, s1
    o = s1["Oem"]["Strata"]
    assert {g["Zone"] for g in o["Gpus"]} == {"a"} and o["GpuRequest"]["SameZone"] is True
    # Zone a: 1 free, zone b: 2: the tightest that fits.
    code, s2 = compose(zc, Gpus={"Count": 2, "SameZone": True})
    assert code == 201 and {g["Zone"] for g in s2["Oem"]["Strata"]["Gpus"]} == {"b"}, s2
    release(zc, s2["Id"])
    code, body = compose(zc, Gpus={"Count": 3, "SameZone": True})
    assert code == 409, body
    assert error_of(body) == "needs 3 GPUs in one zone, at most 2 free in zone b (3 free in all)"
    code, body = compose(zc, Gpus={"Count": 3, "Zone": "b"})
    assert code == 409 and error_of(body) == "needs 3 GPUs in zone b, 2 free there"
    code, body = compose(zc, Gpus={"Count": 1, "Zone": "nowhere"}, Storage={"Size": "1T"})
    assert code == 409
    assert error_of(body).startswith("needs 1 GPU in zone nowhere, 0 free there; needs 1 TiB")
    audit(zc)
    # The CLI.
    r = strata("compose", "create", "--dir", zc.dir, "--gpus", "2", "--zone", "b",
               "--same-zone", "--json")
    assert r.returncode == 0, r.stderr
    s3 = json.loads(r.stdout)
    assert s3["Oem"]["Strata"]["GpuRequest"]["Zone"] == "b"
    assert {g["Zone"] for g in s3["Oem"]["Strata"]["Gpus"]} == {"b"}
    r = strata("compose", "show", s3["Id"], "--dir", zc.dir)
    assert r.returncode == 0 and "(zone b)" in r.stdout, r.stdout
    r = strata("compose", "create", "--dir", zc.dir, "--gpus", "1", "--zone", "a/b")
    assert r.returncode == 2 and "--zone: 'a/b' is not a zone name" in r.stderr, r.stderr
    r = strata("compose", "create", "--dir", zc.dir, "--gpus", "1", "--zone", "b")
    assert r.returncode == 1 and "needs 1 GPU in zone b, 0 free there" in r.stderr, r.stderr
    release(zc, s1["Id"])
    release(zc, s3["Id"])
    assert inventory(zc)["Gpus"]["Free"] == 3 * PER
    audit(zc)


def test_recompose_after_a_compute_node_dies(zc, tmp_path):
    """kill -9 of zone b's only node: a composition with a GPU there is
    Degraded; recomposed (If-Match honoured) onto a node that is up, its
    credential still valid; one bound to zone b is refused, saying why."""
    b = nodes_in(zc, "b")[0]
    code, pinned = compose(zc, Gpus={"Count": 1, "Zone": "b"})
    assert code == 201, pinned
    cred = tmp_path / "job.token"
    r = strata("compose", "create", "--dir", zc.dir, "--gpu-ids", "gpu-%d-1" % b,
               "--storage", "1M", "--token-out", cred, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    sid, etag0 = s["Id"], s["@odata.etag"]
    rq = urllib.request.Request("http://%s%s/Systems/%s" % (composer_addr(zc), RF, sid),
                                headers={"Authorization": "Bearer " + admin(zc)})
    with urllib.request.urlopen(rq, timeout=BOUND_S) as resp:
        assert resp.headers["ETag"] == etag0 == json.loads(resp.read())["@odata.etag"]
    assert etag0.startswith('"') and etag0.endswith('"')
    code, x = http(zc, "GET", RF + "/Systems/" + sid)
    assert x["Actions"]["Oem"]["#Strata.Recompose"]["target"] == \
        RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid
    # Nothing lost: a recompose changes nothing.
    code, same = http(zc, "POST", RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid, {})
    assert code == 200 and same["@odata.etag"] == etag0, same
    zc.node(b).kill9()

    def degraded():
        code, x = http(zc, "GET", RF + "/Systems/" + sid)
        return x if x["Oem"]["Strata"]["State"] == "Degraded" else None
    x = wait_until(degraded, BOUND_S, 0.2, "the composition to be Degraded")
    assert x["@odata.etag"] != etag0
    wait_until(lambda: http(zc, "GET", RF + "/Systems/" + pinned["Id"])[1]["Oem"]["Strata"]
               ["State"] == "Degraded", BOUND_S, 0.2, "the pinned composition to be Degraded")
    # A stale ETag is refused, and nothing changes.
    code, body = http(zc, "POST", RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid, {},
                      headers={"If-Match": etag0})
    assert code == 412 and "has changed" in error_of(body), body
    assert body["error"]["code"] == "Base.1.8.PreconditionFailed"
    code, body = http(zc, "GET", RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid)
    assert code == 405
    # Recomposed onto a node that is up: Composed, a new generation.
    code, y = http(zc, "POST", RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid, {},
                   headers={"If-Match": x["@odata.etag"]})
    assert code == 200, y
    o = y["Oem"]["Strata"]
    assert o["State"] == "Composed" and y["Status"]["Health"] == "OK"
    assert len(o["Gpus"]) == 1 and o["Gpus"][0]["Node"] != b, o
    assert o["Gpus"][0]["Model"] == "H100-80GB"
    assert y["@odata.etag"] not in (etag0, x["@odata.etag"])
    assert o["CredentialId"] == s["Oem"]["Strata"]["CredentialId"]
    inv, held = audit(zc, quiet=False)
    assert (o["Gpus"][0]["Node"], o["Gpus"][0]["Index"]) in held
    audit(zc)
    # The credential reaches its volume still.
    data = tmp_path / "d"
    data.write_bytes(b"x" * 1000)
    r = strata("put", "--mgmt", o["Addresses"]["Mgmt"], "--token", cred, data,
               o["Volume"]["Path"] + "/d")
    assert r.returncode == 0, r.stderr
    # Zone b has nothing left: the pinned one cannot be recomposed.
    r = strata("compose", "recompose", pinned["Id"], "--dir", zc.dir)
    assert r.returncode == 1, r.stdout
    assert "cannot replace 1 lost GPU(s) of '%s': needs 1 H100-80GB in zone b, 0 free there" \
        % pinned["Id"] in r.stderr, r.stderr
    code, p = http(zc, "GET", RF + "/Systems/" + pinned["Id"])
    assert p["Oem"]["Strata"]["State"] == "Degraded"
    # DELETE honours If-Match too.
    code, body = http(zc, "DELETE", RF + "/Systems/" + sid, headers={"If-Match": etag0})
    assert code == 412, body
    code, body = http(zc, "DELETE", RF + "/Systems/" + sid, headers={"If-Match": '"1", *'})
    assert code == 200 and body["Oem"]["Strata"]["State"] == "Released", body
    release(zc, pinned["Id"])
    audit(zc)
    code, body = http(zc, "POST", RF + "/Systems/%s/Actions/Oem/Strata.Recompose" % sid, {})
    assert code == 409 and "is Released: only a Composed or Degraded one" in error_of(body)


@pytest.mark.parametrize("path,code,says", [
    ("/Systems/nope/Actions/Oem/Strata.Recompose", 404, "no composition 'nope'"),
    ("/Systems/Actions/Oem/Strata.Recompose", 404, "no resource at"),
    ("/Systems/a/b/Actions/Oem/Strata.Recompose", 404, "no resource at"),
    ("/Systems/comp-1/Actions/Oem/Strata.Other", 404, "no resource at"),
])
def test_recompose_urls(zc, path, code, says):
    c, body = http(zc, "POST", RF + path, {})
    assert c == code and says in error_of(body), body


def test_if_match_malformed(zc):
    code, s = compose(zc, Gpus={"Count": 1})
    assert code == 201
    code, body = http(zc, "DELETE", RF + "/Systems/" + s["Id"], headers={"If-Match": "x" * 300})
    assert code == 400 and "'If-Match' must be" in error_of(body), body
    code, body = http(zc, "DELETE", RF + "/Systems/" + s["Id"],
                      headers={"If-Match": "W/" + s["@odata.etag"]})
    assert code == 412, body
    code, body = http(zc, "DELETE", RF + "/Systems/" + s["Id"],
                      headers={"If-Match": '"999", ' + s["@odata.etag"]})
    assert code == 200, body
    audit(zc)


@pytest.mark.parametrize("value", ["0", "27", "two"])
def test_local_up_zones_checked(tmp_path, value):
    r = strata("local", "up", "--dir", tmp_path / "c", "--compute", "2", "--zones", value)
    assert r.returncode == 2, r.stderr
    assert "--zones: '%s' is not a number of zones in 1..26" % value in r.stderr, r.stderr
