"""libstrata's public API against a live cluster (tests/integration/api_test.c):
read-after-write and close-to-open, holes, truncate (shrink into a chunk,
grow, O_TRUNC then write at once), a file spanning every chain, concurrent
readers and writers on one file and on many, the batch ring, the errors a
user can hit with the namespace left unchanged, readdir paging, ENOSPC
when the targets are full, and the handle calls (strata_*at,
strata_readdirplus) while another client renames and removes by path."""
import json
import subprocess
import time

import pytest

from conftest import BUILD


def run_api(cluster_dir, mode, timeout=180):
    mgmt = json.loads((cluster_dir / "cluster.json").read_text())["mgmt"]
    r = subprocess.run([str(BUILD / "tests/integration/api_test"), mgmt, mode],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, "api_test %s failed (%d):\n%s%s" % (mode, r.returncode,
                                                                  r.stdout, r.stderr)
    assert "api_test %s: ok" % mode in r.stdout
    return r.stdout


@pytest.mark.timeout(240)
def test_api_all(cluster):
    c = cluster(3)
    run_api(c.dir, "all")


@pytest.mark.timeout(240)
def test_api_handles(cluster):
    c = cluster(3)
    out = run_api(c.dir, "handles")
    assert "handles: removed objects are stale" in out


@pytest.mark.timeout(240)
def test_api_enospc(cluster):
    c = cluster(3, daemon_flags="--storage.capacity=24M")
    out = run_api(c.dir, "enospc")
    assert "before ENOSPC" in out


@pytest.mark.timeout(120)
def test_daemons_killed_under_writes_do_not_kill_the_client(cluster):
    """A program writing through libstrata (SIGPIPE left at its default,
    which ends the process) sees the storage daemons die under it: its
    writes fail with an error and it exits by itself, three times over."""
    for _ in range(3):
        c = cluster(3)
        mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
        p = subprocess.Popen([str(BUILD / "tests/integration/api_test"), mgmt, "writer"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "writer: started"
            time.sleep(0.5)
            for n in c.storage_nodes:
                n.kill9()
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, "the writer died (%d): %s%s" % (p.returncode, out, err[-2000:])
        assert "writer: stopped by" in out
