"""Group commit of the meta service (docs/namespace.md, "Group commit"):
the requests of one turn of reactor 0 share one SQLite transaction and
each is answered only after it commits. Many concurrent creates through
libstrata are grouped (the metrics say so), and a kill -9 of the meta
daemon loses none that was acknowledged: after a restart on the same data
directory every acknowledged file is there, once."""

import json

import pytest

from conftest import REGISTRY, spawn, wait_until
from test_python import PY, py_env

THREADS = 8

# Creates /g/tTT-fNNNNN from THREADS threads of one client until a call
# fails (the meta daemon is killed); each acknowledged name is appended
# to the progress file as soon as its close returned.
CREATOR = """
import sys, threading, strata
progress, nthreads = sys.argv[1], int(sys.argv[2])
# A short retry budget: once the meta daemon is killed, calls fail in
# seconds instead of the default 30 s (the test waits for that).
c = strata.Client(timeout_ms=3000, retry_ms=3000)
lock = threading.Lock()
out = open(progress, "a", buffering=1)

def work(t):
    for i in range(100000):
        name = "/g/t%02d-f%05d" % (t, i)
        try:
            with c.open(name, "wb"):
                pass
        except OSError:
            return
        with lock:
            out.write(name + "\\n")
            out.flush()

ths = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
for th in ths:
    th.start()
for th in ths:
    th.join()
"""


def _acked(path):
    try:
        return [n for n in path.read_text().split("\n") if n]
    except OSError:
        return []


def _env(meta):
    env = py_env()
    env.update({"STRATA_MGMT": meta.addr, "STRATA_TOKEN": "", "STRATA_TOKEN_FILE": ""})
    return env


def _py(meta, code):
    from conftest import run
    r = run([PY, "-c", code], timeout=120, env=_env(meta))
    assert r.returncode == 0, "child python failed (%d):\n%s\n%s" % (
        r.returncode, r.stdout, r.stderr[-4000:])
    return r.stdout


META_FLAGS = ["--node.services=mgmt,meta", "--mgmt.replication=1", "--mgmt.expect_nodes=1"]


# None: groups commit at the end of each loop turn, as in production.
# "150": each group commits 150 ms after it opened
# (STRATA_TEST_META_GROUP_DELAY_MS), so the kill -9 lands while answers
# are held: an answer sent before its commit would show as a lost create.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("delay", [None, "150"])
def test_grouped_creates_survive_kill9_of_meta(daemon_factory, tmp_path, delay):
    env = {"STRATA_TEST_META_GROUP_DELAY_MS": delay} if delay else None
    meta = daemon_factory(node_id=1, extra_flags=META_FLAGS, env=env)
    want = 100 if delay else 400
    daemon_factory(node_id=2, extra_flags=["--node.services=storage",
                                           "--mgmt.address=%s" % meta.addr])
    meta.wait_log(r"chain table length 0 -> 1", timeout=60)
    _py(meta, "import strata; strata.Client().mkdir('/g')")

    progress = tmp_path / "acked"
    script = tmp_path / "creator.py"
    script.write_text(CREATOR)
    p = spawn([PY, str(script), str(progress), str(THREADS)], tmp_path / "creator.log",
              "creator", env=_env(meta))
    try:
        # Grouping happened: more requests were answered after group
        # commits than there were groups.
        wait_until(lambda: len(_acked(progress)) >= want or p.poll() is not None, 120, 0.05,
                   "%d acknowledged creates" % want)
        assert p.poll() is None, (tmp_path / "creator.log").read_text()[-4000:]
        wait_until(lambda: meta.metric("strata_meta_group_requests_total") >
                   meta.metric("strata_meta_groups_total"), 60, 0.05,
                   "a group commit of more than one request")
        assert meta.metric("strata_meta_group_failures_total") == 0
        meta.kill9()
        wait_until(lambda: p.poll() is not None, 60, 0.05, "the creator to stop")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    REGISTRY.discard(p.pid)
    # What the creator had acknowledged by the kill, and what it
    # acknowledged after (calls answered before the kill, read late).
    acked = _acked(progress)
    assert len(acked) >= want

    # Same data directory, same address (the storage daemon's mgmt).
    meta.start(META_FLAGS + ["--node.listen=%s" % meta.addr])
    out = _py(meta, "import json, strata\n"
                    "print(json.dumps(strata.Client().listdir('/g')))")
    names = json.loads(out.strip().splitlines()[-1])
    assert len(names) == len(set(names))
    missing = sorted(set(n.rsplit("/", 1)[1] for n in acked) - set(names))
    assert not missing, "acknowledged creates lost by the kill -9: %s" % missing[:20]
