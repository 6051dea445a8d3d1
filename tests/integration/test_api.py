"""libstrata's public API against a live cluster (tests/integration/api_test.c),
one pytest test per scenario, so a failure names its scenario:
read-after-write and close-to-open, holes, truncate (shrink into a chunk,
grow, O_TRUNC then write at once), a file spanning every chain, concurrent
readers and writers on one file and on many, the batch ring, the errors a
user can hit with the namespace left unchanged, rename over a file,
readdir paging and the handle calls (strata_*at, strata_readdirplus) while
another client renames and removes by path -- all on one cluster, each
scenario in its own directory -- and ENOSPC when the targets are full, on
a cluster of its own."""
import json
import re
import subprocess
import time

import pytest

from conftest import BUILD

API_TEST = BUILD / "tests/integration/api_test"


def _scenarios():
    r = subprocess.run([str(API_TEST), "--list"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [s for s in r.stdout.split() if s != "enospc"]


# The list comes from api_test itself: a scenario added there is run here.
SCENARIOS = _scenarios() if API_TEST.exists() else []


def run_api(cluster_dir, mode, timeout=180):
    mgmt = json.loads((cluster_dir / "cluster.json").read_text())["mgmt"]
    r = subprocess.run([str(API_TEST), mgmt, mode], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, "api_test %s failed (%d):\n%s%s" % (mode, r.returncode,
                                                                  r.stdout, r.stderr)
    assert "api_test %s: ok" % mode in r.stdout
    return r.stdout


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
        p = subprocess.Popen([str(API_TEST), mgmt, "writer"],
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


def test_every_scenario_is_listed():
    assert len(SCENARIOS) >= 8, SCENARIOS


@pytest.mark.timeout(300)
def test_bench_meta_with_the_metadata_cache(strata):
    """'strata bench meta --meta-cache MS' says the cache is on and adds the
    'stat again' row (what the cache serves); without it, says it is off. The
    shape only: no figure is judged."""
    for extra, state in ((["--meta-cache", "2000"], "metadata cache: on, entries kept 2000 ms"),
                         ([], "metadata cache: off")):
        r = strata("bench", "meta", "--files", "30", "--threads", "2", *extra, timeout=280)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert state in r.stdout, out
        for row in ("create (open O_CREAT + close), 2 thr", "stat, 2 thr",
                    "stat again, 2 thr", "unlink, 2 thr"):
            assert re.search(r"^%s\s+\d+\s+\d+\s+\d+\.\d{3}" % re.escape(row), r.stdout,
                             re.M), out
    for bad in ("-1", "600001", "soon"):
        r = strata("bench", "meta", "--meta-cache", bad, timeout=30)
        assert r.returncode == 2 and "--meta-cache" in r.stderr, (bad, r.stdout + r.stderr)



# Last in the module: the shared cluster is up from the first of these to
# the end of the module, and the tests above run with no other cluster.
@pytest.mark.timeout(240)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_api(shared_cluster, scenario):
    run_api(shared_cluster.dir, scenario)

