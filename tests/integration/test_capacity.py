"""A full small target (issue 14): placement is capacity-aware.

Three storage nodes, R=1 (three chains of one target each); node 2's
target is an 8 MiB tmpfs. Files are written until mgmt holds that target
full (mgmt.full_pct, 95% by default). From then on:
- `status` flags it (text FULL, JSON full/free, targets_full), mgmt's
  /metrics counts it, meta says it places new files elsewhere;
- every new file is written and read back, and none lands on the full
  target (its usage does not grow);
- removing files frees it, and the flag clears.
Before this, one small full target made every write in the cluster fail
with ENOSPC while status said healthy.
"""

import json
import os
import re
import subprocess

import pytest

from conftest import run_strata, wait_until
from test_faults import faults  # noqa: F401 (fixture)

MiB = 1 << 20


def tmpfs_on(request, size, where):
    """mount(fc): a tmpfs of size on where(fc) (before the daemons start);
    unmounted after the test. Skips without root or where mounting fails."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = []

    def mount(fc):
        d = where(fc)
        d.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(d)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip("cannot mount a tmpfs: %s" % r.stderr.strip())
        mounted.append(d)

    def umount():
        for d in mounted:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)
    request.addfinalizer(umount)
    return mount


@pytest.fixture
def small_target(request):
    """An 8 MiB tmpfs on node 2's target."""
    return tmpfs_on(request, "8m", lambda fc: fc.node(2).data / "targets" / "0")


def status(fc):
    r = run_strata("status", "--json", "--mgmt", fc.mgmt_addr, timeout=30)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(r.stdout)


def target_of(j, node):
    return next(t for t in j["targets"] if t["node"] == node)


def put(fc, src, path):
    return run_strata("put", "-q", src, path, "--mgmt", fc.mgmt_addr, timeout=60)


@pytest.mark.timeout(240)
def test_full_small_target_gets_no_new_files(faults, small_target, tmp_path):
    # The free-space floor at one and a half chunks of these files (the
    # default 256 MiB would hold an 8 MiB target full from the start): a
    # target that cannot take one more chunk is full whatever its
    # percentage.
    fc = faults(nstorage=3, replication=1, before_start=small_target,
                flags=["--mgmt.full_free=1536K"])
    fc.wait_healthy()
    blob = tmp_path / "blob"
    data = os.urandom(MiB)
    blob.write_bytes(data)
    assert run_strata("mkdir", "/fill", "--mgmt", fc.mgmt_addr).returncode == 0
    assert run_strata("mkdir", "/new", "--mgmt", fc.mgmt_addr).returncode == 0

    # Fill until mgmt holds node 2's target full. A put whose chunk lands
    # on it in the last second before the flag may get ENOSPC: that one
    # is refused whole (no partial file), and said so.
    full = False
    for i in range(60):
        r = put(fc, blob, "/fill/f%d" % i)
        if r.returncode != 0:
            assert "space" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
        if i % 3 == 2:
            try:
                wait_until(lambda: target_of(status(fc), 2)["full"], 3, 0.3, "full")
                full = True
                break
            except AssertionError:
                pass
    assert full, json.dumps(target_of(status(fc), 2))

    j = status(fc)
    t = target_of(j, 2)
    assert t["full"] and j["targets_full"] == 1, j
    assert t["free"] < 1536 * 1024, t
    assert all(not x["full"] for x in j["targets"] if x["node"] != 2), j
    r = run_strata("status", "--mgmt", fc.mgmt_addr, timeout=30)
    out = r.stdout
    assert re.search(r"^full\s+1 target\(s\) past mgmt.full_pct", out, re.M), out
    assert re.search(r"^%d\s+2\s+\S+.*FULL$" % t["id"], out, re.M), out
    assert fc.mgmt.metric("strata_mgmt_targets_full") == 1
    m = fc.node(2).metrics()
    assert m['strata_storage_target_capacity_bytes{target="%d"}' % t["id"]] == 8 * MiB, m
    assert m['strata_storage_target_free_bytes{target="%d"}' % t["id"]] < 1536 * 1024, m
    assert m['strata_storage_target_used_bytes{target="%d"}' % t["id"]] > 4 * MiB, m
    wait_until(lambda: "1 of 3 chains have a full target" in fc.meta_node.log, 15, 0.2,
               "meta to place new files around the full chain")

    # Every new file is written and read back; none lands on the full target.
    used = target_of(status(fc), 2)["used"]
    for i in range(24):
        r = put(fc, blob, "/new/n%d" % i)
        assert r.returncode == 0, r.stdout + r.stderr
    for i in range(0, 24, 5):
        out = tmp_path / ("back%d" % i)
        r = run_strata("get", "/new/n%d" % i, out, "--mgmt", fc.mgmt_addr, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert out.read_bytes() == data
    wait_until(lambda: status(fc)["targets_serving"] == 3, 10, 0.3, "the status")
    assert target_of(status(fc), 2)["used"] <= used

    # Freeing space clears the flag.
    r = run_strata("rm", "-r", "/fill", "--mgmt", fc.mgmt_addr, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_until(lambda: not target_of(status(fc), 2)["full"], 60, 0.5,
               "node 2's target to have room again (gc, then a heartbeat)")
    assert status(fc)["targets_full"] == 0


@pytest.fixture
def small_meta_disk(request):
    """A 24 MiB tmpfs as the meta server's data directory."""
    return tmpfs_on(request, "24m", lambda fc: fc.meta_node.data)


def fill_disk(path):
    """Writes path until its disk is full; -> the bytes written."""
    n = 0
    block = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                n += f.write(block)
        except OSError:
            pass
    return n


@pytest.mark.timeout(180)
def test_deletes_work_on_a_full_meta_disk(faults, small_meta_disk, tmp_path):
    """The meta server's disk fills up (another program's file): it gives
    its reserve (meta.reserve) back, refuses creates with ENOSPC, and
    removals still work; once space is back it takes the reserve again
    and creates are served."""
    fc = faults(nstorage=1, replication=1, meta_apart=True, before_start=small_meta_disk,
                flags=["--meta.reserve=4M"])
    fc.wait_healthy()
    meta = fc.meta_node
    assert (meta.data / "meta.reserve").stat().st_size == 4 << 20
    assert (meta.data / "meta.reserve").stat().st_mode & 0o777 == 0o600
    src = tmp_path / "small"
    src.write_bytes(os.urandom(4096))
    assert run_strata("mkdir", "/keep", "--mgmt", fc.mgmt_addr).returncode == 0
    for i in range(20):
        r = put(fc, src, "/keep/f%d" % i)
        assert r.returncode == 0, r.stdout + r.stderr
    assert meta.metric("strata_meta_disk_tight") == 0

    filler = meta.data / "filler"
    fill_disk(filler)
    wait_until(lambda: meta.metric("strata_meta_disk_tight") == 1, 20, 0.2,
               "meta to give its reserve back")
    assert not (meta.data / "meta.reserve").exists()
    assert meta.metric("strata_meta_reserve_releases_total") >= 1
    # Creates are refused, with the error that says why.
    r = put(fc, src, "/keep/new")
    assert r.returncode != 0
    assert "No space left on device" in r.stdout + r.stderr, r.stdout + r.stderr
    r = run_strata("mkdir", "/d", "--mgmt", fc.mgmt_addr)
    assert r.returncode != 0 and "No space left on device" in r.stderr, r.stdout + r.stderr
    # Removals work: one file, then the whole directory.
    r = run_strata("rm", "/keep/f0", "--mgmt", fc.mgmt_addr, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_strata("rm", "-r", "/keep", "--mgmt", fc.mgmt_addr, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_strata("ls", "/", "--mgmt", fc.mgmt_addr)
    assert r.returncode == 0 and "keep" not in r.stdout, r.stdout + r.stderr

    # Space back: the reserve is taken again and creates are served.
    filler.unlink()
    wait_until(lambda: meta.metric("strata_meta_disk_tight") == 0, 20, 0.2,
               "meta to take its reserve again")
    assert (meta.data / "meta.reserve").stat().st_size == 4 << 20
    r = put(fc, src, "/again")
    assert r.returncode == 0, r.stdout + r.stderr
