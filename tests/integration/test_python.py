"""python/strata against a local cluster: the file API into every buffer
type, errors as OSError subclasses, fork safety, datasets with DataLoader
workers (every sample exactly once, in the seeded order, resumable
mid-epoch, split across ranks), `strata pack`, `strata bench train`.

Each scenario runs in a child /usr/bin/python3: an ASan build of
libstrata needs the sanitizer runtime preloaded (LD_PRELOAD), which only
a fresh process can have.
"""
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import BUILD, REPO, run

PY = "/usr/bin/python3"


def _have_torch():
    r = subprocess.run([PY, "-c", "import torch, numpy"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _have_torch(),
                                reason="needs Debian's python3-torch and python3-numpy")


def lib_path():
    return BUILD / "libstrata.so"


def py_env(cluster_dir=None):
    """Environment of a child Python using the build's libstrata (and the
    cluster in cluster_dir, when given)."""
    lib = lib_path()
    env = {"PYTHONPATH": str(REPO / "python"), "STRATA_LIB": str(lib)}
    if cluster_dir is not None:
        env["STRATA_MGMT"] = str(cluster_dir)
    ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
    if "libasan" in ldd:
        pre = []
        for name in ("libasan.so", "libstdc++.so"):
            p = subprocess.run(["gcc", "-print-file-name=" + name], capture_output=True,
                               text=True).stdout.strip()
            if p and os.path.exists(p):
                pre.append(p)
        env["LD_PRELOAD"] = " ".join(pre)
        # Python and torch are not ASan-clean about leaks at exit.
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def run_py(cluster, code, timeout=90, env=None):
    """Runs code in a child Python against cluster; asserts it exits 0.
    Returns its stdout."""
    e = py_env(cluster.dir)
    e.update(env or {})
    r = run([PY, "-c", textwrap.dedent(code)], timeout=timeout, env=e)
    assert r.returncode == 0, "child python failed (%d):\n%s\n%s" % (r.returncode, r.stdout,
                                                                    r.stderr[-6000:])
    return r.stdout


@pytest.mark.timeout(120)
def test_file_api_buffers_errors_fork(cluster):
    c = cluster(3)
    out = run_py(c, """
        import errno, os
        import numpy as np, torch
        import strata
        c = strata.Client()
        c.makedirs("/t/a/b")
        c.makedirs("/t/a/b", exist_ok=True)
        data = os.urandom((2 << 20) + 12345)
        with c.open("/t/a/f.bin", "wb") as f:
            assert f.write(data[:1000]) == 1000
            assert f.write(memoryview(data)[1000:]) == len(data) - 1000
        assert c.stat("/t/a/f.bin").st_size == len(data)
        assert c.stat("/t/a").is_dir() and c.isfile("/t/a/f.bin")
        with c.open("/t/a/f.bin", "rb") as f:
            assert f.read() == data
            f.seek(7)
            ba = bytearray(5000); assert f.readinto(ba) == 5000 and ba == data[7:5007]
            assert f.tell() == 5007
            mv = memoryview(bytearray(300)); f.readinto(mv[100:200])
            assert bytes(mv[100:200]) == data[5007:5107]
            arr = np.zeros((64, 64), np.uint8); f.seek(3); f.readinto(arr)
            assert arr.tobytes() == data[3:3 + 4096]
            t = torch.zeros(1000, dtype=torch.float32); f.seek(0); f.readinto(t)
            assert t.numpy().tobytes() == data[:4000]
            f.seek(-10, 2); assert f.read() == data[-10:]
            assert f.read(5) == b""
            big = torch.empty(len(data) + 100, dtype=torch.uint8)
            assert f.pread_into(big, 0) == len(data)
            try:
                f.readinto(b"immutable"); raise SystemExit("bytes accepted")
            except TypeError:
                pass
        # write from numpy and a tensor, append mode
        with c.open("/t/a/g.bin", "wb") as f:
            f.write(np.arange(10, dtype=np.int32)); f.write(torch.arange(5, dtype=torch.int64))
        with c.open("/t/a/g.bin", "ab") as f:
            f.write(b"tail")
        g = c.read_bytes("/t/a/g.bin")
        assert g == np.arange(10, dtype=np.int32).tobytes() + torch.arange(5).numpy().tobytes() + b"tail"
        # batch reads into caller buffers
        bufs = [np.empty(777, np.uint8) for _ in range(100)]
        res = c.read_batch([("/t/a/f.bin", i * 9000, bufs[i]) for i in range(100)], depth=16)
        assert res == [777] * 100
        assert all(bufs[i].tobytes() == data[i * 9000:i * 9000 + 777] for i in range(100))
        # namespace
        c.rename("/t/a/g.bin", "/t/a/h.bin")
        assert sorted(c.listdir("/t/a")) == ["b", "f.bin", "h.bin"]
        c.remove("/t/a/h.bin")
        def expect(exc, fn, path, code=None):
            try:
                fn()
            except exc as e:
                assert path in str(e), (path, str(e))
                assert code is None or e.errno == code, e
                print(type(e).__name__, e)
                return
            raise SystemExit("no %s for %s" % (exc.__name__, path))
        expect(FileNotFoundError, lambda: c.open("/t/nope"), "/t/nope")
        expect(FileNotFoundError, lambda: c.stat("/t/nope/x"), "/t/nope/x")
        expect(FileExistsError, lambda: c.mkdir("/t/a"), "/t/a")
        expect(FileExistsError, lambda: c.open("/t/a/f.bin", "xb"), "/t/a/f.bin")
        expect(IsADirectoryError, lambda: c.open("/t/a", "wb"), "/t/a")
        expect(NotADirectoryError, lambda: c.open("/t/a/f.bin/x"), "/t/a/f.bin/x")
        expect(NotADirectoryError, lambda: c.listdir("/t/a/f.bin"), "/t/a/f.bin")
        expect(OSError, lambda: c.rmdir("/t/a"), "/t/a", errno.ENOTEMPTY)
        expect(FileNotFoundError, lambda: c.rename("/t/x", "/t/y"), "/t/x")
        # after fork the child reconnects on its own
        pid = os.fork()
        if pid == 0:
            try:
                ok = c.read_bytes("/t/a/f.bin") == data and "b" in c.listdir("/t/a")
                os._exit(0 if ok else 1)
            except BaseException:
                os._exit(2)
        assert os.waitpid(pid, 0)[1] == 0
        assert c.listdir("/t/a/b") == []
        c.rmtree("/t")
        assert not c.exists("/t")
        print("OK")
    """)
    assert "FileNotFoundError" in out and out.rstrip().endswith("OK")


@pytest.mark.timeout(150)
def test_datasets_workers_order_resume_ranks(cluster):
    c = cluster(3)
    run_py(c, """
        import torch
        import strata, strata.pytorch as st
        from strata.dataset import ShardWriter, SampleIndex, epoch_order
        c = strata.Client()
        N = 48
        def sample(i): return bytes([i % 251]) * (50 + 31 * i) + i.to_bytes(4, "little")
        c.makedirs("/ds/files")
        for i in range(N):
            c.write_bytes("/ds/files/s%04d" % i, sample(i))
        with ShardWriter(c, "/ds/packed", samples_per_shard=10) as w:
            for i in range(N):
                assert w.add(sample(i)) == i
        assert len(c.listdir("/ds/packed")) == 2 * 5 + 1
        ident = lambda b: int.from_bytes(bytes(b[-4:]), "little")
        coll = lambda x: x
        for src in ("/ds/files", "/ds/packed"):
            for i in (0, 17, N - 1):
                assert bytes(SampleIndex.open(c, src).read(c, i)) == sample(i)
            want = epoch_order(N, 5, 2).tolist()
            assert sorted(want) == list(range(N)) and want != epoch_order(N, 5, 3).tolist()
            # iterable, prefetching, 2 workers, the batch size given once (to the loader):
            # the seeded order exactly, each sample once
            ds = st.StrataIterableDataset(src, c, seed=5, epoch=2, depth=8)
            got = [ident(s) for b in st.DataLoader(ds, batch_size=4, num_workers=2,
                                                   collate_fn=coll) for s in b]
            assert got == want, (src, got, want)
            # torch's own DataLoader with workers needs it on the dataset (the old form)
            ds_old = st.StrataIterableDataset(src, c, batch_size=4, seed=5, epoch=2)
            got = [ident(s) for b in torch.utils.data.DataLoader(ds_old, batch_size=4,
                   num_workers=2, collate_fn=coll) for s in b]
            assert got == want
            try:
                list(torch.utils.data.DataLoader(st.StrataIterableDataset(src, c), batch_size=4,
                                                 num_workers=2, collate_fn=coll))
            except ValueError as e:
                assert "batch size" in str(e), e
            else:
                raise AssertionError("workers without a batch size kept no order")
            # content intact; iterating in this process keeps the position
            ds1 = st.StrataIterableDataset(src, c, seed=5, epoch=2)
            for s in ds1:
                assert bytes(s.numpy()) == sample(ident(s))
            assert ds1.state_dict() == {"epoch": 2, "position": N, "seed": 5}
            # resume a DataLoader mid-epoch: 5 batches, state_dict(), a new loader
            loader = st.DataLoader(st.StrataIterableDataset(src, c, seed=5, epoch=2),
                                   batch_size=4, num_workers=2, collate_fn=coll)
            first = []
            for k, b in enumerate(loader):
                first += [ident(s) for s in b]
                if k == 4:
                    break
            state = loader.state_dict()
            assert state == {"epoch": 2, "position": 20, "seed": 5}, state
            loader2 = st.DataLoader(st.StrataIterableDataset(src, c), batch_size=4,
                                    num_workers=2, collate_fn=coll)
            loader2.load_state_dict(state)
            rest = [ident(s) for b in loader2 for s in b]
            assert first + rest == want and loader2.state_dict()["position"] == N
            # the old call form: state_dict(position)
            ds2 = st.StrataIterableDataset(src, c, batch_size=4)
            ds2.load_state_dict(ds.state_dict(position=20))
            got2 = [ident(s) for b in torch.utils.data.DataLoader(ds2, batch_size=4, num_workers=2,
                                                                 collate_fn=coll) for s in b]
            assert got2 == want[20:]
            # map-style with the resumable sampler, 2 workers, resumed mid-epoch
            m = st.StrataDataset(src, c)
            lm = st.DataLoader(m, batch_size=4, sampler=st.ResumableSampler(len(m), seed=5, epoch=2),
                               num_workers=2, collate_fn=coll)
            it = iter(lm)
            first = [ident(s) for _ in range(3) for s in next(it)]
            state = lm.state_dict()
            assert state["position"] == 12, state      # not what the workers prefetched
            del it
            lm2 = st.DataLoader(m, batch_size=4, sampler=st.ResumableSampler(len(m)),
                                num_workers=2, collate_fn=coll)
            lm2.load_state_dict(state)
            assert first + [ident(s) for b in lm2 for s in b] == want
            # 3 ranks x 2 workers: every sample exactly once across ranks
            seen = []
            for r in range(3):
                dr = st.StrataIterableDataset(src, c, seed=5, epoch=2, rank=r, world_size=3)
                seen += [ident(s) for b in st.DataLoader(dr, batch_size=4, num_workers=2,
                                                         collate_fn=coll) for s in b]
            assert sorted(seen) == list(range(N))
            # 5 ranks (48 = 5 x 9 + 3): drop_last=False keeps the tail, padded as
            # DistributedSampler pads; drop_last=True drops it
            for drop in (False, True):
                seen = []
                for r in range(5):
                    sm = st.ResumableSampler(N, seed=5, epoch=2, rank=r, world_size=5,
                                             drop_last=drop)
                    assert len(sm) == (9 if drop else 10)
                    seen += list(sm)
                if drop:
                    assert len(seen) == 45 and len(set(seen)) == 45
                else:
                    assert len(seen) == 50 and set(seen) == set(range(N))
        print("OK")
    """, timeout=140)


@pytest.mark.timeout(90)
def test_pack_cli(cluster, strata, tmp_path):
    c = cluster(3)
    src = tmp_path / "samples"
    src.mkdir()
    for i in range(25):
        (src / ("x%03d.bin" % i)).write_bytes(bytes([i]) * (i * 100 + 1))
    r = strata("pack", "--dir", c.dir, "--samples-per-shard", "10", src, "/packed")
    assert r.returncode == 0, r.stderr
    assert "packed 25 sample(s) into 3 shard(s)" in r.stdout
    run_py(c, """
        import strata
        from strata.dataset import SampleIndex
        c = strata.Client()
        idx = SampleIndex.open(c, "/packed")
        assert len(idx) == 25 and idx.packed
        for i in range(25):
            assert bytes(idx.read(c, i)) == bytes([i]) * (i * 100 + 1)
        print("OK")
    """)
    r = strata("pack", "--dir", c.dir, tmp_path / "missing", "/p2")
    assert r.returncode != 0 and "missing" in r.stderr


@pytest.mark.timeout(90)
def test_packed_format_one_implementation(cluster):
    """The packed-dataset format has one implementation (libstrata's
    strata_pack_*). What it writes is the documented byte format, a
    dataset in that format written by hand reads back, and a malformed one
    is refused with ValueError, never read past its end."""
    c = cluster(3)
    run_py(c, """
        import json, struct
        import numpy as np
        import strata
        from strata.dataset import ShardWriter, SampleIndex
        c = strata.Client()
        # Written by the library: the bytes are the documented format.
        with ShardWriter(c, "/pf/a/b", samples_per_shard=3) as w:
            for i in range(4):
                w.add(np.full(i * 7, i, dtype=np.uint8))
        assert w.count == 4 and w.shards == 2
        meta = json.loads(c.read_bytes("/pf/a/b/dataset.json"))
        assert meta["format"] == "strata-packed" and meta["version"] == 1
        assert meta["samples"] == 4 and [s["samples"] for s in meta["shards"]] == [3, 1]
        idx = c.read_bytes("/pf/a/b/" + meta["shards"][0]["index"])
        assert idx[:8] == b"STRPIDX1" and struct.unpack_from("<Q", idx, 8)[0] == 3
        assert struct.unpack_from("<6Q", idx, 16) == (0, 0, 0, 7, 7, 14)
        # Written by hand in the format: read back.
        c.makedirs("/pf/hand")
        c.write_bytes("/pf/hand/d0", b"abcdefgh")
        c.write_bytes("/pf/hand/i0", b"STRPIDX1" + struct.pack("<5Q", 2, 0, 3, 3, 5))
        c.write_bytes("/pf/hand/dataset.json", json.dumps({
            "format": "strata-packed", "version": 1, "samples": 2,
            "shards": [{"data": "d0", "index": "i0", "samples": 2, "bytes": 8}]}).encode())
        x = SampleIndex.open(c, "/pf/hand")
        assert [bytes(x.read(c, i)) for i in range(2)] == [b"abc", b"defgh"]
        # Malformed: each refused.
        bad = [
            (b"STRPIDX1" + struct.pack("<5Q", 3, 0, 3, 3, 5), "d0", 8),   # count past the end
            (b"XTRPIDX1" + struct.pack("<5Q", 2, 0, 3, 3, 5), "d0", 8),   # magic
            (b"STRPIDX1" + struct.pack("<5Q", 2, 0, 3, 3, 9), "d0", 8),   # past "bytes"
            (b"STRPIDX1" + struct.pack("<5Q", 2, 0, 3, 3, 5), "../d0", 8),  # a path
        ]
        for k, (body, data, nbytes) in enumerate(bad):
            d = "/pf/bad%d" % k
            c.makedirs(d)
            c.write_bytes(d + "/i0", body)
            c.write_bytes(d + "/dataset.json", json.dumps({
                "format": "strata-packed", "version": 1,
                "shards": [{"data": data, "index": "i0", "bytes": nbytes}]}).encode())
            try:
                SampleIndex.open(c, d)
            except ValueError as e:
                assert "not a valid packed dataset" in str(e), e
            else:
                raise AssertionError("bad%d accepted" % k)
        c.write_bytes("/pf/bad0/dataset.json", b'{"format": "other", "version": 1, "shards": []}')
        try:
            SampleIndex.open(c, "/pf/bad0")
        except ValueError:
            pass
        else:
            raise AssertionError("a foreign format accepted")
        # An exception inside the with block leaves no dataset behind.
        try:
            with ShardWriter(c, "/pf/abandoned") as w:
                w.add(b"x")
                raise KeyError("stop")
        except KeyError:
            pass
        assert not c.exists("/pf/abandoned/dataset.json")
        print("OK")
    """)


@pytest.mark.timeout(120)
def test_bench_train_tiny(strata):
    r = strata("bench", "train", "--workload", "cosmoflow", "--files", "16", "--seconds", "0.4",
               "--max-accel", "2", "--scale", "0.1", "--threads", "2", timeout=110)
    assert r.returncode == 0, r.stdout + r.stderr
    for what in ("strata", "local"):
        assert ("  %s  " % what.ljust(8)) in r.stdout or what in r.stdout
    assert "AU" in r.stdout and "samples/s" in r.stdout and "MB/s" in r.stdout
    assert "=>" in r.stdout
    # The storage plane's share of a read: the daemons' CPU beside the client's.
    assert "(+ daemons " in r.stdout
    assert "cosmoflow storage daemons' CPU per GB read: strata cold " in r.stdout


@pytest.mark.timeout(120)
def test_first_calls_from_many_threads_at_once(cluster):
    """Threads that make the binding's first calls at the same moment (a
    fresh process, each thread its own Client): the library is loaded and
    the prototypes declared once, so no call goes through an undeclared
    function (which passed the handle as a 32-bit int and crashed in
    libstrata). Ten fresh processes, sixteen threads each."""
    c = cluster(1)
    run_py(c, """
        import strata
        strata.Client().mkdir("/first")
    """)
    code = """
        import threading, strata
        go = threading.Barrier(16)
        errs = []
        def work(t):
            go.wait()
            try:
                c = strata.Client()
                c.mkdir("/first/p%d-t%d" % (P, t))
                c.stat("/first/p%d-t%d" % (P, t))
            except Exception as e:
                errs.append(repr(e))
        ts = [threading.Thread(target=work, args=(t,)) for t in range(16)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errs, errs
    """
    for p in range(10):
        run_py(c, "P = %d\n" % p + textwrap.dedent(code))
