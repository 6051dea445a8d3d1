"""Two-tier checkpoints (strata.checkpoint.save(..., pool=)): the memory
pool first, the storage plane behind, on local clusters with mem nodes,
real daemons and real kill -9.

- A save committed in the pool (its drain held) survives the kill of one
  mem node: a new process loads it bitwise from the surviving replicas;
  the trainer killed before the drain leaves it pool-only; with every mem
  node killed it is reported lost and the previous checkpoint loads; a
  pool that does not answer fails the save clearly.
- After the drain, every mem node killed: load falls back to the storage
  copy; a corrupted piece is caught by its CRC32C and falls back too.
- Bad inputs (replicas < 1, replicas > nodes, a synchronous or sharded
  two-tier save) fail clearly and the previous checkpoint stays loadable;
  keep_last and pool_keep bound what the pool holds, and keys no record
  names are removed.
"""
import textwrap

import pytest

from conftest import run, spawn
from test_python import PY, py_env, run_py, pytestmark  # noqa: F401  (skips without torch)

MEM_FLAGS = "--mem.capacity=128M --node.log_level=warn"

PRELUDE = textwrap.indent("""
import errno, json, os, signal, sys, time
import torch, strata, strata.mem as sm, strata.checkpoint as ck
c = strata.Client()
D = os.environ["STRATA_MGMT"]
MEM = [n for n in json.load(open(D + "/cluster.json"))["nodes"] if n["services"] == "mem"]

def state(seed):
    g = torch.Generator().manual_seed(seed)
    return {"model": {"w%d" % i: torch.randn(300 + 7 * i, 513, generator=g) for i in range(4)},
            "emb": torch.randn(1000, 64, generator=g).to(torch.bfloat16),
            "step": seed, "ids": torch.arange(11, dtype=torch.int64), "none": torch.empty(0)}

def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape and
                a.reshape(-1).view(torch.uint8).equal(b.reshape(-1).view(torch.uint8)))
    return a == b

def kill9(node):
    os.kill(node["pid"], signal.SIGKILL)
    for _ in range(1000):        # dead (gone or a zombie): its sockets are closed
        try:
            with open("/proc/%d/stat" % node["pid"]) as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.01)
    raise SystemExit("mem node %d did not die" % node["id"])

def load(path, **kw):
    st = {}
    out = ck.load(path, client=c, stats=st, **kw)
    return out, st
""", " " * 8)     # as indented as the code each test appends


def tier_cluster(cluster, mem):
    return cluster(3, daemon_flags=MEM_FLAGS, local_args=["--mem", str(mem)])


@pytest.mark.timeout(400)
def test_survives_one_mem_node_killed_then_all(cluster):
    c = tier_cluster(cluster, 3)
    # The trainer: a drained checkpoint, then one committed in the pool
    # with its drain held; one mem node killed; loaded from the pool; then
    # the trainer itself killed -9 before the drain (a later save would
    # first release and wait for it).
    r = _run_killed(c, PRELUDE + """
        pool = sm.Pool(local_dir=D, replicas=2)
        c.makedirs("/tier")
        ck.save(state(1), "/tier/s1", client=c, pool=pool).wait_drained()
        assert sorted(c.listdir("/tier/s1")) == ["manifest.json", "pool.json",
                                                 "shard-00000.bin", "shard-00000.json"]
        h = ck.save(state(2), "/tier/s2", client=c, pool=pool, hold_drain=True,
                    pool_piece=64 << 10)
        assert h.wait() == "/tier/s2" and not h.drained()
        assert c.listdir("/tier/s2") == ["pool.json"]       # committed in the pool only
        rec = json.loads(c.open("/tier/s2/pool.json").read())
        part, = rec["ranks"]
        assert rec["replicas"] == 2 and len(part["pieces"]) > 20 and not rec["drained"]
        kill9(MEM[0])
        back, st = load("/tier/s2", pool=pool)
        assert st["source"] == "pool" and same(back, state(2)), st
        into = {"model." + k: torch.zeros_like(v) for k, v in state(2)["model"].items()}
        ptrs = {k: v.data_ptr() for k, v in into.items()}
        back, st = load("/tier/s2", into=into, pool=True)   # the addresses pool.json records
        assert st["source"] == "pool" and same(back, state(2))
        assert all(back["model"][k[6:]].data_ptr() == ptrs[k] for k in into)
        print("READY", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert "READY" in r
    # A new process: the pool copy of s2 from the surviving replicas.
    run_py(c, PRELUDE + """
        pool = sm.Pool(local_dir=D, replicas=2)
        assert c.listdir("/tier/s2") == ["pool.json"]        # never drained
        back, st = load("/tier/s2", pool=pool)
        assert st["source"] == "pool" and same(back, state(2)), st
        try:
            load("/tier/s2")                         # the storage plane only: not there
            raise SystemExit("a pool-only checkpoint loaded without pool=")
        except FileNotFoundError as e:
            assert "in the memory pool only" in str(e), e
        assert ck.latest("/tier", client=c, pool=True) == "/tier/s2"
        assert ck.latest("/tier", client=c) == "/tier/s1"      # the storage plane's newest
        # a save now needs the dead node for some pieces: a clear error,
        # nothing committed, the previous checkpoints as they were
        try:
            ck.save(state(3), "/tier/s3", client=c, pool=pool, pool_piece=64 << 10).wait()
            raise SystemExit("a save with a replica's node dead committed")
        except OSError as e:
            assert "into the mem pool" in str(e) and "nothing was committed" in str(e), e
        assert not c.exists("/tier/s3") and c.listdir("/tier/s2") == ["pool.json"]
        assert same(load("/tier/s2", pool=pool)[0], state(2))
        # every mem node lost before the drain: s2 is lost, s1 loads
        kill9(MEM[1]); kill9(MEM[2])
        try:
            load("/tier/s2", pool=pool)
            raise SystemExit("a checkpoint with no complete copy loaded")
        except ck.IncompleteCheckpointError as e:
            assert e.errno == errno.ENODATA and "is lost" in str(e), e
        assert ck.latest("/tier", client=c, pool=True) == "/tier/s1"
        back, st = load("/tier/s1", pool=pool)
        assert st["source"] == "storage" and "pool_error" in st and same(back, state(1)), st
        # a pool that does not answer: a clear error, s1 as it was
        try:
            ck.save(state(4), "/tier/s4", client=c, pool=pool).wait()
            raise SystemExit("a save into a dead pool committed")
        except OSError as e:
            assert "no node of the mem pool" in str(e) or "answer" in str(e), e
        assert not c.exists("/tier/s4")
        assert same(load("/tier/s1")[0], state(1))
    """, timeout=240)


def _run_killed(c, code):
    """Runs code in a child Python that ends by killing itself with
    SIGKILL; returns its stdout."""
    e = py_env(c.dir)
    r = run([PY, "-c", textwrap.dedent(code)], timeout=300, env=e)
    assert r.returncode == -9, "child python did not end as planned (%d):\n%s\n%s" % (
        r.returncode, r.stdout, r.stderr[-6000:])
    return r.stdout


@pytest.mark.timeout(400)
def test_drained_fallback_bad_inputs_retention(cluster):
    c = tier_cluster(cluster, 2)
    run_py(c, PRELUDE + """
        pool = sm.Pool(local_dir=D, replicas=2)
        c.makedirs("/t")
        ck.save(state(1), "/t/a", client=c).wait()   # a plain checkpoint: the previous one
        def refused(exc, text, **kw):
            try:
                ck.save(state(9), "/t/bad", client=c, **kw)
                raise SystemExit("accepted %r" % (kw,))
            except exc as e:
                assert text in str(e), (kw, e)
        refused(ValueError, "pool_replicas must be an integer of at least 1", pool=pool,
                pool_replicas=0)
        refused(ValueError, "pool_replicas=3 but the mem pool", pool=pool, pool_replicas=3)
        refused(ValueError, "is asynchronous", pool=pool, async_=False)
        refused(ValueError, "rank 2 is not in 0..1", pool=pool, rank=2, world_size=2, tag="x")
        refused(ValueError, "pool_piece must be", pool=pool, pool_piece=100)
        refused(TypeError, "must be a strata.mem.Pool", pool="127.0.0.1:1")
        try:
            sm.Pool(local_dir=D, replicas=0)
            raise SystemExit("replicas=0 accepted")
        except ValueError as e:
            assert "replicas must be an integer in 1..8" in str(e), e
        assert not c.exists("/t/bad") and same(load("/t/a")[0], state(1))

        # keep_last and pool_keep bound what the pool holds
        p1 = sm.Pool(local_dir=D, replicas=1)          # pool_replicas opens its own handle
        for i in range(2, 6):
            h = ck.save(state(i), "/t/s%d" % i, client=c, pool=p1, pool_replicas=2,
                        keep_last=3, pool_piece=128 << 10)
            h.wait_drained()
        assert sorted(c.listdir("/t")) == ["s3", "s4", "s5"], c.listdir("/t")
        assert "pool.json" not in c.listdir("/t/s4") and "pool.json" in c.listdir("/t/s5")
        rec = json.loads(c.open("/t/s5/pool.json").read())
        assert rec["drained"] and rec["replicas"] == 2
        held = pool.keys("strata-ckpt/")
        part, = rec["ranks"]
        assert len(held) == 2 * len(part["pieces"]), (len(held), len(part["pieces"]))
        assert {k.rsplit("/", 1)[0] for k in held} == {part["keys"]}
        # keys a removal outside strata.checkpoint left behind: removed by the next save
        c.rmtree("/t/s5")
        ck.save(state(6), "/t/s6", client=c, pool=pool, pool_piece=128 << 10).wait_drained()
        rec6 = json.loads(c.open("/t/s6/pool.json").read())
        part6, = rec6["ranks"]
        assert {k.rsplit("/", 1)[0] for k in pool.keys("strata-ckpt/")} == {part6["keys"]}
        # prune releases the pool copies of what it removes
        assert ck.prune("/t", 1, client=c, pool=pool) == 2
        assert sorted(c.listdir("/t")) == ["s6"]
        back, st = load("/t/s6", pool=pool)
        assert st["source"] == "pool" and same(back, state(6)), st

        # a corrupted piece: its CRC32C catches it, the storage copy loads
        key = part6["keys"] + "/0"
        pool.put(key, b"\\xff" * part6["pieces"][0][2], pin=True)
        back, st = load("/t/s6", pool=pool)
        assert st["source"] == "storage" and "CRC32C mismatch" in st["pool_error"], st
        assert same(back, state(6))

        # after the drain, every mem node killed: the storage copy
        ck.save(state(7), "/t/s7", client=c, pool=pool).wait_drained()
        for n in MEM:
            kill9(n)
        back, st = load("/t/s7", pool=pool)
        assert st["source"] == "storage" and "pool_error" in st and same(back, state(7)), st
        back, st = load("/t/s7", pool=False)
        assert st["source"] == "storage" and "pool_error" not in st
        assert ck.latest("/t", client=c, pool=True) == "/t/s7"
    """, timeout=300)


@pytest.mark.timeout(400)
def test_sharded_three_ranks_one_mem_node_killed(cluster, tmp_path):
    """Three rank processes save one two-tier checkpoint at once; rank 0
    commits once every rank's pieces are in the pool. With one mem node
    killed a new process loads every rank's shard (and one rank's alone)
    bitwise from the pool; after the drains, the storage copy is the same."""
    c = tier_cluster(cluster, 3)
    code = textwrap.dedent(PRELUDE + """
        r = int(sys.argv[1])
        pool = sm.Pool(local_dir=D, replicas=2)
        st = state(10 + r)
        h = ck.save({"rank%d" % r: st["model"], "step": 5}, "/sh/ck", client=c, pool=pool,
                    rank=r, world_size=3, tag="job1", hold_drain=True, pool_piece=96 << 10)
        assert h.wait() == "/sh/ck"
        print("COMMITTED", flush=True)
        while not os.path.exists(sys.argv[2]):    # the test loads from the pool meanwhile
            time.sleep(0.05)
        h.wait_drained()
        print("DRAINED", flush=True)
    """)
    run_py(c, "import strata; strata.Client().makedirs('/sh')")
    env = py_env(c.dir)
    # A rank whose pool does not answer: rank 0 hears of it at once (not
    # after its 10-minute wait), nothing is committed.
    bad = textwrap.dedent(PRELUDE + """
        r = int(sys.argv[1])
        pool = sm.Pool(local_dir=D, replicas=2) if r == 0 else sm.Pool("127.0.0.1:1")
        h = ck.save({"x": torch.arange(100000)}, "/sh/bad", client=c, pool=pool, rank=r,
                    world_size=2, tag="bad")
        try:
            h.wait()
            raise SystemExit("rank %d committed" % r)
        except OSError as e:
            assert ("rank 1 failed" if r == 0 else "no node of the mem pool") in str(e), e
            print("REFUSED", str(e), flush=True)
    """)
    procs = [spawn([PY, "-c", bad, str(r)], env=env) for r in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and b"REFUSED" in out, err.decode()[-4000:]
    run_py(c, """
        import strata
        assert strata.Client().listdir("/sh") == ["bad.tmp-pool-bad"]   # as a dead save's
    """)
    go = tmp_path / "go"
    procs = [spawn([PY, "-c", code, str(r), str(go)], env=env) for r in range(3)]
    for p in procs:
        assert p.stdout.readline().decode().strip() == "COMMITTED", p.communicate()[1][-4000:]
    run_py(c, PRELUDE + """
        pool = sm.Pool(local_dir=D, replicas=2)
        want = {"rank%d" % r: state(10 + r)["model"] for r in range(3)}
        rec = json.loads(c.open("/sh/ck/pool.json").read())
        assert rec["world_size"] == 3 and [p["rank"] for p in rec["ranks"]] == [0, 1, 2]
        assert "manifest.json" not in c.listdir("/sh/ck")
        kill9(MEM[2])
        back, st = load("/sh/ck", pool=pool)
        assert st["source"] == "pool" and back["step"] == 5, st
        assert same({k: back[k] for k in want}, want)
        one, st = load("/sh/ck", pool=pool, rank=1)
        assert st["source"] == "pool" and same(one["rank1"], want["rank1"]) and "rank0" not in one
    """, timeout=240)
    go.write_text("go")
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0 and b"DRAINED" in out, err.decode()[-4000:]
    run_py(c, PRELUDE + """
        want = {"rank%d" % r: state(10 + r)["model"] for r in range(3)}
        assert "manifest.json" in c.listdir("/sh/ck")
        assert json.loads(c.open("/sh/ck/pool.json").read())["drained"]
        back, st = load("/sh/ck", pool=False)
        assert st["source"] == "storage" and same({k: back[k] for k in want}, want)
        with ck.Checkpoint("/sh/ck", c) as k:
            assert k.world_size == 3
    """, timeout=240)
