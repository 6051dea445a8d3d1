"""Storage QoS caps of a composition (issue 16; docs/composer.md, "QoS"):
a cluster of 'strata local up' with one node (control and storage); a
composition with 'Oem.Strata.Qos' gets a credential carrying the caps,
and the storage daemon holds what that credential moves to them.

Covered: bad caps refused by name (API and CLI); the caps in the System,
the Volume, 'compose show' and the token's claims; a writer and a reader
with a capped credential measured at no more than the cap + 10% (an
upper bound only: anything else on the machine only slows them, so this
is not a timed assertion that noise can break), the storage daemon's
counters showing the requests it held; writes of one chunk pipelined on
one connection with a capped credential, every one held, applied in the
order sent; an IOPS cap likewise (chunk
operations counted by the daemon); the same workload without caps faster
than the cap (skipped, with the figures, where the machine itself cannot
reach twice the cap).
"""
import json
import os
import struct
import time

import pytest

import strata_wire as sw
from conftest import BUILD, fetch_metrics_text, parse_metrics, run
from conftest import strata_nocred as strata
from test_composer import error_of, http
from test_storage import crc32c

FAULT = BUILD / "tests" / "integration" / "fault_driver"
OP_OPEN, OP_RESOLVE = 67, 81
O_WRONLY = 1

RF = "/redfish/v1"
MIB = 1 << 20
CAP_MIB = 20
SECONDS = 3
SIZE = CAP_MIB * SECONDS * MIB
IOPS = 20
IOPS_CHUNKS = 64
SLACK = 1.1


@pytest.fixture(scope="module")
def qc(module_cluster):
    return module_cluster(1, timeout=120)


def storage_metrics(c):
    out = {}
    for n in c.storage_nodes:
        for k, v in parse_metrics(fetch_metrics_text(n.metrics_port)[2]).items():
            if k.startswith("strata_storage_qos_"):
                out[k] = out.get(k, 0) + v
    return out


def compose_volume(c, tmp_path, name, *caps):
    cred = tmp_path / (name + ".token")
    r = strata("compose", "create", "--dir", c.dir, "--storage", "512M", "--name", name,
               "--token-out", cred, "--json", *caps)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    return s, cred


def timed(*args):
    t0 = time.monotonic()
    r = strata(*args, timeout=120)
    dt = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return dt, r


def workload(c, tmp_path, s, cred, tag):
    """Writes SIZE bytes into the volume and reads them back with the
    composition's credential: (write MiB/s, read MiB/s), each over the
    whole command."""
    o = s["Oem"]["Strata"]
    vol, mgmt = o["Volume"]["Path"], o["Addresses"]["Mgmt"]
    src, back = tmp_path / ("src-" + tag), tmp_path / ("back-" + tag)
    if not src.exists():
        src.write_bytes(os.urandom(SIZE))
    dw, _ = timed("put", "--mgmt", mgmt, "--token", cred, src, vol + "/data")
    dr, _ = timed("get", "--mgmt", mgmt, "--token", cred, vol + "/data", back)
    assert back.read_bytes() == src.read_bytes()
    back.unlink()
    return SIZE / MIB / dw, SIZE / MIB / dr


@pytest.mark.parametrize("qos,says", [
    ({"BandwidthMBps": -1}, "'Oem.Strata.Qos.BandwidthMBps' must be an integer of MiB/s in 0..1048576"),
    ({"BandwidthMBps": 1.5}, "'Oem.Strata.Qos.BandwidthMBps' must be an integer"),
    ({"BandwidthMBps": "20"}, "'Oem.Strata.Qos.BandwidthMBps' must be an integer"),
    ({"BandwidthMBps": 1 << 40}, "'Oem.Strata.Qos.BandwidthMBps' must be an integer of MiB/s in 0..1048576"),
    ({"Iops": -5}, "'Oem.Strata.Qos.Iops' must be an integer of chunk operations/s in 0..100000000"),
    ({"Iops": 10 ** 12}, "'Oem.Strata.Qos.Iops' must be an integer"),
    ({"Iops": None}, "'Oem.Strata.Qos.Iops' must be an integer"),
    ({"Bandwidth": 20}, "'Oem.Strata.Qos.Bandwidth' is not a property (BandwidthMBps, Iops)"),
])
def test_bad_caps_are_refused_by_name(qc, qos, says):
    code, body = http(qc, "POST", RF + "/Systems",
                      {"Storage": {"Size": "64M"}, "Oem": {"Strata": {"Qos": qos}}})
    assert code == 400, body
    assert says in error_of(body), body


def test_bad_oem_and_cli_caps(qc):
    for rq, says in [
            ({"Storage": {"Size": "64M"}, "Oem": {"Strata": {"Qoz": {}}}},
             "'Oem.Strata.Qoz' is not a property (Qos)"),
            ({"Storage": {"Size": "64M"}, "Oem": {"Other": {}}}, "'Oem' must be an object"),
            ({"Storage": {"Size": "64M"}, "Oem": {"Strata": {"Qos": 20}}},
             "'Oem.Strata.Qos' must be an object"),
            ({"Memory": {"Size": "1M"}, "Oem": {"Strata": {"Qos": {"Iops": 5}}}},
             "'Oem.Strata.Qos' caps the credential's storage traffic")]:
        code, body = http(qc, "POST", RF + "/Systems", rq)
        assert code == 400 and says in error_of(body), body
    for opt, val, says in [("--bandwidth", "-1", "--bandwidth: '-1' is not a whole number of MiB/s"),
                           ("--bandwidth", "1.5", "--bandwidth: '1.5' is not"),
                           ("--bandwidth", "2000000", "in 0..1048576"),
                           ("--iops", "x", "--iops: 'x' is not a whole number of operations/s")]:
        r = strata("compose", "create", "--dir", qc.dir, "--storage", "1M", opt, val)
        assert r.returncode == 2 and says in r.stderr, r.stderr
    r = strata("compose", "list", "--dir", qc.dir, "--iops", "5")
    assert r.returncode == 2 and "is an option of 'compose create'" in r.stderr, r.stderr


def test_capped_writer_and_reader_stay_under_the_cap(qc, tmp_path):
    s, cred = compose_volume(qc, tmp_path, "capped", "--bandwidth", str(CAP_MIB))
    o = s["Oem"]["Strata"]
    assert o["Qos"] == {"BandwidthMBps": CAP_MIB, "Iops": 0}, o
    claims = sw.token_claims(cred.read_text().strip())
    assert claims["qos"] == {"bw": CAP_MIB * MIB, "iops": 0}, claims
    code, got = http(qc, "GET", RF + "/Systems/" + s["Id"])
    assert code == 200 and got["Oem"]["Strata"]["Qos"] == o["Qos"]
    code, vol = http(qc, "GET", RF + "/StorageServices/strata/Volumes/" + s["Id"])
    assert code == 200 and vol["Oem"]["Strata"]["Qos"] == o["Qos"], vol
    r = strata("compose", "show", s["Id"], "--dir", qc.dir)
    assert r.returncode == 0 and "bandwidth 20 MiB/s, IOPS no cap" in r.stdout, r.stdout

    before = storage_metrics(qc)
    w, rd = workload(qc, tmp_path, s, cred, "capped")
    after = storage_metrics(qc)
    print("capped at %d MiB/s: write %.1f MiB/s, read %.1f MiB/s" % (CAP_MIB, w, rd))
    assert w <= CAP_MIB * SLACK, "write ran at %.1f MiB/s, cap %d" % (w, CAP_MIB)
    assert rd <= CAP_MIB * SLACK, "read ran at %.1f MiB/s, cap %d" % (rd, CAP_MIB)
    # The daemon held requests (the cap, not the machine, set the pace).
    assert after["strata_storage_qos_delayed_total"] > before.get(
        "strata_storage_qos_delayed_total", 0), after
    assert after["strata_storage_qos_overflow_total"] == 0
    qc.capped = (w, rd)


def test_iops_cap_counts_chunk_operations(qc, tmp_path):
    """64 chunks of 64 KiB at 20 operations/s: about 3 s of writes."""
    s, cred = compose_volume(qc, tmp_path, "iops", "--iops", str(IOPS))
    o = s["Oem"]["Strata"]
    vol, mgmt = o["Volume"]["Path"], o["Addresses"]["Mgmt"]
    r = strata("setlayout", "--dir", qc.dir, "--chunk-size", "64K", vol)
    assert r.returncode == 0, r.stderr
    src = tmp_path / "small-chunks"
    src.write_bytes(os.urandom(IOPS_CHUNKS * 64 * 1024))
    before = storage_metrics(qc)
    dt, _ = timed("put", "--mgmt", mgmt, "--token", cred, src, vol + "/f")
    after = storage_metrics(qc)
    ops = after["strata_storage_qos_charged_total"] - before.get(
        "strata_storage_qos_charged_total", 0)
    print("capped at %d ops/s: %d chunk operations in %.2f s" % (IOPS, ops, dt))
    assert ops >= IOPS_CHUNKS
    assert ops / dt <= IOPS * SLACK, "%.1f operations/s, cap %d" % (ops / dt, IOPS)


def test_uncapped_runs_faster_than_the_cap(qc, tmp_path):
    s, cred = compose_volume(qc, tmp_path, "free")
    assert s["Oem"]["Strata"]["Qos"] is None
    assert "qos" not in sw.token_claims(cred.read_text().strip())
    before = storage_metrics(qc)
    w, rd = workload(qc, tmp_path, s, cred, "free")
    after = storage_metrics(qc)
    print("no cap: write %.1f MiB/s, read %.1f MiB/s" % (w, rd))
    # Nothing of this credential was charged.
    assert after["strata_storage_qos_charged_total"] == before["strata_storage_qos_charged_total"]
    if min(w, rd) < 2 * CAP_MIB:
        pytest.skip("without a cap this machine moved only %.1f MiB/s (write) and %.1f MiB/s "
                    "(read), under twice the %d MiB/s cap: the comparison says nothing here"
                    % (w, rd, CAP_MIB))
    capped = getattr(qc, "capped", None)
    assert w > CAP_MIB and rd > CAP_MIB
    if capped:
        assert capped[0] < w and capped[1] < rd, (capped, w, rd)


def test_held_writes_of_one_chunk_keep_their_order(qc, tmp_path):
    """8 writes of the same 256 KiB of one chunk sent back to back on one
    connection with a credential capped at 1 MiB/s (each is more than a
    burst: every one is held): the head gives them versions in the order
    sent, and the chunk holds the last one's bytes."""
    n, size = 8, 256 * 1024
    s, cred = compose_volume(qc, tmp_path, "order", "--bandwidth", "1")
    o = s["Oem"]["Strata"]
    vol, mgmt = o["Volume"]["Path"], o["Addresses"]["Mgmt"]
    first = tmp_path / "first"
    first.write_bytes(b"\0" * size)
    r = strata("put", "--mgmt", mgmt, "--token", cred, first, vol + "/f")
    assert r.returncode == 0, r.stderr
    token = cred.read_text().strip()
    meta = next(nd for nd in qc.nodes if "meta" in nd.services.split(","))
    st = qc.storage_nodes[0]
    p = (vol + "/f").encode()
    with sw.Client(meta.addr, token=(qc.dir / "admin.token").read_text()) as a:
        f = a.call(OP_RESOLVE, struct.pack("<I", len(p)) + p + struct.pack("<I", 0))
        assert f.status == 0
        ino = struct.unpack_from("<Q", f.body)[0]
    with sw.Client(meta.addr, token=token) as m:
        f = m.call(OP_OPEN, struct.pack("<QQI", ino, 0, O_WRONLY))
        assert f.status == 0, f.status
        cap = f.body[-sw.CAP_LEN:]
    # The chain of chunk 0 (any chain this node heads is taken: one
    # storage node heads them all).
    r = run([FAULT, mgmt, "steps", str(ino), str(1 << 20), "c:0"], timeout=60)
    assert r.returncode == 0, r.stderr
    line = r.stdout.split()
    chain_id, chain_ver, target = int(line[2]), int(line[4]), int(line[3].split("@")[0])
    datas = [bytes([0x41 + i]) * size for i in range(n)]
    before = storage_metrics(qc)
    with sw.Client(st.addr, token=token, timeout=60) as cl:
        ids = []
        for d in datas:
            rid = cl.new_id()
            ids.append(rid)
            body = sw.sp_update(target, ino, 0, cap, length=size, crc=crc32c(d),
                                chain_id=chain_id, chain_ver=chain_ver)
            cl.send(sw.Frame(opcode=sw.OP_CHUNK_WRITE, req_id=rid, body=body, bulk=d))
        got = {}
        for _ in ids:
            f = cl.recv(timeout=60)
            assert f.status == 0, f.status
            got[f.req_id] = struct.unpack_from("<Q", f.body)[0]
    versions = [got[i] for i in ids]
    assert versions == sorted(versions) and len(set(versions)) == n, versions
    after = storage_metrics(qc)
    assert after["strata_storage_qos_delayed_total"] - before.get(
        "strata_storage_qos_delayed_total", 0) >= n
    back = tmp_path / "back"
    r = strata("get", "--mgmt", mgmt, "--token", cred, vol + "/f", back)
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == datas[-1]
