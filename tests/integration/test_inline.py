"""Inline data of small files (docs/namespace.md, "Inline data"): a file of
at most meta.inline_max bytes is published at close in one meta call and
read back from the open's reply. Byte-exact read-back through every read
path (strata_pread, the ring and read_batch, datasets, checkpoints, the
CLI's cat/get/cp), overwrite, append and truncation across the bound, a
file rewritten by another client never read stale, a client without
inline support refused an inline file (never shown zeros), the meta daemon
killed -9 after a close losing nothing, and meta.inline_max = 0.

Which files are inline is seen from the outside: a client started with
STRATA_TEST_NO_INLINE=1 uses the older OPEN forms, which refuse an inline
file with EMEDIUMTYPE and open any other.
"""
import json
import os
import signal

import pytest

from conftest import restart_control_node, run_strata, wait_until
from test_python import pytestmark, run_py  # noqa: F401

MAX = 16384     # meta.inline_max's default

# Shared by the child scripts: an "old" client (no inline support), and
# a check of which files are inline.
PRELUDE = """
import errno, os
import strata
MAX = %d
c = strata.Client()
os.environ["STRATA_TEST_NO_INLINE"] = "1"
old = strata.Client()
old.handle                      # connects now, while the variable is set
del os.environ["STRATA_TEST_NO_INLINE"]

def is_inline(path):
    try:
        old.read_bytes(path)
    except OSError as e:
        assert e.errno == errno.EMEDIUMTYPE, e
        return True
    return False

def check(path, want, inline):
    assert c.read_bytes(path) == want, path
    assert is_inline(path) == inline, (path, inline)
    if not inline:
        assert old.read_bytes(path) == want, path
""" % MAX


def _cli(c, *args, ok=True):
    mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
    r = run_strata(*args, env={"STRATA_MGMT": mgmt}, timeout=60)
    if ok:
        assert r.returncode == 0, "strata %s: %d\n%s%s" % (args, r.returncode, r.stdout,
                                                          r.stderr)
    return r


@pytest.mark.timeout(240)
def test_every_read_path_is_byte_exact(cluster, tmp_path):
    c = cluster(3)
    run_py(c, PRELUDE + """
import numpy as np
from strata import checkpoint
from strata.dataset import ShardWriter, SampleIndex
c.makedirs("/in")
sizes = [1, 100, 4096, MAX - 1, MAX, MAX + 1, 3 * MAX, 300000]
data = {n: os.urandom(n) for n in sizes}
for n in sizes:
    c.write_bytes("/in/f%d" % n, data[n])
for n in sizes:
    check("/in/f%d" % n, data[n], n <= MAX)
c.write_bytes("/in/txt", b"hello inline\\n" * 3)
# strata_pread at offsets, across the end
with c.open("/in/f4096", "rb", buffering=0) as f:
    assert f.size() == 4096
    assert f.pread(10, 4090) == data[4096][4090:]
    assert f.pread(100, 5000) == b""
    assert f.pread(1, 0) == data[4096][:1]
# the ring: read_batch by path and by open file, short at the end
bufs = [bytearray(700) for _ in sizes]
got = c.read_batch([("/in/f%d" % n, n // 2, bufs[i]) for i, n in enumerate(sizes)], depth=8)
for i, n in enumerate(sizes):
    want = data[n][n // 2:n // 2 + 700]
    assert got[i] == len(want) and bytes(bufs[i][:got[i]]) == want, n
with c.open("/in/f100", "rb", buffering=0) as f:
    b = bytearray(64)
    assert c.read_batch([(f, 36, b)]) == [64] and bytes(b) == data[100][36:]
# datasets: a directory of small files and a packed one
c.makedirs("/ds/files")
samples = [os.urandom(50 + 97 * i) for i in range(30)]
for i, s in enumerate(samples):
    c.write_bytes("/ds/files/s%04d" % i, s)
assert is_inline("/ds/files/s0003")
with ShardWriter(c, "/ds/packed", samples_per_shard=7) as w:
    for s in samples:
        w.add(s)
for src in ("/ds/files", "/ds/packed"):
    idx = SampleIndex.open(c, src)
    for i in range(len(samples)):
        assert bytes(idx.read(c, i)) == samples[i], (src, i)
# a checkpoint of small tensors
state = {"w": np.arange(10, dtype=np.float32), "b": np.ones(3, dtype=np.int64), "n": 7}
checkpoint.save(state, "/ck/one", client=c, async_=False)
back = checkpoint.load("/ck/one", client=c)
assert back["n"] == 7 and (back["w"] == state["w"]).all() and (back["b"] == state["b"]).all()
open("@TMP@/want4096", "wb").write(data[4096])
open("@TMP@/want100", "wb").write(data[100])
print("OK")
""".replace("@TMP@", str(tmp_path)))
    # The CLI: cat, get, cp inside the cluster (cp writes through the ring:
    # a chunked copy of an inline file).
    want = (tmp_path / "want4096").read_bytes()
    got = tmp_path / "got"
    got.mkdir()
    _cli(c, "get", "-q", "/in/f4096", got)
    assert (got / "f4096").read_bytes() == want
    _cli(c, "cp", "/in/f100", "/in/copy100")
    _cli(c, "get", "-q", "/in/copy100", got)
    assert (got / "copy100").read_bytes() == (tmp_path / "want100").read_bytes()
    assert _cli(c, "cat", "/in/txt").stdout == "hello inline\n" * 3


@pytest.mark.timeout(180)
def test_overwrite_append_truncate_across_the_bound(cluster):
    c = cluster(3)
    run_py(c, PRELUDE + """
c.makedirs("/t")
a = os.urandom(3000)
c.write_bytes("/t/a", a)
check("/t/a", a, True)
# opened for writing without O_TRUNC: converted to chunks first
with c.open("/t/a", "r+b", buffering=0) as f:
    assert f.read(10) == a[:10]
    f.pwrite(b"XY", 100)
a = a[:100] + b"XY" + a[102:]
check("/t/a", a, False)
# O_TRUNC makes it inline again
c.write_bytes("/t/a", a[:500])
check("/t/a", a[:500], True)
# append: converted, then grown
with c.open("/t/a", "ab", buffering=0) as f:
    f.write(b"tail")
check("/t/a", a[:500] + b"tail", False)
# writes that grow past the bound while the handle holds them
big = os.urandom(MAX + 5000)
with c.open("/t/g", "wb", buffering=0) as f:
    for i in range(0, len(big), 1000):
        f.write(big[i:i + 1000])
check("/t/g", big, False)
# exactly the bound, in pieces, with a hole in the middle
with c.open("/t/h", "wb", buffering=0) as f:
    f.pwrite(b"end", MAX - 3)
    f.pwrite(b"start", 0)
want = b"start" + bytes(MAX - 8) + b"end"
check("/t/h", want, True)
# truncations of an inline file: shorter and longer stay inline ...
b = os.urandom(2000)
c.write_bytes("/t/b", b)
c.truncate("/t/b", 700)
check("/t/b", b[:700], True)
c.truncate("/t/b", 5000)
check("/t/b", b[:700] + bytes(4300), True)
# ... past the 64 KiB bound it becomes a chunked file
c.truncate("/t/b", 70000)
check("/t/b", b[:700] + bytes(69300), False)
c.truncate("/t/b", 10)
check("/t/b", b[:10], False)
# ftruncate on a handle that keeps its writes inline
with c.open("/t/c", "w+b", buffering=0) as f:
    f.write(b"x" * 1000)
    f.truncate(300)
    assert f.pread(1000, 0) == b"x" * 300
    f.pwrite(b"y", 400)
check("/t/c", b"x" * 300 + bytes(100) + b"y", True)
with c.open("/t/d", "w+b", buffering=0) as f:
    f.write(b"z" * 100)
    f.truncate(MAX + 1)
check("/t/d", b"z" * 100 + bytes(MAX + 1 - 100), False)
# an empty file made by a create: no bytes, nothing refused
c.write_bytes("/t/e", b"")
check("/t/e", b"", False)
# fsync publishes before close; another client sees it
with c.open("/t/f", "wb", buffering=0) as f:
    f.write(b"fsynced")
    f.fsync()
    assert strata.Client().read_bytes("/t/f") == b"fsynced"
# a client without inline support writes chunks, which both read
old.write_bytes("/t/old", b"o" * 3000)
check("/t/old", b"o" * 3000, False)
# and truncating an inline file (O_TRUNC) is open to it
c.write_bytes("/t/o2", b"new" * 100)
old.write_bytes("/t/o2", b"x" * 10)
check("/t/o2", b"x" * 10, False)
# rename, unlink (hard links: test_fuse.py)
c.write_bytes("/t/r", b"moved bytes")
c.rename("/t/r", "/t/r2")
check("/t/r2", b"moved bytes", True)
c.remove("/t/r2")
assert not c.exists("/t/r2")
print("OK")
""")


@pytest.mark.timeout(180)
def test_inline_reads_reach_no_storage_daemon(cluster, tmp_path):
    """An inline file's bytes come with its open: reading it sends no READ
    to any storage daemon, through shared memory (the default on one
    host) or TCP (STRATA_SHM_READS=0); a chunked file of the same run
    does, and both read back right."""
    from test_shm_reads import total
    c = cluster(3)
    run_py(c, PRELUDE + """
c.makedirs("/r")
c.write_bytes("/r/small", b"s" * 3000)
c.write_bytes("/r/big", b"b" * (MAX + 1))
print("OK")
""")
    for env in ({}, {"STRATA_SHM_READS": "0"}):
        reads = total(c, "strata_storage_reads_total")
        shm = total(c, "strata_storage_shm_reads_total")
        run_py(c, PRELUDE + """
for i in range(20):
    assert c.read_bytes("/r/small") == b"s" * 3000
b = bytearray(100)
assert c.read_batch([("/r/small", 2950, b)]) == [50] and bytes(b[:50]) == b"s" * 50
print("OK")
""", env=env)
        assert total(c, "strata_storage_reads_total") == reads, env
        assert total(c, "strata_storage_shm_reads_total") == shm, env
        run_py(c, PRELUDE + """
assert c.read_bytes("/r/big") == b"b" * (MAX + 1)
print("OK")
""", env=env)
        assert total(c, "strata_storage_reads_total") + \
            total(c, "strata_storage_shm_reads_total") > reads + shm, env


@pytest.mark.timeout(180)
def test_rewritten_by_another_client_is_never_stale(cluster):
    c = cluster(3)
    run_py(c, PRELUDE + """
w = strata.Client()
c.makedirs("/s")
sizes = [10, 5000, 5000, MAX, MAX, 40000, 7, MAX + 1, 0, 3000, 3000, 200000, 12]
for r, n in enumerate(sizes):
    data = os.urandom(n)
    w.write_bytes("/s/f", data)
    # a fresh open on the other client sees the new bytes, whatever
    # the old and new kinds of the file
    assert c.read_bytes("/s/f") == data, (r, n)
    with c.open("/s/f", "rb", buffering=0) as f:
        assert f.size() == n and f.pread(n + 10, 0) == data, (r, n)
    assert c.stat("/s/f").st_size == n
print("OK")
""")


@pytest.mark.timeout(180)
def test_meta_kill9_after_close_loses_nothing(cluster, tmp_path):
    c = cluster(3)
    run_py(c, PRELUDE + """
import hashlib
c.makedirs("/k")
h = hashlib.sha256()
for i in range(200):
    d = os.urandom(1 + (i * 131) %% MAX)
    c.write_bytes("/k/f%%03d" %% i, d)
    h.update(d)
assert is_inline("/k/f007")
open("%s/digest", "w").write(h.hexdigest())
print("OK")
""" % tmp_path)
    restart_control_node(c, signal.SIGKILL)
    mgmt = json.loads((c.dir / "cluster.json").read_text())["mgmt"]
    wait_until(lambda: run_strata("ls", "/k", env={"STRATA_MGMT": mgmt}).returncode == 0,
               60, 0.2, "the namespace after kill -9")
    want = (tmp_path / "digest").read_text()
    run_py(c, PRELUDE + """
import hashlib
h = hashlib.sha256()
for i in range(200):
    d = c.read_bytes("/k/f%%03d" %% i)
    assert len(d) == 1 + (i * 131) %% MAX, i
    h.update(d)
assert h.hexdigest() == %r
print("OK")
""" % want)


@pytest.mark.timeout(120)
def test_inline_off(cluster):
    c = cluster(1, daemon_flags="--meta.inline_max=0")
    run_py(c, PRELUDE + """
d = os.urandom(999)
c.write_bytes("/off", d)
check("/off", d, False)
print("OK")
""")


# Two handles writing one small file at once, disjoint ranges (docs/
# namespace.md, "Several writers"): A creates it (or opens it with O_TRUNC)
# and keeps its writes inline; B, on another client, opened it for writing
# without O_TRUNC while A was open and writes chunks. Whichever closes
# first, both handles' ranges end in the file, A's holes read B's bytes or
# zeros, never A's zeros over B's range.
TWO_WRITERS = PRELUDE + """
w = strata.Client()
c.makedirs("/m")

def expect(size, *ranges):
    out = bytearray(size)
    for off, data in ranges:
        out[off:off + len(data)] = data
    return bytes(out)

def two(name, a_first, a_ranges, b_ranges, trunc=False, b_mode="r+b"):
    path = "/m/" + name
    if trunc:
        c.write_bytes(path, os.urandom(900))     # old content, cut by A's O_TRUNC
    fa = c.open(path, "wb", buffering=0)
    fb = w.open(path, b_mode, buffering=0)
    for i in range(max(len(a_ranges), len(b_ranges))):
        if i < len(a_ranges):
            fa.pwrite(a_ranges[i][1], a_ranges[i][0])
        if i < len(b_ranges):
            fb.pwrite(b_ranges[i][1], b_ranges[i][0])
    first, second = (fa, fb) if a_first else (fb, fa)
    first.close()
    second.close()
    size = max(off + len(d) for off, d in a_ranges + b_ranges)
    want = expect(size, *(a_ranges + b_ranges))
    got = c.read_bytes(path)
    assert got == want, (name, len(got), size,
                         [i for i in range(min(len(got), size)) if got[i] != want[i]][:8])
    assert w.read_bytes(path) == want, name
    return want

R = lambda n: os.urandom(n)
for a_first in (True, False):
    t = "a" if a_first else "b"
    # B's first range lies in a hole of A's writes
    two("hole" + t, a_first, [(0, R(100)), (300, R(100))], [(150, R(100)), (500, R(100))])
    # the same after O_TRUNC of an older file (no stale bytes in the holes)
    two("trunc" + t, a_first, [(0, R(100)), (300, R(100))], [(150, R(100)), (700, R(50))],
        trunc=True)
    # B also writes past the inline bound: the file ends chunked
    two("far" + t, a_first, [(0, R(10)), (4000, R(10))], [(20, R(30)), (MAX * 5, R(40))])
    # A grows past inline_max: it spills its own ranges only
    two("spill" + t, a_first, [(0, R(100)), (MAX + 10, R(10))], [(200, R(300))])
    # byte-interleaved ranges (many runs)
    two("comb" + t, a_first, [(i, b"A") for i in range(0, 400, 2)],
        [(i, b"B") for i in range(1, 400, 2)])
    # B opens with O_TRUNC too (the file still empty): both keep their
    # writes inline, the second publish merges with the first
    two("both" + t, a_first, [(0, R(100)), (300, R(100))], [(150, R(100)), (500, R(100))],
        b_mode="wb")
    two("bothfar" + t, a_first, [(0, R(100))], [(150, R(100)), (MAX - 10, R(100))],
        b_mode="wb")
    # B publishes at fsync, then writes on: merged at each publish
    fa = c.open("/m/fs" + t, "wb", buffering=0)
    fb = w.open("/m/fs" + t, "wb", buffering=0)
    fa.pwrite(b"a" * 10, 0)
    fb.pwrite(b"b" * 10, 20)
    fb.fsync()
    fa.fsync()
    fb.pwrite(b"B" * 10, 40)
    fa.pwrite(b"A" * 10, 60)
    (fa if a_first else fb).close()
    (fb if a_first else fa).close()
    want = expect(70, (0, b"a" * 10), (20, b"b" * 10), (40, b"B" * 10), (60, b"A" * 10))
    assert c.read_bytes("/m/fs" + t) == want
    assert is_inline("/m/fs" + t)
# A's bytes fit inline and B wrote only within them: once merged, the file
# stays readable by a client without inline support (it is chunked)
d = two("small", True, [(0, b"a" * 50)], [(60, b"b" * 10)])
assert old.read_bytes("/m/small") == d
print("OK")
"""


@pytest.mark.timeout(240)
def test_two_writers_both_close_orders(cluster):
    c = cluster(3)
    run_py(c, TWO_WRITERS)


@pytest.mark.timeout(180)
def test_two_writers_old_client_gets_an_error(cluster):
    """A client without inline support writing chunks of a file another
    handle published inline after it opened it: its close fails
    EMEDIUMTYPE (it cannot read the inline bytes to merge); the published
    bytes stay, and its chunk writes never show up later in a hole."""
    c = cluster(3)
    run_py(c, PRELUDE + """
a = os.urandom(100)
fa = c.open("/o", "wb", buffering=0)
fb = old.open("/o", "r+b", buffering=0)
fa.pwrite(a, 0)
fa.pwrite(b"z", 300)
fb.pwrite(b"B" * 100, 150)
fa.close()
try:
    fb.close()
except OSError as e:
    assert e.errno == errno.EMEDIUMTYPE, e
else:
    raise AssertionError("the old client's close succeeded")
want = a + bytes(200) + b"z"
check("/o", want, True)
# converted (opened for writing), its hole still reads zeros
with c.open("/o", "r+b", buffering=0) as f:
    f.pwrite(b"!", 0)
check("/o", b"!" + want[1:], False)
print("OK")
""")
