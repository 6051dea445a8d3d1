"""'strata status' as an operator relies on it (issue 22): honest capacity
(each filesystem once, usage fresh within a heartbeat), --json, exit codes
that follow health, an answer at once while the cluster forms; the
address checks of stratad and mgmt; and 'make install' (meson install)
laying out what it promises.

Exit codes of 'strata status': 0 health ok, 1 not ok, 2 usage, 3 mgmt
cannot be reached (docs/cli.md)."""

import json
import os
import re
import time

import pytest

import netns
from conftest import (BUILD, REPO, fetch_metrics_text, free_port, parse_metrics, run, run_strata,
                      wait_until)

HEARTBEAT_S = 1.0       # mgmt.heartbeat's default


def _status(*args, timeout=30):
    return run_strata("status", *args, timeout=timeout)


def _status_json(*args):
    r = _status("--json", *args)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


def _fs_size(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def test_status_json_counts_each_filesystem_once(cluster, tmp_path):
    """Two storage nodes with two targets each, all on one filesystem: the
    total is that filesystem's size, not four times it; usage follows a
    write within a heartbeat or two."""
    c = cluster(2, daemon_flags="--storage.targets=2")
    wait_until(lambda: _status("--dir", c.dir).returncode == 0, 30, 0.2,
               "the cluster to be healthy")
    rc, j = _status_json("--dir", c.dir)
    assert rc == 0 and j["health"] == "ok" and j["waiting_for"] == [], j
    size = _fs_size(c.dir)
    targets = j["targets"]
    assert len(targets) == 4, targets
    assert len({t["fs"] for t in targets}) == 1 and targets[0]["fs"], targets
    for t in targets:
        assert t["capacity"] == size and t["state"] == "serving", t
    assert j["capacity"]["total"] == size, (j["capacity"], size)
    assert j["capacity"]["used"] == sum(t["used"] for t in targets), j
    assert j["nodes_up"] == 2 and j["targets_serving"] == 4, j
    assert j["chains"]["total"] == j["chains"]["healthy"] >= 1, j["chains"]
    assert j["namespace"] is not None and j["namespace"]["files"] >= 0, j

    # The text form and mgmt's /metrics say the same total.
    r = _status("--dir", c.dir)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^health\s+ok$", r.stdout, re.M), r.stdout
    m = parse_metrics(fetch_metrics_text(c.mgmt_node.metrics_port)[2])
    assert m["strata_mgmt_capacity_bytes"] == size, m

    before = j["capacity"]["used"]
    blob = tmp_path / "blob"
    blob.write_bytes(os.urandom(3 << 20))
    r = run_strata("put", "-q", blob, "/blob", "--dir", c.dir)
    assert r.returncode == 0, r.stderr
    t0 = time.monotonic()
    # Two replicas of 3 MiB land on the targets; mgmt hears of them with
    # the next heartbeat of each node.
    wait_until(lambda: _status_json("--dir", c.dir)[1]["capacity"]["used"] >= before + (6 << 20),
               HEARTBEAT_S * 5, 0.1, "the used bytes to follow the write")
    assert time.monotonic() - t0 < HEARTBEAT_S * 5


def test_status_exit_code_follows_health(cluster):
    c = cluster(3)
    wait_until(lambda: _status("--dir", c.dir).returncode == 0, 30, 0.2,
               "the cluster to be healthy")
    victim = c.storage_nodes[-1]
    victim.kill9()

    def not_ok():
        r = _status("--dir", c.dir)
        return r if r.returncode == 1 else None
    # mgmt.lease (5 s) must run out first.
    r = wait_until(not_ok, 30, 0.5, "status to exit 1 after a node died")
    assert re.search(r"^health\s+(degraded|unavailable) \(.+\)$", r.stdout, re.M), r.stdout
    assert re.search(r"^%d\s+\S+\s+offline" % victim.id, r.stdout, re.M), r.stdout
    rc, j = _status_json("--dir", c.dir)
    assert rc == 1 and j["health"] in ("degraded", "unavailable"), j
    assert j["waiting_for"] and j["nodes_up"] == 2, j
    assert any(n["id"] == victim.id and n["state"] == "offline" for n in j["nodes"]), j


def test_status_answers_while_forming(daemon_factory):
    """mgmt waits for 3 storage nodes: status answers at once, exit 1, and
    says how many registered, before and after one does."""
    mgmt = daemon_factory(node_id=1, extra_flags=[
        "--node.services=mgmt,meta", "--mgmt.expect_nodes=3", "--mgmt.replication=1"])
    t0 = time.monotonic()
    r = _status("--mgmt", mgmt.addr, timeout=20)
    took = time.monotonic() - t0
    assert took < 5, "status took %.1f s while the cluster forms" % took
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"^health\s+forming: 0 of 3 storage nodes registered$", r.stdout,
                     re.M), r.stdout
    daemon_factory(node_id=2, extra_flags=[
        "--node.services=storage", "--mgmt.address=%s" % mgmt.addr])
    wait_until(lambda: "forming: 1 of 3" in _status("--mgmt", mgmt.addr).stdout, 15, 0.2,
               "status to count the registered node")
    rc, j = _status_json("--mgmt", mgmt.addr)
    assert rc == 1 and j["health"] == "forming", j
    assert j["expect_nodes"] == 3 and j["storage_nodes"] == 1, j
    assert j["waiting_for"] == ["1 of 3 storage nodes registered"], j
    assert j["chains"]["total"] == 0 and j["namespace"] is None, j


def test_status_without_mgmt_exits_3():
    t0 = time.monotonic()
    r = _status("--mgmt", "127.0.0.1:%d" % free_port(), timeout=30)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "cannot read the cluster map from mgmt" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 15
    assert _status("--json", "extra").returncode == 2


# ---------------------------------------------------------------------------
# Addresses.

def test_wildcard_listen_needs_advertise(run_stratad, daemon_factory, tmp_path):
    for listen in ("0.0.0.0:0", "[::]:0"):
        r = run_stratad("--data", tmp_path / "w", "--node.listen=%s" % listen,
                        "--node.insecure=true")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "'node.listen'" in r.stderr and "'node.advertise' is not set" in r.stderr, r.stderr
    r = run_stratad("--data", tmp_path / "w", "--node.listen=0.0.0.0:0",
                    "--node.insecure=true", "--node.advertise=0.0.0.0:7300")
    assert r.returncode == 2 and "key 'node.advertise'" in r.stderr, r.stderr
    # A host alone: the port it listens on.
    d = daemon_factory(extra_flags=["--node.listen=0.0.0.0:0", "--node.insecure=true",
                                    "--node.advertise=127.0.0.1"])
    assert re.fullmatch(r"127\.0\.0\.1:[1-9]\d*", d.addr), d.addr
    assert run_strata("ping", d.addr).returncode == 0


def test_loopback_address_from_afar_is_warned(daemon_factory):
    """A storage node that reaches mgmt over a real interface but registers
    127.0.0.1: mgmt says so (once, rate-limited)."""
    ok, why = netns.available()
    if not ok:
        pytest.skip(why)
    netns.sweep_stale()
    fabric = netns.Fabric().create()
    try:
        ip = fabric.service_ip
        port = free_port(ip)
        mgmt = daemon_factory(node_id=1, extra_flags=[
            "--node.services=mgmt", "--node.listen=%s:%d" % (ip, port),
            "--node.insecure=true"])
        daemon_factory(node_id=2, extra_flags=[
            "--node.services=storage", "--mgmt.address=%s:%d" % (ip, port)])
        mgmt.wait_log(r"node 2 registers the loopback address '127\.0\.0\.1:\d+' from "
                      r"'10\.213\.\d+\.\d+:\d+'.*node\.advertise", timeout=15)
    finally:
        fabric.destroy()


# ---------------------------------------------------------------------------
# make install: meson install of the build under test into a DESTDIR.

def test_install_lays_out_the_files(tmp_path):
    dest = tmp_path / "root"
    r = run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", dest],
            timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    files = {p.relative_to(dest).as_posix() for p in dest.rglob("*")
             if p.is_file() or p.is_symlink()}
    prefix = json.loads(run(["meson", "introspect", "--buildoptions", BUILD],
                            timeout=60).stdout)
    prefix = next(o["value"] for o in prefix if o["name"] == "prefix").lstrip("/")

    def has(pattern):
        rx = re.compile(pattern)
        return [f for f in files if rx.fullmatch(f)]
    for exe in ("stratad", "strata"):
        assert has(r"%s/bin/%s" % (prefix, exe)), sorted(files)
    if (BUILD / "src" / "fuse" / "strata-fuse").exists():
        assert has(r"%s/bin/strata-fuse" % prefix), sorted(files)
    assert has(r"%s/lib(/[^/]+)?/libstrata\.so(\.\d+)*" % prefix), sorted(files)
    for h in ("strata.h", "errors.h", "checkpoint.h", "mem.h", "locate.h", "dataset.h"):
        assert has(r"%s/include/strata/%s" % (prefix, h)), sorted(files)
    pc = has(r"%s/lib(/[^/]+)?/pkgconfig/strata\.pc" % prefix)
    assert pc, sorted(files)
    assert "-lstrata" in (dest / pc[0]).read_text()
    unit = dest / prefix / "lib/systemd/system/stratad.service"
    assert unit.is_file(), sorted(files)
    assert "ExecStart=/%s/bin/stratad --config " % prefix in unit.read_text()

    # The Makefile drives the same: PREFIX and DESTDIR reach meson.
    r = run(["make", "-n", "-C", REPO, "install", "BUILD=%s" % BUILD, "PREFIX=/opt/s",
             "DESTDIR=%s" % dest], timeout=60)
    assert r.returncode == 0, r.stderr
    assert "-Dprefix=/opt/s" in r.stdout and "--destdir \"%s\"" % dest in r.stdout, r.stdout
