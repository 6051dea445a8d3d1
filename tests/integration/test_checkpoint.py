"""strata.checkpoint and the C checkpoint API against a local cluster:
bitwise round trips (into new and existing tensors), async save while
training goes on, sharded save and load from 4 processes, keep-last-N, a
save killed mid-way leaving the previous checkpoint loadable, corruption
detected, a checkpoint written through the C API directly (no meta)."""
import signal
import textwrap
import time

import pytest

from conftest import REPO, spawn
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
