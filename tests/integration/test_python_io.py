"""python/strata as open(), os and torch.load(weights_only=True) behave:
Client.open's buffered, text and raw files, torch.save/torch.load through
them, str and bytes paths with a non-UTF-8 name listed and opened again,
checkpoint.save creating parents, and a pickled leaf refused by name.

Each scenario runs in a child /usr/bin/python3 (test_python.run_py).
"""
import pytest

from test_python import pytestmark, run_py  # noqa: F401


@pytest.mark.timeout(120)
def test_open_follows_builtin_open(cluster):
    c = cluster(3)
    run_py(c, """
        import io, os, warnings
        import strata
        c = strata.Client()
        c.makedirs("/o")
        data = os.urandom(300000)
        with c.open("/o/a.bin", "wb") as f:
            assert isinstance(f, io.BufferedWriter) and isinstance(f.raw, strata.File)
            chunk = c.get_layout("/o/a.bin")[0]
            assert f.raw.chunk_size == chunk and chunk > io.DEFAULT_BUFFER_SIZE
            for i in range(0, len(data), 1000):     # small writes, one buffer
                f.write(data[i:i + 1000])
        assert c.read_bytes("/o/a.bin") == data
        with c.open("/o/a.bin", "rb") as f:
            assert isinstance(f, io.BufferedReader) and f.name == "/o/a.bin"
            assert f.read(10) == data[:10] and f.peek(1)[:1] == data[10:11]
            f.seek(123456)
            assert f.read(7) == data[123456:123463] and f.tell() == 123463
            assert f.pread(5, 7) == data[7:12] and f.size() == len(data)
            ba = bytearray(100); assert f.readinto(ba) == 100 and ba == data[123463:123563]
        with c.open("/o/a.bin", "r+b") as f:
            assert isinstance(f, io.BufferedRandom)
            assert f.read(4) == data[:4]
            f.pwrite(b"ZZZZ", 4)                  # read-ahead dropped: the new bytes show
            assert f.read(4) == b"ZZZZ"
            f.seek(0, 2); f.write(b"tail")
        assert c.read_bytes("/o/a.bin") == data[:4] + b"ZZZZ" + data[8:] + b"tail"
        # flush() publishes the length to another client before close
        with c.open("/o/p.bin", "wb") as f:
            f.write(b"abc"); f.flush()
            assert strata.Client().stat("/o/p.bin").st_size == 3
        raw = c.open("/o/a.bin", "rb", buffering=0)
        assert type(raw) is strata.File and raw.read(4) == data[:4]
        raw.close()
        with c.open("/o/a.bin", "rb", buffering=4096) as f:
            assert f.read(3) == data[:3]
        with c.open("/o/a.bin", "ab") as f:
            assert isinstance(f, io.BufferedWriter)
            f.write(b"!")
        assert c.read_bytes("/o/a.bin").endswith(b"tail!")
        # text: TextIOWrapper, default mode "r", newline translation, encodings
        with c.open("/o/t.txt", "w", encoding="utf-8") as f:
            assert isinstance(f, io.TextIOWrapper) and f.mode == "w"
            f.write("h\\u00e9llo\\nw\\u00f6rld\\n")
            print("third", file=f)
        with c.open("/o/t.txt", encoding="utf-8") as f:
            assert f.readline() == "h\\u00e9llo\\n" and list(f) == ["w\\u00f6rld\\n", "third\\n"]
        assert c.read_bytes("/o/t.txt") == "h\\u00e9llo\\nw\\u00f6rld\\nthird\\n".encode()
        with c.open("/o/t.txt", "a", encoding="latin-1", newline="\\r\\n") as f:
            f.write("\\u00e9\\n")
        assert c.read_bytes("/o/t.txt").endswith(b"\\xe9\\r\\n")
        with c.open("/o/t.txt", "rt", encoding="latin-1", newline="") as f:
            assert f.read().endswith("\\u00e9\\r\\n")
        with c.open("/o/l.txt", "w", buffering=1, encoding="ascii") as f:
            assert f.line_buffering
            f.write("one\\n")                       # line buffering: published at once
            assert strata.Client().read_bytes("/o/l.txt") == b"one\\n"
        def refused(exc, *a, **k):
            try:
                c.open(*a, **k)
            except exc:
                return
            raise AssertionError("accepted %r %r" % (a, k))
        refused(ValueError, "/o/t.txt", "r", buffering=0)
        refused(ValueError, "/o/t.txt", "rb", encoding="utf-8")
        refused(ValueError, "/o/t.txt", "rbt")
        refused(ValueError, "/o/t.txt", "rw")
        refused(ValueError, "/o/t.txt", "q")
        refused(FileExistsError, "/o/t.txt", "x")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c.open("/o/a.bin", "rb", buffering=1).close()
            assert w and issubclass(w[0].category, RuntimeWarning)
        # the batch ring takes buffered files too
        with c.open("/o/a.bin", "rb") as f:
            b = bytearray(4)
            assert c.read_batch([(f, 0, b)]) == [4] and b == data[:4]
        print("OK")
    """)


@pytest.mark.timeout(120)
def test_torch_save_load_through_open(cluster):
    c = cluster(3)
    run_py(c, """
        import torch
        import strata
        c = strata.Client()
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
        sd = {"model": m.state_dict(), "step": 7, "big": torch.randn(1 << 20)}
        c.makedirs("/tc")
        with c.open("/tc/model.pt", "wb") as f:
            torch.save(sd, f)
        with c.open("/tc/model.pt", "rb") as f:
            back = torch.load(f)
        assert back["step"] == 7 and torch.equal(back["big"], sd["big"])
        assert all(torch.equal(back["model"][k], v) for k, v in m.state_dict().items())
        with c.open("/tc/model.pt", "rb") as f:
            w = torch.load(f, weights_only=True)
        assert torch.equal(w["big"], sd["big"])
        print("OK")
    """)


@pytest.mark.timeout(120)
def test_paths_str_bytes_non_utf8(cluster):
    c = cluster(3)
    run_py(c, """
        import os, pathlib
        import strata
        c = strata.Client()
        c.makedirs(b"/p/sub")
        raw = b"/p/caf\\xe9-\\xff.bin"                     # not UTF-8
        with c.open(raw, "wb") as f:
            f.write(b"latin")
        c.write_bytes(pathlib.PurePosixPath("/p/plain.bin"), b"plain")
        names = c.listdir("/p")
        assert sorted(names) == sorted(["caf\\udce9-\\udcff.bin", "plain.bin", "sub"]), names
        assert sorted(c.listdir(b"/p")) == sorted([b"caf\\xe9-\\xff.bin", b"plain.bin", b"sub"])
        assert all(isinstance(e.path, bytes) for e in c.scandir(b"/p"))
        # every name listed opens again, as str and as bytes
        for e in c.scandir("/p"):
            if e.is_file():
                assert c.read_bytes(e.path) == c.read_bytes(os.fsencode(e.path))
        assert c.read_bytes("/p/" + os.fsdecode(b"caf\\xe9-\\xff.bin")) == b"latin"
        assert c.stat(raw).st_size == 5 and c.exists(raw) and c.isfile(raw)
        c.rename(raw, b"/p/sub/\\xfe")
        assert c.listdir(b"/p/sub") == [b"\\xfe"] and c.listdir("/p/sub") == ["\\udcfe"]
        c.symlink(b"/p/sub/\\xfe", b"/p/link")
        assert c.readlink(b"/p/link") == b"/p/sub/\\xfe"
        assert c.readlink("/p/link") == "/p/sub/\\udcfe"
        try:
            c.open(b"/p/nope\\xff", "rb")
        except FileNotFoundError as e:
            assert e.filename == b"/p/nope\\xff", e
        else:
            raise AssertionError("opened a missing file")
        c.remove(b"/p/link")
        # datasets: a bytes path, a directory whose name is not UTF-8
        from strata.dataset import SampleIndex, ShardWriter
        with ShardWriter(c, b"/p/ds-\\xff", samples_per_shard=2) as w:
            for i in range(3):
                w.add(bytes([i]) * 10)
        for src in (b"/p/ds-\\xff", "/p/ds-\\udcff"):
            idx = SampleIndex.open(c, src)
            assert len(idx) == 3 and bytes(idx.read(c, 2)) == b"\\x02" * 10
        c.makedirs(b"/p/files-\\xfe")
        c.write_bytes(b"/p/files-\\xfe/s\\xff", b"one")
        assert bytes(SampleIndex.open(c, b"/p/files-\\xfe").read(c, 0)) == b"one"
        c.rmtree(b"/p")
        assert not c.exists("/p")
        print("OK")
    """)


@pytest.mark.timeout(120)
def test_checkpoint_parents_and_safe_load(cluster):
    c = cluster(3)
    run_py(c, """
        import collections, fractions
        import numpy as np, torch
        import strata, strata.checkpoint as ck
        c = strata.Client()
        # missing parents are created, str and bytes paths alike
        ck.save({"w": torch.ones(3)}, "/ck/a/b/c/step-1", client=c, async_=False)
        ck.save({"w": torch.zeros(3)}, b"/ck/a/\\xff/step-2", client=c).wait()
        assert ck.load(b"/ck/a/\\xff/step-2", client=c)["w"].tolist() == [0, 0, 0]
        assert ck.latest(b"/ck/a/\\xff", client=c) == b"/ck/a/\\xff/step-2"
        # pickled leaves of tensors, containers and scalars load by default
        safe = {(1, "k"): torch.arange(4), "set": {1, 2}, "c": 1 + 2j, "dt": torch.bfloat16,
                "sz": torch.Size([2, 3]), "od": collections.OrderedDict(a=1),
                "np": np.float32(1.5), "arr": {(0,): np.arange(3)}}
        ck.save(safe, "/ck/safe", client=c, async_=False)
        got = ck.load("/ck/safe", client=c)
        assert torch.equal(got[(1, "k")], torch.arange(4)) and got["set"] == {1, 2}
        assert got["c"] == 1 + 2j and got["dt"] is torch.bfloat16 and got["sz"] == (2, 3)
        assert got["np"] == 1.5 and got["arr"][(0,)].tolist() == [0, 1, 2]
        # anything else is refused by name, with the key path; allow_pickle loads it
        ck.save({"opt": {"sched": [1, fractions.Fraction(1, 3)]}}, "/ck/unsafe", client=c,
                async_=False)
        try:
            ck.load("/ck/unsafe", client=c)
        except ck.UnsafeCheckpointError as e:
            assert "fractions.Fraction" in str(e) and "opt.sched.1" in str(e), e
            assert e.name == "fractions.Fraction" and e.key == "opt.sched.1"
            assert "allow_pickle=True" in str(e)
        else:
            raise AssertionError("an arbitrary pickle loaded without allow_pickle")
        got = ck.load("/ck/unsafe", client=c, allow_pickle=True)
        assert got["opt"]["sched"][1] == fractions.Fraction(1, 3)
        # a hand-made pickle calling os.system is refused before anything runs
        import base64, json, pickle
        class Evil:
            def __reduce__(self):
                return (__import__("os").system, ("touch /tmp/strata-pwned",))
        ck.save({"x": torch.ones(1)}, "/ck/evil", client=c, async_=False)
        man = json.loads(c.read_bytes("/ck/evil/manifest.json"))
        man["shards"][0]["meta"]["$d"].append(
            ["evil", {"$pickle": base64.b64encode(pickle.dumps(Evil())).decode()}])
        c.write_bytes("/ck/evil/manifest.json", json.dumps(man).encode())
        try:
            ck.load("/ck/evil", client=c)
        except ck.UnsafeCheckpointError as e:
            assert e.name in ("posix.system", "os.system"), e
        else:
            raise AssertionError("os.system unpickled")
        print("OK")
    """)
