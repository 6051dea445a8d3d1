"""strata.fsspec against a local cluster: pandas reads and writes a CSV
through a strata:// URL, and the fsspec operations (ls, info, open, cat,
put, get, rm, mkdir, mv, transactions) keep fsspec's semantics; ranged reads go through
the batch ring, one read per chunk the range touches; the connection
options (mgmt=, local_dir=, token=, strata://host:port/) reach the
cluster; a filesystem survives pickling (Dask ships it to workers).

Each scenario runs in a child /usr/bin/python3 (test_python.run_py).
"""
import subprocess

import pytest

from test_python import PY, run_py


def _have_fsspec_pandas():
    r = subprocess.run([PY, "-c", "import fsspec, pandas"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _have_fsspec_pandas(),
                                reason="needs Debian's python3-fsspec and python3-pandas")


@pytest.mark.timeout(120)
def test_pandas_csv_round_trip(cluster):
    c = cluster(3)
    run_py(c, """
        import os
        import pandas
        import strata.fsspec    # registers "strata" (the entry point does it once installed)
        D = os.environ["STRATA_MGMT"]          # the 'strata local up' directory
        df = pandas.DataFrame({"step": range(5000), "loss": [1.0 / (i + 1) for i in range(5000)],
                               "tag": ["r%d" % (i % 7) for i in range(5000)]})
        df.to_csv("strata:///data/run/x.csv", index=False, storage_options={"local_dir": D})
        back = pandas.read_csv("strata:///data/x.csv".replace("/x", "/run/x"),
                               storage_options={"local_dir": D})
        pandas.testing.assert_frame_equal(back, df)
        # chunked reading (seek + read on the fsspec file) and compression by suffix
        n = sum(len(part) for part in pandas.read_csv("strata:///data/run/x.csv", chunksize=777,
                                                       storage_options={"local_dir": D}))
        assert n == 5000
        df.to_csv("strata:///data/run/x.csv.gz", index=False, storage_options={"local_dir": D})
        pandas.testing.assert_frame_equal(pandas.read_csv("strata:///data/run/x.csv.gz",
                               storage_options={"local_dir": D}), df)
        print("OK")
    """)


@pytest.mark.timeout(150)
def test_fsspec_operations(cluster, tmp_path):
    c = cluster(3)
    local = tmp_path / "local"
    (local / "sub").mkdir(parents=True)
    (local / "a.bin").write_bytes(bytes(range(256)) * 4096)            # 1 MiB
    (local / "sub" / "b.txt").write_text("bee\n")
    run_py(c, """
        import json, os, pickle
        import fsspec
        import strata, strata.fsspec
        D = os.environ["STRATA_MGMT"]
        L = os.environ["LOCAL"]
        fs = fsspec.filesystem("strata", local_dir=D)
        assert isinstance(fs, strata.fsspec.StrataFileSystem)
        # mkdir / makedirs / exists / isdir
        fs.mkdir("/f/a/b")                                   # create_parents=True
        try:
            fs.mkdir("/f/a/b")
        except FileExistsError:
            pass
        else:
            raise AssertionError("mkdir of an existing dir")
        fs.makedirs("/f/a/b", exist_ok=True)
        try:
            fs.mkdir("/f/x/y", create_parents=False)
        except FileNotFoundError:
            pass
        else:
            raise AssertionError("mkdir without parents")
        assert fs.isdir("/f/a") and fs.exists("strata:///f/a/b") and not fs.exists("/f/none")
        # put (recursive, into a new dir), ls, info, get
        fs.put(L + "/", "/f/up", recursive=True)
        assert fs.ls("/f/up", detail=False) == ["/f/up/a.bin", "/f/up/sub"]
        ents = {e["name"]: e for e in fs.ls("/f/up")}
        assert ents["/f/up/a.bin"]["type"] == "file" and ents["/f/up/a.bin"]["size"] == 1 << 20
        assert ents["/f/up/sub"]["type"] == "directory"
        assert fs.ls("/f/up/a.bin", detail=False) == ["/f/up/a.bin"]      # ls of a file
        assert fs.info("strata:///f/up/sub/b.txt")["size"] == 4
        assert fs.cat("/f/up/sub/b.txt") == b"bee\\n"
        assert sorted(fs.find("/f/up")) == ["/f/up/a.bin", "/f/up/sub/b.txt"]
        assert fs.glob("/f/up/*.bin") == ["/f/up/a.bin"]
        try:
            fs.info("/f/up/nope")
        except FileNotFoundError:
            pass
        else:
            raise AssertionError("info of a missing file")
        fs.get("/f/up", L + "/back", recursive=True)
        assert open(L + "/back/a.bin", "rb").read() == open(L + "/a.bin", "rb").read()
        assert open(L + "/back/sub/b.txt").read() == "bee\\n"
        # open: text and binary, write creates parents
        with fs.open("/f/new/dir/t.txt", "w") as f:
            f.write("line1\\nline2\\n")
        with fs.open("/f/new/dir/t.txt", "r") as f:
            assert f.readlines() == ["line1\\n", "line2\\n"]
        data = open(L + "/a.bin", "rb").read()
        with fs.open("/f/up/a.bin", "rb") as f:
            assert f.size == len(data)
            f.seek(300000); assert f.read(1000) == data[300000:301000]
            f.seek(-5, 2); assert f.read() == data[-5:]
        # cat_file with ranges (negative ones too), cat_ranges, pipe, head/tail
        assert fs.cat_file("/f/up/a.bin", 10, 20) == data[10:20]
        assert fs.cat_file("/f/up/a.bin", -100) == data[-100:]
        assert fs.cat_file("/f/up/a.bin", 5, -5) == data[5:-5]
        assert fs.cat_file("/f/up/a.bin", len(data) - 3, len(data) + 100) == data[-3:]
        assert fs.cat_ranges(["/f/up/a.bin", "/f/up/sub/b.txt", "/f/up/a.bin"],
                             [0, 1, 1000], [3, None, 1010]) == [data[:3], b"ee\\n",
                                                                data[1000:1010]]
        fs.pipe("/f/p.bin", b"piped")
        assert fs.head("/f/p.bin", 3) == b"pip" and fs.tail("/f/p.bin", 2) == b"ed"
        # cp, mv (a rename: same inode), mv into an existing dir
        fs.cp("/f/p.bin", "/f/q.bin")
        assert fs.cat("/f/q.bin") == b"piped"
        ino = fs.info("/f/q.bin")["ino"]
        fs.mv("/f/q.bin", "/f/r.bin")
        assert not fs.exists("/f/q.bin") and fs.info("/f/r.bin")["ino"] == ino
        fs.mv("/f/r.bin", "/f/a")
        assert fs.info("/f/a/r.bin")["ino"] == ino
        fs.mv("/f/new", "/f/moved")
        assert fs.cat("/f/moved/dir/t.txt") == b"line1\\nline2\\n"
        # touch, modified, rm (files; directories only when recursive)
        fs.touch("/f/empty")
        assert fs.info("/f/empty")["size"] == 0 and fs.modified("/f/empty").year >= 2024
        fs.rm("/f/empty")
        assert not fs.exists("/f/empty")
        try:
            fs.rm("/f/a")
        except IsADirectoryError:
            pass
        else:
            raise AssertionError("rm of a directory without recursive")
        fs.rm("/f/up/sub/b.txt")
        fs.rmdir("/f/up/sub")
        fs.rm("/f", recursive=True)
        assert not fs.exists("/f")
        # transactions: files appear at the commit, none when abandoned
        with fs.transaction:
            with fs.open("/t/a", "wb") as f:
                f.write(b"1")
            assert not fs.exists("/t/a")
        assert fs.cat("/t/a") == b"1" and fs.ls("/t", detail=False) == ["/t/a"]
        try:
            with fs.transaction:
                with fs.open("/t/b", "wb") as f:
                    f.write(b"2")
                raise KeyError("abandon")
        except KeyError:
            pass
        assert fs.ls("/t", detail=False) == ["/t/a"]
        fs.rm("/t", recursive=True)
        # pickled (Dask ships filesystems to workers): the same cluster
        fs.pipe("/g", b"x")
        assert pickle.loads(pickle.dumps(fs)).cat("/g") == b"x"
        # connection options: mgmt= with token=, and a URL naming the mgmt address
        addr = json.load(open(D + "/cluster.json"))["mgmt"]
        tok = D + "/admin.token"
        fs2 = fsspec.filesystem("strata", mgmt=addr, token=tok, skip_instance_cache=True)
        assert fs2.cat("/g") == b"x" and fs2.client.mgmt == addr
        fs3 = fsspec.filesystem("strata", mgmt=addr, local_dir=D, skip_instance_cache=True)
        assert fs3.cat("/g") == b"x"
        with fsspec.open("strata://%s/g" % addr, "rb", token=tok) as f:
            assert f.read() == b"x" and f.fs.client.mgmt == addr
        print("OK")
    """, env={"LOCAL": str(local)})


@pytest.mark.timeout(120)
def test_ranged_reads_use_the_batch_ring(cluster):
    """A range is split at chunk boundaries and read through the ring, all
    pieces in one batch: cat_file of 5 chunks' worth (64 KiB chunks) is 6
    reads when it starts mid-chunk, and a buffered fsspec file fetches its
    blocks the same way."""
    c = cluster(3)
    run_py(c, """
        import os
        import fsspec
        import strata, strata.fsspec as sf
        fs = fsspec.filesystem("strata", local_dir=os.environ["STRATA_MGMT"])
        fs.client.makedirs("/r")
        fs.client.set_layout("/r", chunk_size=64 << 10, stripe=0)
        data = os.urandom(1 << 20)
        fs.pipe("/r/x", data)
        assert fs.info("/r/x")["chunk_size"] == 64 << 10
        batches = []
        orig = strata.Ring.read_many
        def spy(self, reads):
            reads = list(reads)
            batches.append([(off, len(b)) for _, off, b in reads])
            return orig(self, reads)
        strata.Ring.read_many = spy
        K = 64 << 10
        assert fs.cat_file("/r/x", 1000, 1000 + 5 * K) == data[1000:1000 + 5 * K]
        assert len(batches) == 1 and len(batches[0]) == 6, batches
        assert batches[0][0] == (1000, K - 1000) and all(o % K == 0 for o, _ in batches[0][1:])
        batches.clear()
        with fs.open("/r/x", "rb", block_size=3 * K, cache_type="none") as f:
            f.seek(K)
            assert f.read(2 * K) == data[K:3 * K]
        assert batches == [[(K, K), (2 * K, K)]], batches
        print("OK")
    """)
