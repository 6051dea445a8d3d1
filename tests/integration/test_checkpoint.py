"""strata.checkpoint and the C checkpoint API against a local cluster:
bitwise round trips (into new and existing tensors), async save while
training goes on, sharded save and load from 4 processes, keep-last-N, a
save killed mid-way leaving the previous checkpoint loadable, corruption
detected, a checkpoint written through the C API directly (no meta);
restores bitwise for every dtype, non-contiguous and empty tensors (and
the snapshot copy at any alignment);
the parallel writers' round trips around every boundary they cut at, a
3-rank burst killed in every rank, and 'bench ckpt --ranks' (structure)."""
import re
import signal
import textwrap
import time

import pytest

from conftest import REPO, STRATA, run, spawn
from test_python import PY, py_env, run_py, pytestmark  # noqa: F401


@pytest.mark.timeout(120)
def test_roundtrip_async_keep_last_c_api(cluster):
    c = cluster(3)
    run_py(c, """
        import ctypes, time
        import numpy as np, torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        c.makedirs("/ck")
        torch.manual_seed(1)
        m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
        m[2].to(torch.bfloat16)
        opt = torch.optim.Adam(m[0].parameters())
        m[0](torch.randn(3, 64)).sum().backward(); opt.step()
        state = {"model": m.state_dict(), "opt": opt.state_dict(), "step": 12, "lr": 0.5,
                 "nan": float("inf"), "arr": np.arange(7, dtype=np.int16), "t": (1, "x"),
                 "empty": torch.empty(0), "scalar": torch.tensor(3.5, dtype=torch.float64)}
        def same(a, b):
            assert a.dtype == b.dtype and a.shape == b.shape
            return a.reshape(-1).view(torch.uint8).equal(b.reshape(-1).view(torch.uint8)) \
                if a.numel() else True
        h = ck.save(state, "/ck/a", client=c)
        assert h.wait() == "/ck/a"
        out = ck.load("/ck/a", client=c)
        for k, v in m.state_dict().items():
            assert same(out["model"][k], v), k
        assert out["step"] == 12 and out["lr"] == 0.5 and out["nan"] == float("inf")
        assert out["t"] == (1, "x") and out["arr"].tolist() == list(range(7))
        assert same(out["opt"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
        assert out["opt"]["param_groups"][0]["lr"] == opt.state_dict()["param_groups"][0]["lr"]
        assert same(out["scalar"], state["scalar"])
        # into existing tensors (in place, bitwise), and a sync save straight from them
        m2 = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
        m2[2].to(torch.bfloat16)
        ck.save(m.state_dict(), "/ck/b", client=c, async_=False)
        sd2 = m2.state_dict()
        ptrs = {k: v.data_ptr() for k, v in sd2.items()}
        back = ck.load("/ck/b", into=sd2, client=c)
        for k, v in m.state_dict().items():
            assert same(m2.state_dict()[k], v) and back[k].data_ptr() == ptrs[k], k
        # async: the save returns after the snapshot; training goes on
        big = {"w%d" % i: torch.randn(256, 1024) for i in range(8)}       # 8 MiB
        want = {k: v.clone() for k, v in big.items()}
        t0 = time.perf_counter(); h = ck.save(big, "/ck/c", client=c); stall = time.perf_counter() - t0
        for v in big.values():
            v.mul_(-2)               # the next training step
        h.wait(); total = time.perf_counter() - t0
        print("stall %.4f s, save %.4f s" % (stall, total))
        out = ck.load("/ck/c", client=c)
        assert all(same(out[k], want[k]) for k in want)
        # replace=False refuses; replace (default) swaps atomically
        try:
            ck.save({"x": torch.ones(1)}, "/ck/c", client=c, replace=False).wait()
            raise SystemExit("replace=False overwrote")
        except FileExistsError:
            pass
        # keep-last-N
        c.makedirs("/ck/run")
        for i in range(5):
            ck.save({"x": torch.full((3,), i)}, "/ck/run/step-%04d" % i, client=c, keep_last=2)
        ck.wait_all()
        assert sorted(c.listdir("/ck/run")) == ["step-0003", "step-0004"]
        assert ck.latest("/ck/run", client=c) == "/ck/run/step-0004"
        assert ck.load(ck.latest("/ck/run", client=c), client=c)["x"].tolist() == [4, 4, 4]
        # the C API directly: no meta -> a flat dict
        L = ck._lib()
        data = (ctypes.c_float * 6)(*range(6)); shape = (ctypes.c_int64 * 2)(2, 3)
        t = ck._Tensor(b"w", b"float32", 2, ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                       ctypes.addressof(data), 24)
        assert L.strata_ckpt_save(c.handle, b"/ck/capi", ctypes.byref(t), 1, None) == 0
        out = ck.load("/ck/capi", client=c)
        assert list(out) == ["w"] and out["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
        with ck.Checkpoint("/ck/capi", c) as k:
            assert k.world_size == 1 and k.tensors[0]["crc32c"] == ck.crc32c(bytes(data))
        # corruption is detected on load
        with c.open("/ck/capi/shard-00000.bin", "r+b") as f:
            f.pwrite(b"\\xff", 0)
        try:
            ck.load("/ck/capi", client=c)
            raise SystemExit("corruption not detected")
        except OSError as e:
            assert "/ck/capi" in str(e), e
        print("OK")
    """)


@pytest.mark.timeout(150)
def test_sharded_save_load_4_processes(cluster):
    c = cluster(3)
    env = py_env(c.dir)
    code = textwrap.dedent("""
        import sys, torch
        import strata, strata.checkpoint as ck
        r = int(sys.argv[1])
        torch.manual_seed(r)
        state = {"rank%d.w" % r: torch.randn(1000 + r), "shared.b": torch.full((4,), float(r)),
                 "step": 9}
        ck.save(state, "/ck/sharded", client=strata.Client(), rank=r, world_size=4,
                tag="t1", async_=(r % 2 == 0))
        ck.wait_all()
    """)
    run_py(c, "import strata; strata.Client().makedirs('/ck')")
    procs = [spawn([PY, "-c", code, str(r)], env=env) for r in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-4000:]
    run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        assert c.listdir("/ck") == ["sharded"]
        with ck.Checkpoint("/ck/sharded", c) as k:
            assert k.world_size == 4 and len(k.tensors) == 8
        for r in range(4):
            torch.manual_seed(r)
            mine = ck.load("/ck/sharded", client=c, rank=r)
            assert torch.equal(mine["rank%d.w" % r], torch.randn(1000 + r))
            assert mine["shared.b"].tolist() == [float(r)] * 4 and mine["step"] == 9
        merged = ck.load("/ck/sharded", client=c)
        assert sorted(k for k in merged if k.startswith("rank")) == ["rank%d.w" % r for r in range(4)]
        print("OK")
    """)


@pytest.mark.timeout(150)
def test_killed_save_leaves_previous(cluster):
    c = cluster(3)
    run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client(); c.makedirs("/ck")
        ck.save({"v": torch.arange(1000)}, "/ck/model", client=c).wait()
    """)
    # A big save, killed while it writes in the background: as soon as its
    # partial directory shows in the namespace (the save's own thread
    # creates it; writing 96 MiB at R=3 takes far longer than the kill).
    code = textwrap.dedent("""
        import sys, time, torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        state = {"w%d" % i: torch.full((1 << 20,), float(i)) for i in range(24)}   # 96 MiB
        h = ck.save(state, "/ck/model", client=c, depth=2, io_size=1 << 20)
        print("snapshot", flush=True)
        while not [n for n in c.listdir("/ck") if ".tmp-" in n]:
            time.sleep(0.001)
        print("partial", flush=True)
        h.wait()
        print("committed", flush=True)
    """)
    p = spawn([PY, "-c", code], env=py_env(c.dir))
    for want in ("snapshot", "partial"):
        line = p.stdout.readline().decode()
        assert line.startswith(want), line + p.stderr.read().decode()[-3000:]
    p.send_signal(signal.SIGKILL)
    out, _ = p.communicate(timeout=30)
    assert b"committed" not in out, "the save committed before the kill"
    out = run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        names = sorted(c.listdir("/ck"))
        print(names)
        assert "model" in names
        assert [n for n in names if ".tmp-" in n], "the killed save left no partial dir: too fast?"
        out = ck.load("/ck/model", client=c)
        assert list(out) == ["v"] and torch.equal(out["v"], torch.arange(1000))
        assert ck.latest("/ck", client=c) == "/ck/model"
        # the partial directory goes only once it is old enough
        assert ck.clean_partial("/ck", older_than=3600, client=c) == 0
        assert [n for n in c.listdir("/ck") if ".tmp-" in n]
        assert ck.clean_partial("/ck", older_than=0, client=c) == 1
        assert sorted(c.listdir("/ck")) == ["model"], c.listdir("/ck")
        # a commit that died between its renames: no NAME, the old one in
        # NAME.old-T, the new one in NAME.tmp-T; both may be the only
        # copies and stay. A first save that died (no NAME, no .old-) goes.
        for d in ("/ck2/m.old-T", "/ck2/m.tmp-T", "/ck2/n.tmp-U"):
            c.makedirs(d)
        assert ck.clean_partial("/ck2", older_than=0, client=c) == 1
        assert sorted(c.listdir("/ck2")) == ["m.old-T", "m.tmp-T"], c.listdir("/ck2")
        try:
            ck.clean_partial("/ck", older_than=-1, client=c)
            raise AssertionError("a negative age was taken")
        except ValueError:
            pass
        # the next save after the crash commits normally
        ck.save({"v": torch.ones(2)}, "/ck/model", client=c).wait()
        assert ck.load("/ck/model", client=c)["v"].tolist() == [1.0, 1.0]
        print("OK")
    """)
    assert "OK" in out


@pytest.mark.timeout(150)
def test_parallel_writers_roundtrip_sizes(cluster):
    # Tensors around every boundary the writers cut at (4 KiB alignment,
    # a 64 KiB chunk, the io size) and several chunks long, written by 4
    # writers, by 1, and with pieces smaller than a chunk; each loads back
    # bitwise (load checks every CRC32C, combined from the pieces').
    c = cluster(3)
    out = run_py(c, """
        import numpy as np, torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        c.makedirs("/ckw")
        c.set_layout("/ckw", chunk_size=64 << 10)
        rng = np.random.default_rng(7)
        sizes = [0, 1, 4095, 4096, 4097, 65535, 65536, 65537, 200001, (1 << 20) + 123,
                 (3 << 20) + 5]
        state = {"t%d" % i: torch.from_numpy(rng.integers(0, 256, n, dtype=np.uint8))
                 for i, n in enumerate(sizes)}
        state["bf16"] = torch.randn(513, 257).to(torch.bfloat16)
        state["i64"] = torch.arange(70000, dtype=torch.int64)
        for name, kw in (("w4", dict(writers=4, depth=8)), ("w1", dict(writers=1)),
                         ("small-io", dict(writers=3, depth=6, io_size=16 << 10)),
                         ("big-io", dict(writers=8, depth=64, io_size=1 << 20))):
            for async_, overlap in ((False, False), (True, False), (True, True)):
                st = {}
                h = ck.save(state, "/ckw/" + name, client=c, async_=async_, overlap=overlap,
                            stats=st, **kw)
                if h:
                    h.wait()
                back = ck.load("/ckw/" + name, client=c)
                assert sorted(back) == sorted(state), name
                for k, v in state.items():
                    assert v.dtype == back[k].dtype and v.shape == back[k].shape, (name, k)
                    assert v.view(torch.uint8).numpy().tobytes() == \
                        back[k].view(torch.uint8).numpy().tobytes(), (name, k)
                assert st["writers"] == kw.get("writers", 4), (name, st)
                # every piece lies within one 64 KiB chunk
                assert st["pieces"] >= sum(-(-n // (64 << 10)) for n in sizes), (name, st)
                assert st["bytes"] >= sum(sizes)
        # A snapshot that fails midway abandons the save already writing
        # its first tensors: nothing is committed, the next save is clean.
        # (without overlap the snapshot is one batch of copies: it fails
        # at the first; with overlap, one call per tensor: at the sixth)
        real, calls = ck._copy, [0]
        def failing(copies, threads=0):
            calls[0] += 1
            if calls[0] == fail_at:
                raise MemoryError("injected")
            return real(copies, threads)
        for overlap, fail_at in ((False, 1), (True, 6)):
            calls[0] = 0
            ck._copy = failing
            try:
                ck.save(state, "/ckw/w4", client=c, writers=4, overlap=overlap)
                raise AssertionError("the failed snapshot was not raised")
            except MemoryError:
                pass
            finally:
                ck._copy = real
        ck.wait_all()
        back = ck.load("/ckw/w4", client=c)
        assert all(torch.equal(back[k].view(torch.uint8), v.view(torch.uint8))
                   for k, v in state.items())
        ck.save({"x": torch.ones(3)}, "/ckw/w4", client=c).wait()
        assert ck.load("/ckw/w4", client=c)["x"].tolist() == [1.0] * 3
        print("OK")
    """, timeout=140)
    assert "OK" in out


@pytest.mark.timeout(150)
def test_restore_bitwise_dtypes_views_empty(cluster):
    # Every dtype, non-contiguous and zero-size tensors, a numpy array,
    # tensors across chunk boundaries: saved (async, with several snapshot
    # threads and with one; sync) and restored into new tensors and into
    # existing ones (read straight into them, or through a copy for a
    # non-contiguous one), each identical in dtype, shape and bytes.
    c = cluster(3)
    out = run_py(c, """
        import numpy as np, torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        c.makedirs("/ckr")
        c.set_layout("/ckr", chunk_size=64 << 10)
        g = torch.Generator().manual_seed(3)
        def rnd(*shape):
            return torch.randn(*shape, generator=g)
        state = {
            "f32": rnd(300, 257), "f64": rnd(70001).double(), "f16": rnd(129, 65).half(),
            "bf16": rnd(1000, 33).to(torch.bfloat16),
            "i8": torch.randint(-128, 127, (4097,), dtype=torch.int8, generator=g),
            "u8": torch.randint(0, 255, (65537,), dtype=torch.uint8, generator=g),
            "i16": torch.randint(-999, 999, (3, 5, 7), dtype=torch.int16, generator=g),
            "i32": torch.randint(-2**31, 2**31 - 1, (33333,), dtype=torch.int32, generator=g),
            "i64": torch.arange(-5, 200000, dtype=torch.int64),
            "bool": torch.rand(1001, generator=g) > 0.5,
            "c64": torch.complex(rnd(513), rnd(513)),
            "scalar": torch.tensor(-0.0), "empty": torch.empty(0, 4), "empty3": torch.zeros(2, 0, 3),
            "t": rnd(200, 300).t(), "strided": rnd(64, 1024)[:, ::3], "row": rnd(5, 70000)[2],
            "np": np.arange(12345, dtype=np.float32).reshape(5, 2469)[:, ::2],
        }
        def same(a, b, k):
            if isinstance(a, np.ndarray):
                assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, k
                assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), k
                return
            assert a.dtype == b.dtype and a.shape == b.shape, (k, a.dtype, b.dtype, a.shape, b.shape)
            assert a.contiguous().view(-1).view(torch.uint8).equal(
                b.contiguous().view(-1).view(torch.uint8)), k
        for name, kw in (("async4", dict(snapshot_threads=4)),
                         ("async1", dict(snapshot_threads=1)),
                         ("overlap", dict(overlap=True)), ("sync", dict(async_=False))):
            h = ck.save(state, "/ckr/" + name, client=c, **kw)
            if h:
                h.wait()
            back = ck.load("/ckr/" + name, client=c)
            assert sorted(back) == sorted(state), name
            for k, v in state.items():
                same(v, back[k], (name, k))
            # into existing tensors: contiguous ones are read into directly
            into = {k: (torch.empty_like(v, memory_format=torch.contiguous_format)
                        if not isinstance(v, np.ndarray) else None) for k, v in state.items()}
            into["t"] = torch.empty(200, 300).t()       # non-contiguous: through a copy
            ptrs = {k: v.data_ptr() for k, v in into.items() if v is not None}
            back = ck.load("/ckr/" + name, into={k: v for k, v in into.items() if v is not None},
                           client=c)
            for k, v in state.items():
                same(v, back[k], (name, "into", k))
                if into[k] is not None:
                    assert back[k] is into[k] and into[k].data_ptr() == ptrs[k], k
        # the snapshot copy at any alignment and length, by 1 and 3 threads
        import ctypes, os
        src = bytearray(os.urandom((9 << 20) + 77))
        dst = bytearray(len(src) + 64)
        sa = ctypes.addressof((ctypes.c_char * len(src)).from_buffer(src))
        da = ctypes.addressof((ctypes.c_char * len(dst)).from_buffer(dst))
        for shift, n in ((0, len(src) - 1), (1, len(src) - 2), (15, (256 << 10) + 3), (17, 100),
                         (33, 0)):
            for threads in (1, 3):
                dst[:] = bytes(len(dst))
                ck._copy([(da + shift, sa + 1, n), (da + shift + n, sa, 0)], threads)
                assert dst[shift:shift + n] == src[1:1 + n], (shift, n, threads)
                assert not any(dst[:shift]) and not any(dst[shift + n:]), (shift, n, threads)
        # tensors of one rank read by several readers, in any order
        with ck.Checkpoint("/ckr/sync", c) as cp:
            pairs = [(t["index"], torch.empty(t["length"], dtype=torch.uint8))
                     for t in reversed(cp.tensors)]
            cp.read(pairs, depth=3)
            for (i, b) in pairs:
                assert ck.crc32c(b) == cp.tensors[i]["crc32c"], cp.tensors[i]["name"]
        print("OK")
    """, timeout=140)
    assert "OK" in out


@pytest.mark.timeout(200)
def test_burst_killed_in_every_rank_leaves_previous(cluster):
    # A committed 3-rank checkpoint, then a 3-rank burst replacing it,
    # every rank SIGKILLed once its shard is being written, rank 0 (which
    # commits) before it could: the previous checkpoint still loads, and
    # its files are byte for byte the same.
    c = cluster(3)
    run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client(); c.makedirs("/ck")
        for r in (1, 2, 0):        # rank 0 last: it waits for the others' parts
            torch.manual_seed(r)
            ck.save({"r%d" % r: torch.randn(5000 + r)}, "/ck/model", client=c, rank=r,
                    world_size=3, tag="t0", async_=False)
    """)
    digest = """
        import hashlib
        import strata
        c = strata.Client()
        for n in sorted(c.listdir("/ck/model")):
            with c.open("/ck/model/" + n, "rb") as f:
                print(n, hashlib.sha256(f.read()).hexdigest())
    """
    before = run_py(c, digest)
    code = textwrap.dedent("""
        import sys, time, torch
        import strata, strata.checkpoint as ck
        r = int(sys.argv[1])
        c = strata.Client()
        state = {"w%d" % i: torch.full((1 << 20,), float(r * 100 + i)) for i in range(16)}
        h = ck.save(state, "/ck/model", client=c, rank=r, world_size=3, tag="burst",
                    writers=2, depth=2, io_size=256 << 10)
        print("snapshot", flush=True)
        mine = "shard-%05d.bin" % r
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if mine in c.listdir("/ck/model.tmp-burst"):
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.001)
        print("partial", flush=True)
        h.wait()
        print("committed", flush=True)
    """)
    procs = [spawn([PY, "-c", code, str(r)], env=py_env(c.dir)) for r in range(3)]
    # Each rank is killed as soon as its shard is on its way; rank 0 first,
    # the one that commits (after every part): a rank 1 or 2 may finish
    # its part in the meantime (the writes are fast), which commits
    # nothing, but rank 0 never gets to commit the burst.
    for p in procs:
        for want in ("snapshot", "partial"):
            line = p.stdout.readline().decode()
            assert line.startswith(want), line + p.stderr.read().decode()[-3000:]
        p.send_signal(signal.SIGKILL)
    outs = [p.communicate(timeout=30)[0] for p in procs]
    assert b"committed" not in outs[0], "rank 0 committed the burst before the kill"
    after = run_py(c, digest)
    assert after == before, (before, after)
    out = run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        names = sorted(c.listdir("/ck"))
        assert names == ["model", "model.tmp-burst"], names
        back = ck.load("/ck/model", client=c)
        for r in range(3):
            torch.manual_seed(r)
            assert torch.equal(back["r%d" % r], torch.randn(5000 + r)), r
        assert ck.clean_partial("/ck", older_than=0, client=c) == 1
        assert c.listdir("/ck") == ["model"]
        print("OK")
    """)
    assert "OK" in out


@pytest.mark.timeout(300)
def test_bench_ckpt_ranks_smoke():
    # Structure only (no timing): two ranks, R=1 and R=3, tiny shards.
    r = run([str(STRATA), "bench", "ckpt", "--ranks", "2", "--size-mib", "1", "--repeat", "1"],
            timeout=280, env=py_env())
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    for R in (1, 3):
        assert re.search(r"R=%d ranks=2: aggregate commit +[0-9.]+ GB/s .*\| local "
                         r"torch.save\+fsync +[0-9.]+ GB/s .*\| ratio [0-9.]+" % R, r.stdout), \
            r.stdout
        for k in range(2):
            assert re.search(r"R=%d ranks=2: rank %d stall [0-9.]+ s \| local "
                             r"torch.save\+fsync [0-9.]+ s \| ratio 1/[0-9]+" % (R, k),
                             r.stdout), r.stdout


def _have_cuda():
    import subprocess
    r = subprocess.run([PY, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                       capture_output=True)
    return r.returncode == 0


@pytest.mark.timeout(120)
@pytest.mark.skipif(not _have_cuda(), reason="no CUDA device: GPU snapshot/restore not exercised")
def test_cuda_roundtrip(cluster):
    c = cluster(3)
    run_py(c, """
        import torch
        import strata, strata.checkpoint as ck
        c = strata.Client(); c.makedirs("/ck")
        sd = {"w": torch.randn(1000, 100, device="cuda").to(torch.bfloat16)}
        want = sd["w"].cpu().clone()
        h = ck.save(sd, "/ck/g", client=c); sd["w"].zero_(); h.wait()
        into = {"w": torch.empty(1000, 100, device="cuda", dtype=torch.bfloat16)}
        ck.load("/ck/g", into=into, client=c)
        assert torch.equal(into["w"].cpu().view(torch.int16), want.view(torch.int16))
        print("OK")
    """)
