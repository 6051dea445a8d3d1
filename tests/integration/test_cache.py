"""The compute-node read cache (docs/cache.md) against a local cluster:
close-to-open coherence when another client rewrites a file (same size,
in place; and truncated to another size), the cache directory shared by
processes (a second process reads the first one's blocks from disk; a
damaged block file is a miss, never data), prefetch, `strata cache
stats`, and bad settings refused with a reason.

Clients are child /usr/bin/python3 processes through python/strata,
configured by the environment ($STRATA_CACHE_MEM, $STRATA_CACHE_DIR,
$STRATA_CACHE_BLOCK), as any program linked with libstrata is.
"""
import json
import os
import textwrap

import pytest

from conftest import STRATA, run, run_strata
from test_python import PY, py_env

# A reader and a writer: each a process of its own, with its own client.
WRITER = """
import os, sys, strata
path, seed, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = bytes((i * seed + seed) % 251 for i in range(size))
c = strata.Client()
c.makedirs(os.path.dirname(path), exist_ok=True)
mode = sys.argv[4] if len(sys.argv) > 4 else "wb"
with c.open(path, mode, buffering=0) as f:
    f.seek(0)
    f.write(data)
"""


def expect(seed, size):
    return bytes((i * seed + seed) % 251 for i in range(size))


def py(cluster, code, env, args=(), timeout=120):
    e = py_env(cluster.dir)
    e.update(env)
    r = run([PY, "-c", textwrap.dedent(code), *args], timeout=timeout, env=e)
    assert r.returncode == 0, "child python failed (%d):\n%s\n%s" % (
        r.returncode, r.stdout, r.stderr[-6000:])
    return r.stdout


def cache_stats(d):
    r = run([str(STRATA), "cache", "stats", "--dir", str(d), "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("tier", ["mem", "dir"])
def test_rewrite_by_another_client_is_never_read_stale(cluster, tmp_path, tier):
    c = cluster(3)
    cache = {"STRATA_CACHE_MEM": "64M"} if tier == "mem" else {
        "STRATA_CACHE_DIR": str(tmp_path / "cache")}
    cache["STRATA_CACHE_BLOCK"] = "64K"
    writer_env = py_env(c.dir)
    writer_env["WRITER"] = WRITER
    # The reader stays one process (its DRAM cache lives on) while other
    # processes rewrite the file under it.
    out = py(c, """
        import os, subprocess, sys
        import strata
        PY = sys.executable
        def write(seed, size, mode="wb"):
            r = subprocess.run([PY, "-c", os.environ["WRITER"], "/co/f", str(seed), str(size),
                                mode], env=dict(os.environ, STRATA_CACHE_MEM="",
                                                STRATA_CACHE_DIR=""), capture_output=True)
            assert r.returncode == 0, r.stderr
        def want(seed, size):
            return bytes((i * seed + seed) % 251 for i in range(size))
        c = strata.Client()
        c.makedirs("/co", exist_ok=True)
        size = 300000 + 1234
        write(3, size)
        for _ in range(3):      # the first read fills the cache, the others hit it
            assert c.read_bytes("/co/f") == want(3, size)
        held = c.open("/co/f", "rb", buffering=0)
        # Rewritten in place, same size, by another client.
        write(5, size, "r+b")
        assert c.read_bytes("/co/f") == want(5, size), "stale after a rewrite"
        assert c.read_bytes("/co/f") == want(5, size)
        # Shrunk and rewritten; then grown.
        write(7, size // 2)
        assert c.read_bytes("/co/f") == want(7, size // 2)
        write(9, size * 2)
        assert c.read_bytes("/co/f") == want(9, size * 2)
        # Ranges of a cached file: every offset reads the new bytes, by
        # pread and through the batch ring, twice (a miss, then a hit).
        w = want(9, size * 2)
        offs = (0, 1, 65535, 65536, 100000, size * 2 - 10)
        for _ in range(2):
            with c.open("/co/f", "rb", buffering=0) as f:
                for off in offs:
                    assert f.pread(1000, off) == w[off:off + 1000]
                bufs = [bytearray(70000) for _ in offs]
                n = c.read_batch([(f, off, b) for off, b in zip(offs, bufs)])
                for off, b, k in zip(offs, bufs, n):
                    assert k == min(70000, len(w) - off) and b[:k] == w[off:off + k]
        # Rewritten again while the reader holds it open: the new bytes
        # after the next open.
        write(21, size * 2, "r+b")
        assert c.read_bytes("/co/f") == want(21, size * 2)
        held.close()
        print("ok")
    """, dict(cache, WRITER=WRITER))
    assert "ok" in out
    if tier == "dir":
        st = cache_stats(tmp_path / "cache")
        assert st["hits"] > 0 and st["misses"] > 0, st


@pytest.mark.timeout(180)
def test_cache_dir_shared_by_processes(cluster, tmp_path):
    c = cluster(3)
    d = tmp_path / "cache"
    env = {"STRATA_CACHE_DIR": str(d), "STRATA_CACHE_MEM": "16M", "STRATA_CACHE_BLOCK": "64K"}
    size = 1 << 20
    py(c, WRITER, {}, ["/sh/f", "11", str(size)])
    read = """
        import sys, strata
        size = int(sys.argv[1])
        want = bytes((i * 11 + 11) % 251 for i in range(size))
        assert strata.Client().read_bytes("/sh/f") == want
    """
    py(c, read, env, [str(size)])
    first = cache_stats(d)
    assert first["misses"] >= size // 65536 and first["disk_hits"] == 0, first
    assert first["disk_bytes"] >= size, first
    # Another process: its DRAM is empty, the directory is not.
    py(c, read, env, [str(size)])
    second = cache_stats(d)
    assert second["disk_hits"] - first["disk_hits"] >= size // 65536, second
    assert second["misses"] == first["misses"], second
    # A damaged block file is dropped and read again from storage.
    files = [os.path.join(r, n) for r, _, ns in os.walk(d) for n in ns
             if n != "stats" and not n.startswith(".")]
    assert len(files) >= size // 65536
    for p in files[:3]:
        with open(p, "r+b") as f:
            f.seek(200)
            b = f.read(1)
            f.seek(200)
            f.write(bytes([b[0] ^ 0xff]))
    py(c, read, env, [str(size)])
    third = cache_stats(d)
    assert third["disk_corrupt"] - second["disk_corrupt"] == 3, third
    assert third["misses"] - second["misses"] == 3, third


@pytest.mark.timeout(180)
def test_prefetch_warms_the_cache(cluster, tmp_path):
    c = cluster(3)
    d = tmp_path / "cache"
    env = {"STRATA_CACHE_DIR": str(d), "STRATA_CACHE_BLOCK": "64K"}
    size = 1 << 20
    py(c, WRITER, {}, ["/pf/f", "13", str(size)])
    py(c, """
        import ctypes, sys, time
        import strata
        from strata._lib import lib
        c = strata.Client()
        L = lib()
        class Stats(ctypes.Structure):
            _fields_ = [("stats_size", ctypes.c_size_t)] + [(n, ctypes.c_uint64) for n in (
                "hits", "misses", "hit_bytes", "fill_bytes", "disk_hits", "evictions",
                "disk_evictions", "disk_corrupt", "prefetched", "mem_bytes", "mem_limit",
                "disk_bytes", "disk_limit")]
        L.strata_cache_prefetch.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        L.strata_cache_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        assert L.strata_cache_prefetch(c.handle, b"/pf/f") == 0
        assert L.strata_cache_prefetch(c.handle, b"relative") == -22
        st = Stats(stats_size=ctypes.sizeof(Stats))
        deadline = time.time() + 60
        while time.time() < deadline:
            assert L.strata_cache_stats(c.handle, ctypes.byref(st)) == 0
            if st.prefetched == 16:
                break
            time.sleep(0.05)
        assert st.prefetched == 16, st.prefetched
        before = st.misses
        want = bytes((i * 13 + 13) % 251 for i in range(int(sys.argv[1])))
        assert c.read_bytes("/pf/f") == want
        assert L.strata_cache_stats(c.handle, ctypes.byref(st)) == 0
        assert st.misses == before and st.hits >= 16, (st.misses, before, st.hits)
        print("ok")
    """, env, [str(size)])


def test_cache_stats_command(tmp_path):
    r = run_strata("cache", "stats", "--dir", str(tmp_path / "none"))
    assert r.returncode == 1 and "holds no cache" in r.stderr, r.stderr
    e = dict(os.environ)
    e.pop("STRATA_CACHE_DIR", None)
    r = run([str(STRATA), "cache", "stats"], env=e)
    assert r.returncode == 2 and "no cache directory" in r.stderr, r.stderr
    r = run_strata("cache", "stats", "--bogus")
    assert r.returncode == 2 and "'--bogus'" in r.stderr, r.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "stats").write_bytes(b"not a cache")
    r = run_strata("cache", "stats", "--dir", str(tmp_path / "bad"))
    assert r.returncode == 1 and "cannot read the cache" in r.stderr, r.stderr


@pytest.mark.timeout(120)
def test_bad_cache_settings_are_refused(cluster, tmp_path):
    c = cluster(3)
    for env, why in (({"STRATA_CACHE_MEM": "lots"}, "'lots' is not a size"),
                     ({"STRATA_CACHE_MEM": "1M", "STRATA_CACHE_BLOCK": "3000"},
                      "cache block size 3000 is not a power of two"),
                     ({"STRATA_CACHE_MEM": "1M"}, "too small for blocks of 1048576 bytes"),
                     ({"STRATA_CACHE_DIR": str(tmp_path)}, "open to others")):
        e = py_env(c.dir)
        e.update(env)
        if "STRATA_CACHE_DIR" in env:
            os.chmod(tmp_path, 0o755)
        r = run([PY, "-c", "import strata; strata.Client().stat('/')"], env=e)
        assert r.returncode != 0, r.stdout
        assert why in r.stderr, r.stderr


@pytest.mark.timeout(180)
def test_pack_prefetch_queues_the_next_shards(cluster, tmp_path):
    c = cluster(3)
    src = tmp_path / "samples"
    src.mkdir()
    for i in range(8):
        (src / ("s%02d" % i)).write_bytes(bytes([i]) * 100000)
    r = run_strata("pack", "--dir", str(c.dir), "--samples-per-shard", "2", str(src), "/ds")
    assert r.returncode == 0, r.stderr
    py(c, """
        import ctypes, time
        import strata
        from strata._lib import lib
        c = strata.Client()
        L = lib()
        L.strata_pack_index_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_void_p)]
        L.strata_pack_prefetch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                                           ctypes.c_uint32]
        L.strata_pack_index_free.argtypes = [ctypes.c_void_p]
        L.strata_cache_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        x = ctypes.c_void_p()
        assert L.strata_pack_index_open(c.handle, b"/ds", ctypes.byref(x)) == 0
        assert L.strata_pack_prefetch(c.handle, x, 4, 1) == -22      # 4 shards: 0..3
        assert L.strata_pack_prefetch(c.handle, x, 0, 2) == 0        # shards 1 and 2
        st = (ctypes.c_uint64 * 14)()
        st[0] = ctypes.sizeof(st)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert L.strata_cache_stats(c.handle, st) == 0
            if st[9] == 2 * 4:      # prefetched: 2 shards of 200000 bytes, 64K blocks
                break
            time.sleep(0.05)
        assert st[9] == 8, list(st)
        L.strata_pack_index_free(x)
    """, {"STRATA_CACHE_MEM": "16M", "STRATA_CACHE_BLOCK": "64K"})


@pytest.mark.timeout(180)
def test_reader_prefetches_the_next_shards(cluster, tmp_path):
    """strata.dataset.PrefetchReader over a packed dataset, with a cache:
    starting shard 0 queues shards 1 and 2 (ahead=2) for the background
    prefetch; without a cache it reads the same and queues nothing."""
    c = cluster(3)
    src = tmp_path / "samples"
    src.mkdir()
    for i in range(8):
        (src / ("s%02d" % i)).write_bytes(bytes([i]) * 100000)
    r = run_strata("pack", "--dir", str(c.dir), "--samples-per-shard", "2", str(src), "/dsr")
    assert r.returncode == 0, r.stderr
    script = """
        import ctypes, sys, time
        import strata
        from strata._lib import lib
        from strata.dataset import PrefetchReader, SampleIndex
        c = strata.Client()
        x = SampleIndex.open(c, "/dsr")
        got = [(i, bytes(b)) for i, b in PrefetchReader(c, x, [0, 1], depth=4, ahead=2)]
        assert [i for i, _ in got] == [0, 1], got
        assert got[0][1] == bytes([0]) * 100000
        L = lib()
        L.strata_cache_stats.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        st = (ctypes.c_uint64 * 14)()
        st[0] = ctypes.sizeof(st)
        want = int(sys.argv[1])
        deadline = time.time() + 60
        while time.time() < deadline:
            rc = L.strata_cache_stats(c.handle, st)
            if rc == -2 or st[9] >= want:
                break
            time.sleep(0.05)
        print("rc", rc, "prefetched", st[9])
    """
    out = py(c, script, {"STRATA_CACHE_DIR": str(tmp_path / "cache"),
                         "STRATA_CACHE_BLOCK": "64K"}, ["8"])
    # Shards 1 and 2: 200000 bytes each, 4 blocks of 64 KiB each.
    assert "rc 0 prefetched 8" in out, out
    out = py(c, script, {}, ["8"])
    assert "rc -2" in out, out
