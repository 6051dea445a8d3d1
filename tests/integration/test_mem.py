"""The memory plane: stratad's mem service driven through strata.mem (the
ctypes binding over libstrata's memory API) in a child /usr/bin/python3
(an ASan libstrata needs the sanitizer runtime preloaded).

Covers dict-like access, tensor put/get into an existing tensor, async
get, batches, listing; bad input (oversized key or value, a full pool)
failing clearly without losing what is stored; pinned objects never
evicted; concurrent put/get/evict with every value read whole and right;
spill to the storage plane and transparent reload; two mem nodes with
consistent hashing and replicas surviving a node; layer streaming with
outputs identical to the resident model; synchronous calls on the
caller's thread (lanes) from many threads, with few lanes and with none,
beside an async get in flight; a timeout on a stopped node and a node
killed in the middle of a call.
"""
import json
import textwrap

from conftest import run
from test_python import PY, py_env, pytestmark  # noqa: F401  (skips without torch)


def run_py(addrs, code, timeout=120, replicas=1):
    env = py_env()
    env["STRATA_MEM"] = addrs
    prelude = ("import os, numpy as np, torch, strata.mem as sm\n"
               "pool = sm.Pool(os.environ['STRATA_MEM'], replicas=%d)\n" % replicas)
    r = run([PY, "-c", prelude + textwrap.dedent(code)], timeout=timeout, env=env)
    assert r.returncode == 0, "child python failed (%d):\n%s\n%s" % (r.returncode, r.stdout,
                                                                      r.stderr)
    return r.stdout


def mem_node(daemon_factory, node_id=1, capacity="64M", mgmt=None, key_file=None, **mem_keys):
    """A daemon running the mem service; mem_keys are [mem] config keys
    (evict=False, spill=True, ...). key_file: the cluster key of the
    cluster at mgmt (its clients then present that cluster's token)."""
    flags = ["--node.services=mem", "--node.threads=2", "--mem.capacity=%s" % capacity]
    if mgmt:
        flags.append("--mgmt.address=%s" % mgmt)
    if key_file:
        flags.append("--node.key_file=%s" % key_file)
    for k, v in mem_keys.items():
        flags.append("--mem.%s=%s" % (k, str(v).lower()))
    return daemon_factory(node_id=node_id, extra_flags=flags)


def test_dict_tensor_async_batch(daemon_factory):
    d = mem_node(daemon_factory)
    out = run_py(d.addr, """
        pool["a"] = b"hello"
        assert pool["a"] == b"hello" and "a" in pool and "b" not in pool
        try:
            pool["b"]
            raise SystemExit("missing key did not raise")
        except KeyError:
            pass
        t = torch.randn(64, 33)
        pool.put_tensor("w/0", t)
        assert torch.equal(pool.get_tensor("w/0"), t)
        out = torch.zeros(64, 33)
        ptr = out.data_ptr()
        assert pool.get_into("w/0", out) == t.numel() * 4
        assert out.data_ptr() == ptr and torch.equal(out, t)
        a = np.arange(1000, dtype=np.int64)
        pool.put_tensor("arr", a)
        assert (pool.get_tensor("arr") == a).all()
        out2 = torch.zeros(64, 33)
        op = pool.get_async("w/0", out2)
        assert op.wait() == t.numel() * 4 and torch.equal(out2, t)
        small = bytearray(10)
        try:
            pool.get_into("w/0", small)
            raise SystemExit("small buffer accepted")
        except OSError as e:
            assert e.errno == 105, e       # ENOBUFS
        vals = {"b/%d" % i: bytes([i]) * (100 + i) for i in range(200)}
        pool.mput(vals)
        got = pool.mget(list(vals) + ["nope"])
        assert got["nope"] is None
        assert all(got[k] == v for k, v in vals.items())
        assert sorted(pool.keys("b/")) == sorted(vals)
        assert pool.mremove(["b/1", "b/2", "zz"]) == [True, True, False]
        assert pool.exists("b/1") is None and pool.exists("b/3") == 103
        del pool["a"]
        assert "a" not in pool
        pool.pin("b/3"); pool.unpin("b/3")
        print(pool.stats()["objects"])
    """)
    assert int(out.split()[-1]) > 190


def test_bad_input_loses_nothing(daemon_factory):
    d = mem_node(daemon_factory, capacity="4M", evict=False)
    run_py(d.addr, """
        import errno
        for i in range(3):
            pool.put("keep/%d" % i, bytes([i]) * (1 << 20))
        def expect(code, fn):
            try:
                fn()
            except OSError as e:
                assert e.errno == code, (e, code)
                assert len(str(e)) < 300, "message should be short: %s" % e
                return
            raise SystemExit("no error, expected %d" % code)
        expect(errno.ENAMETOOLONG, lambda: pool.put("k" * 2000, b"x"))
        expect(errno.E2BIG, lambda: pool.put("huge", np.zeros((64 << 20) + 1, np.uint8)))
        expect(errno.E2BIG, lambda: pool.put("bigger-than-pool", np.zeros(5 << 20, np.uint8)))
        expect(errno.ENOSPC, lambda: pool.put("full", np.zeros(2 << 20, np.uint8)))
        expect(errno.ENOSPC, lambda: pool.put("keep/0", np.zeros(2 << 20, np.uint8)))
        for i in range(3):
            assert pool["keep/%d" % i] == bytes([i]) * (1 << 20), i
        assert pool.stats()["objects"] == 3
    """)


def test_pinned_never_evicted(daemon_factory):
    d = mem_node(daemon_factory, capacity="8M")
    run_py(d.addr, """
        for i in range(4):
            pool.put("pin/%d" % i, bytes([i + 1]) * (1 << 20), pin=True)
        for i in range(40):
            pool.put("x/%d" % i, bytes([7]) * (512 << 10))
        st = pool.stats()
        assert st["evictions"] > 0 and st["used"] <= st["capacity"], st
        for i in range(4):
            assert pool["pin/%d" % i] == bytes([i + 1]) * (1 << 20)
        assert st["pinned"] == 4, st
    """)


def test_concurrent_put_get_evict(daemon_factory):
    d = mem_node(daemon_factory, capacity="4M")
    run_py(d.addr, """
        import threading
        errors = []
        def worker(tid):
            buf = np.empty(256 << 10, np.uint8)
            rng = np.random.default_rng(tid)
            for i in range(300):
                k = int(rng.integers(0, 48))
                n = (16 << 10) * (1 + k % 16)
                if i % 3 == 0:
                    pool.put("c/%d" % k, np.full(n, k, np.uint8))
                else:
                    try:
                        got = pool.get_into("c/%d" % k, buf)
                    except FileNotFoundError:
                        continue
                    if got != n or not (buf[:got] == k).all():
                        errors.append((k, got))
        ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        assert not errors, errors[:5]
        st = pool.stats()
        assert st["evictions"] > 0 and st["used"] <= st["capacity"], st
    """, timeout=240)


def test_spill_and_reload(cluster, daemon_factory):
    c = cluster(1)
    mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
    d = mem_node(daemon_factory, node_id=10, capacity="8M", mgmt=mgmt,
                 key_file=c.dir / "cluster.key", spill=True)
    run_py(d.addr, """
        for i in range(40):
            pool.put("s/%d" % i, np.full(512 << 10, i, np.uint8))
        bad = [i for i in range(40) if pool.get("s/%d" % i) != bytes([i]) * (512 << 10)]
        assert not bad, bad
        assert pool.exists("s/0") == 512 << 10
        st = pool.stats()
        assert st["spilled"] > 0 and st["reloaded"] > 0, st
        pool.prefetch("s/1")
    """, timeout=240)


def test_two_nodes_hashing_and_replicas(daemon_factory):
    a = mem_node(daemon_factory, node_id=1)
    b = mem_node(daemon_factory, node_id=2)
    addrs = "%s,%s" % (a.addr, b.addr)
    run_py(addrs, """
        for i in range(200):
            pool.put("h/%d" % i, b"v%d" % i)
        per = [sm.Pool(x).stats()["objects"] for x in os.environ["STRATA_MEM"].split(",")]
        assert sum(per) == 200 and min(per) > 40, per
        # Every client builds the same ring, whatever the order of the list.
        other = sm.Pool(",".join(reversed(os.environ["STRATA_MEM"].split(","))))
        assert all(other["h/%d" % i] == b"v%d" % i for i in range(200))
    """)
    run_py(addrs, """
        for i in range(50):
            pool.put("r/%d" % i, b"r%d" % i)
        per = [sm.Pool(x).exists("r/7") for x in os.environ["STRATA_MEM"].split(",")]
        assert per == [2, 2], per
    """, replicas=2)
    b.stop()
    run_py(addrs, """
        assert all(pool["r/%d" % i] == b"r%d" % i for i in range(50))
    """, replicas=2)
    # With a node down a replicated put cannot store every copy: the
    # single and the batched put both fail, whichever of the two nodes
    # is down (the batch used to keep the last node's status).
    for which in (0, 1):
        pair = [mem_node(daemon_factory, node_id=3 + 2 * which + k) for k in (0, 1)]
        pair[which].stop()
        run_py("%s,%s" % (pair[0].addr, pair[1].addr), """
            for call in (lambda: pool.put("d/0", b"x"),
                         lambda: pool.mput({"d/%d" % i: b"x" for i in range(20)})):
                try:
                    call()
                except OSError:
                    continue
                raise AssertionError("a replicated put with a node down succeeded")
        """, replicas=2)


def test_layer_streaming_identical(daemon_factory):
    d = mem_node(daemon_factory, capacity="64M")
    run_py(d.addr, """
        import strata.pytorch
        from strata.offload import put_module, load_module
        offload = strata.pytorch.offload
        torch.manual_seed(0)
        def make():
            return torch.nn.Sequential(*[torch.nn.Sequential(
                torch.nn.Linear(48, 48), torch.nn.LayerNorm(48), torch.nn.ReLU())
                for _ in range(6)]).eval()
        m = make()
        x = torch.randn(5, 48)
        with torch.no_grad():
            ref = m(x)
        h = offload(m, pool, prefix="m1")
        assert h.resident_bytes() == 0
        with torch.no_grad():
            assert torch.equal(m(x), ref) and torch.equal(m(x), ref)
        assert h.resident_bytes() == 0 and h.fetches >= 12
        h.remove()
        with torch.no_grad():
            assert torch.equal(m(x), ref)
        put_module(pool, "A", m)
        m2 = make()
        load_module(pool, "A", m2)
        with torch.no_grad():
            assert torch.equal(m2(x), ref)
    """)


def test_empty_value_owned_once(daemon_factory):
    """An empty value is stored in a buffer of its own: the PUT must not
    also hand that buffer back to the allocator, or the next value of its
    size class would land in it and a later remove would free it twice."""
    d = mem_node(daemon_factory)
    run_py(d.addr, """
        pool["empty"] = b""
        a, b = bytes([0xaa]) * 4096, bytes([0xbb]) * 4096
        pool["a"] = a
        assert pool["empty"] == b""
        del pool["empty"]
        pool["b"] = b
        pool["c"] = bytes([0xcc]) * 4096
        assert pool["a"] == a and pool["b"] == b
    """)


def test_mget_value_larger_than_its_buffer(daemon_factory):
    """A batch get sizes its request by the sum of the buffers: a value
    larger than its own buffer but within that sum is -ENOBUFS (with its
    length) for that item, and nothing lands past the buffer's end."""
    d = mem_node(daemon_factory)
    run_py(d.addr, """
        import errno
        pool["big"] = b"B" * 100
        pool["small"] = b"s" * 5
        whole = bytearray(b"\\x11" * 1000)
        mv = memoryview(whole)
        try:
            pool.mget_into({"big": mv[0:10], "small": mv[200:1000]})
            raise SystemExit("no error, expected ENOBUFS")
        except OSError as e:
            assert e.errno == errno.ENOBUFS, e
        assert whole[10:200] == b"\\x11" * 190, "written past the buffer"
        assert pool.mget_into({"big": mv[0:100], "small": mv[200:205]}) == {"big": 100, "small": 5}
        assert whole[0:100] == b"B" * 100 and whole[200:205] == b"s" * 5
    """)


def test_direct_calls_many_threads_and_fallback(daemon_factory):
    """Synchronous calls run on the caller's thread over a lane; with more
    threads than lanes (STRATA_TEST_MEM_LANES=2: most calls go through the
    reactor threads) every value is still read whole and right, and an
    async get in flight does not disturb a synchronous call."""
    d = mem_node(daemon_factory)
    run_py(d.addr, """
        import threading
        def hammer(p, tag, nthreads):
            errors = []
            def worker(tid):
                buf = np.empty(64 << 10, np.uint8)
                for i in range(150):
                    k = "%s/%d/%d" % (tag, tid, i % 10)
                    n = 1024 * (1 + (tid + i) % 64)
                    p.put(k, np.full(n, (tid + i) & 0xff, np.uint8))
                    got = p.get_into(k, buf)
                    if got != n or not (buf[:got] == ((tid + i) & 0xff)).all():
                        errors.append((k, got))
                    if i % 10 == 9:
                        keys = ["%s/%d/%d" % (tag, tid, j) for j in range(10)]
                        vals = p.mget(keys)
                        if sorted(vals) != sorted(keys) or any(len(v) == 0 for v in vals.values()):
                            errors.append(("mget", tid, i))
            ts = [threading.Thread(target=worker, args=(t,)) for t in range(nthreads)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            assert not errors, errors[:5]
        hammer(pool, "lanes", 12)
        os.environ["STRATA_TEST_MEM_LANES"] = "2"
        few = sm.Pool(os.environ["STRATA_MEM"])
        hammer(few, "few", 12)
        os.environ["STRATA_TEST_MEM_LANES"] = "0"
        none = sm.Pool(os.environ["STRATA_MEM"])
        hammer(none, "none", 4)

        # A synchronous call while an async get is in flight.
        pool.put("big", np.full(16 << 20, 7, np.uint8))
        pool.put("small", b"s" * 100)
        big = np.empty(16 << 20, np.uint8)
        op = pool.get_async("big", big)
        assert pool.get("small") == b"s" * 100
        assert op.wait() == 16 << 20 and (big == 7).all()
    """, timeout=240)


def test_direct_call_timeout_and_node_killed_mid_call(daemon_factory):
    """A stopped node: a call ends with -ETIMEDOUT at the pool's timeout;
    a node killed while a call waits on it: the call fails at once with a
    connection error, not the timeout."""
    d = mem_node(daemon_factory)
    run_py(d.addr, """
        import errno, signal, threading
        pid = %d
        pool.put("k", b"v" * 4096)
        short = sm.Pool(os.environ["STRATA_MEM"], timeout_ms=300)
        assert short.get("k") == b"v" * 4096
        os.kill(pid, signal.SIGSTOP)
        try:
            short.get("k")
            raise SystemExit("a get from a stopped node did not time out")
        except OSError as e:
            assert e.errno == errno.ETIMEDOUT, e
        os.kill(pid, signal.SIGCONT)
        assert short.get("k") == b"v" * 4096

        slow = sm.Pool(os.environ["STRATA_MEM"], timeout_ms=60000)
        ready, go, out = threading.Event(), threading.Event(), []
        def caller():
            assert slow.get("k") == b"v" * 4096   # this thread's lane is connected
            ready.set()
            go.wait()
            try:
                out.append(slow.get("k"))
            except OSError as e:
                out.append(e)
        t = threading.Thread(target=caller)
        t.start()
        assert ready.wait(30)
        os.kill(pid, signal.SIGSTOP)
        go.set()
        t.join(0.5)            # the get is written and waits on the stopped node
        assert t.is_alive()
        os.kill(pid, signal.SIGKILL)
        t.join(30)
        assert not t.is_alive(), "the get hung after its node was killed"
        e = out[0]
        assert isinstance(e, OSError) and e.errno in (errno.ECONNRESET, errno.EPIPE), e
    """ % d.pid, timeout=120)
