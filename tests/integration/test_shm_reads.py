"""Same-host reads through shared memory (docs/protocol.md, "Same-host reads
through shared memory"): a reader on the storage daemons' host hands each
daemon a sealed memfd over the abstract socket @strata-shm:ADDR, checks the
registration over its authenticated connection, and has chunk bytes copied
into it instead of sent over loopback TCP.

Shown here against real daemons: reads through shared memory return the
written bytes and are counted, STRATA_SHM_READS=0 keeps a reader on TCP, a
reader's region goes when the reader is killed, a restarted daemon (which
forgot every region) is attached again, every malformed attach is refused
with a status and leaves the daemon serving, and a process that takes a
daemon's socket name first receives a memfd but never a byte of data.
Small reads of one ring submit go to each target as one batch request.
"""
import array
import json
import mmap
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

import strata_wire

from conftest import STRATA, fetch_metrics_text, parse_metrics, run_strata, wait_until
from test_python import PY, py_env

SIZE = 32 << 20
MAGIC = 0x5348
SEAL_SHRINK, SEAL_GROW, SEAL_SEAL = 0x2, 0x4, 0x1
F_ADD_SEALS = 1033


def metric(node, name):
    return parse_metrics(fetch_metrics_text(node.metrics_port)[2]).get(name, 0)


def total(c, name):
    return sum(metric(n, name) for n in c.storage_nodes)


def put_file(c, tmp_path, name="f", size=SIZE):
    data = os.urandom(size)
    src = tmp_path / ("src-" + name)
    src.write_bytes(data)
    r = run_strata("put", "-q", "--dir", c.dir, src, "/" + name, timeout=60)
    assert r.returncode == 0, r.stderr
    return data


def child_env(c):
    """The environment of a child /usr/bin/python3 using the build's
    libstrata against cluster c."""
    env = dict(os.environ)
    env.update(py_env(c.dir))
    return env


def cat(c, name, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([str(STRATA), "cat", "--dir", str(c.dir), "/" + name],
                       capture_output=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout


def pin_address(c, n):
    """Makes 'local start' bring node n back on the address it has now
    (cluster.json records port 0 for storage daemons)."""
    path = c.dir / "cluster.json"
    j = json.loads(path.read_text())
    for rec in j["nodes"]:
        if rec["id"] == n.id:
            rec["args"] = [a if not a.startswith("--node.listen=") else
                           "--node.listen=" + n.addr for a in rec["args"]]
    path.write_text(json.dumps(j))


def sockname(addr):
    return "\0strata-shm:" + addr


def memfd(size, seals=SEAL_SHRINK | SEAL_GROW | SEAL_SEAL):
    fd = os.memfd_create("test-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        import fcntl
        fcntl.fcntl(fd, F_ADD_SEALS, seals)
    return fd


def attach(addr, body, fds=()):
    """Sends an attach (body, fds) to the daemon at addr; returns (status,
    region, secret, socket) or (None, ..) when the daemon closed without
    an answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(sockname(addr))
    if body is not None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        s.sendmsg([body], anc)
    rep = s.recv(64)
    if len(rep) < 16:
        return None, 0, 0, s
    status, region, secret = struct.unpack("<iIQ", rep[:16])
    return status, region, secret, s


def attach_body(size, magic=MAGIC):
    return struct.pack("<IQ", magic, size)


@pytest.mark.timeout(240)
def test_reads_through_shared_memory_and_tcp_alike(cluster, tmp_path):
    c = cluster(3)
    data = put_file(c, tmp_path)
    before = total(c, "strata_storage_shm_reads_total")
    assert cat(c, "f") == data
    through = total(c, "strata_storage_shm_reads_total") - before
    # 32 MiB in 1 MiB pieces over the three daemons: those sent while a
    # daemon's region was still being attached went over TCP.
    assert through >= (SIZE >> 20) // 4, "few reads went through shared memory: %d" % through
    assert total(c, "strata_storage_shm_attached_total") >= 3
    # The reader exited: its regions go with its connections.
    wait_until(lambda: total(c, "strata_storage_shm_regions") == 0, 10,
               what="the regions of an exited reader to be unmapped")

    # Switched off for a process: every byte over TCP, the same bytes.
    before = total(c, "strata_storage_shm_reads_total")
    reads = total(c, "strata_storage_reads_total")
    assert cat(c, "f", {"STRATA_SHM_READS": "0"}) == data
    assert total(c, "strata_storage_shm_reads_total") == before
    assert total(c, "strata_storage_reads_total") > reads


@pytest.mark.timeout(240)
def test_killed_reader_and_restarted_daemon(cluster, tmp_path):
    c = cluster(3)
    data = put_file(c, tmp_path)
    # A reader that holds its client open and reads the file again for
    # each line it is sent.
    code = ("import sys, strata\n"
            "cl = strata.Client()\n"
            "def rd():\n"
            "    with cl.open('/f', 'rb') as f:\n"
            "        return f.read()\n"
            "first = rd()\n"
            "print('read', flush=True)\n"
            "for line in sys.stdin:\n"
            "    again = rd()\n"
            "    with open(sys.argv[1], 'wb') as f:\n"
            "        f.write(again)\n"
            "    print('same' if first == again else 'differ', len(again), flush=True)\n")
    out = tmp_path / "again"
    p = subprocess.Popen([PY, "-c", code, str(out)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(c), text=True)

    def read_again():
        p.stdin.write("\n")
        p.stdin.flush()
        line = p.stdout.readline().split()
        assert line[:2] == ["same", str(SIZE)], (line, p.stderr.read())
        assert out.read_bytes() == data

    try:
        assert p.stdout.readline().strip() == "read", p.stderr.read()
        wait_until(lambda: total(c, "strata_storage_shm_regions") >= 3, 10,
                   what="the reader's regions at the three daemons")
        # A daemon restarts on its address: it forgets the reader's region;
        # the reader's next read there fails with -ENOENT, goes over TCP,
        # and the reader attaches again (no other client reads meanwhile).
        n = c.storage_nodes[0]
        pin_address(c, n)
        r = run_strata("local", "restart", "--dir", c.dir, "--node", str(n.id), timeout=60)
        assert r.returncode == 0, r.stderr
        c.reload()
        assert c.node(n.id).addr == n.addr
        # Reads reach it once its chains serve again (after its resync).
        for _ in range(60):
            read_again()
            if metric(c.node(n.id), "strata_storage_shm_reads_total") > 0:
                break
            time.sleep(0.5)
        assert metric(c.node(n.id), "strata_storage_shm_attached_total") >= 1
        assert metric(c.node(n.id), "strata_storage_shm_reads_total") > 0
        # kill -9 of the reader: every daemon unmaps its region.
        assert total(c, "strata_storage_shm_regions") >= 1
        p.kill()
        p.wait(10)
        wait_until(lambda: total(c, "strata_storage_shm_regions") == 0, 10,
                   what="the regions of a killed reader to be unmapped")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.timeout(240)
def test_malformed_attaches_are_refused(cluster, tmp_path):
    c = cluster(3)
    data = put_file(c, tmp_path)
    n = c.storage_nodes[0]
    page = os.sysconf("SC_PAGE_SIZE")
    regular = tmp_path / "regular"
    regular.write_bytes(b"\0" * (2 << 20))
    cases = []

    def case(what, body, fds=(), expect=None):
        status, region, secret, s = attach(n.addr, body, fds)
        try:
            # Refused: a negative status, then the daemon closes.
            assert status is not None and status < 0, (what, status)
            if expect is not None:
                assert status == expect, (what, status)
            assert s.recv(1) == b"", what
        finally:
            s.close()
            for fd in fds:
                os.close(fd)
        cases.append(what)

    case("no descriptor", attach_body(2 << 20))
    case("a regular file", attach_body(2 << 20), [os.open(regular, os.O_RDWR)],
         -9)                                            # -EBADF: not a memfd
    case("no seal against shrinking", attach_body(2 << 20), [memfd(2 << 20, seals=0)],
         -1)                                            # -EPERM
    case("smaller than it says", attach_body(4 << 20), [memfd(2 << 20)], -22)
    case("too small a size", attach_body(page), [memfd(2 << 20)], -22)
    case("not whole pages", attach_body((2 << 20) + 1), [memfd(3 << 20)], -22)
    case("too large a size", attach_body(2 << 30), [memfd(2 << 20)], -22)
    case("a bad magic", attach_body(2 << 20, magic=0x1234), [memfd(2 << 20)], -22)
    case("two descriptors", attach_body(2 << 20), [memfd(2 << 20), memfd(2 << 20)], -22)
    case("a short message", b"\x48\x53", [memfd(2 << 20)])
    case("nothing within a second", None, (), -110)     # -ETIMEDOUT
    assert metric(n, "strata_storage_shm_refused_total") == len(cases)
    assert metric(n, "strata_storage_shm_regions") == 0

    # A well-formed attach: mapped, counted, and SHM_CHECK over the
    # authenticated connection names this process; gone with its socket.
    fd = memfd(2 << 20)
    status, region, secret, s = attach(n.addr, attach_body(2 << 20), [fd])
    os.close(fd)
    assert status == 0 and secret
    assert metric(n, "strata_storage_shm_regions") == 1
    w = n.client()
    f = w.call(strata_wire.OP_SHM_CHECK, struct.pack("<IQ", region, secret))
    assert f.status == 0 and struct.unpack("<IQ", f.body) == (os.getpid(), 2 << 20)
    f = w.call(strata_wire.OP_SHM_CHECK, struct.pack("<IQ", region, secret ^ 1))
    assert f.status == -2                               # -ENOENT: a wrong secret
    f = w.call(strata_wire.OP_SHM_CHECK, struct.pack("<IQ", 100000, secret))
    assert f.status == -2
    w.close()
    s.close()
    wait_until(lambda: metric(n, "strata_storage_shm_regions") == 0, 10,
               what="a closed attach's region to be unmapped")
    # The daemon still serves, through shared memory too.
    before = metric(n, "strata_storage_shm_reads_total")
    assert cat(c, "f") == data
    assert metric(n, "strata_storage_shm_reads_total") > before


def squat(addr, got, stop):
    """Takes @strata-shm:addr first and answers every attach as a daemon
    would, keeping the memfds it is handed (got)."""
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(sockname(addr))
    ls.listen(16)
    ls.settimeout(0.2)
    conns = []

    def loop():
        while not stop.is_set():
            try:
                s, _ = ls.accept()
            except socket.timeout:
                continue
            s.settimeout(5)
            msg, anc, _, _ = s.recvmsg(64, socket.CMSG_SPACE(16))
            for level, typ, d in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(d[:len(d) - len(d) % fds.itemsize])
                    got.extend(fds)
            s.sendall(struct.pack("<iIQ", 0, 0, 12345))
            conns.append(s)
        for s in conns:
            s.close()
        ls.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


@pytest.mark.timeout(240)
def test_a_process_holding_the_socket_name_gets_no_data(cluster, tmp_path):
    c = cluster(3)
    data = put_file(c, tmp_path)
    n = c.storage_nodes[0]
    addr = n.addr
    r = run_strata("local", "stop", "--dir", c.dir, "--node", str(n.id), timeout=60)
    assert r.returncode == 0, r.stderr
    got, stop = [], threading.Event()
    t = squat(addr, got, stop)
    try:
        # The daemon comes back on its old address and finds the name taken.
        pin_address(c, n)
        r = run_strata("local", "start", "--dir", c.dir, "--node", str(n.id), timeout=60)
        assert r.returncode == 0, r.stderr
        c.reload()
        n = c.node(n.id)
        assert n.addr == addr
        wait_until(lambda: "cannot take the shared-memory socket name" in n.log, 10,
                   what="the daemon to say its socket name is taken")
        wait_until(lambda: run_strata("status", "--dir", c.dir).returncode == 0, 60,
                   interval=0.5, what="the cluster to be healthy again")
        reads = metric(n, "strata_storage_reads_total")
        assert cat(c, "f") == data
        assert metric(n, "strata_storage_reads_total") > reads, "no read went to that node"
        assert metric(n, "strata_storage_shm_reads_total") == 0
        # The reader handed the squatter its memory, and never used it.
        assert got, "the reader never tried the taken name"
        for fd in got:
            size = os.fstat(fd).st_size
            with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) as m:
                assert m[:] == bytes(size), "data reached the squatter's mapping"
    finally:
        stop.set()
        t.join(5)
        for fd in got:
            os.close(fd)


@pytest.mark.timeout(240)
def test_small_reads_of_one_submit_batch_per_target(cluster, tmp_path):
    """The small reads of one ring submit go to each target as one
    OP_CHUNK_BATCH_READ (storage_client.c, "batched small reads"); each
    returns its own bytes, and one past the end of the file its own short
    count."""
    c = cluster(3)
    put_file(c, tmp_path, "small", 4 << 20)
    code = ("import os, random, sys, strata\n"
            "cl = strata.Client()\n"
            "data = open(sys.argv[1], 'rb').read()\n"
            "rng = random.Random(7)\n"
            "offs = [rng.randrange(0, len(data) - 30000) for _ in range(120)]\n"
            "offs.append(len(data) - 1000)\n"
            "with cl.open('/small', 'rb') as f, strata.Ring(cl, depth=128) as r:\n"
            "    bufs = [bytearray(29000) for _ in offs]\n"
            "    for i, (o, b) in enumerate(zip(offs, bufs)):\n"
            "        r.prep_read(f, b, o, i)\n"
            "    r.submit()\n"
            "    got = {}\n"
            "    while len(got) < len(offs):\n"
            "        for u, res in r.wait(len(offs) - len(got)):\n"
            "            got[u] = res\n"
            "for i, (o, b) in enumerate(zip(offs, bufs)):\n"
            "    want = data[o:o + 29000]\n"
            "    assert got[i] == len(want), (i, got[i], len(want))\n"
            "    assert bytes(b[:len(want)]) == want, i\n"
            "print('ok', len(offs))\n")
    before = total(c, "strata_storage_batch_reads_total")
    reads = total(c, "strata_storage_reads_total")
    r = subprocess.run([PY, "-c", code, str(tmp_path / "src-small")], capture_output=True,
                       text=True, timeout=120, env=child_env(c))
    assert r.returncode == 0 and r.stdout.split() == ["ok", "121"], r.stderr[-4000:]
    batches = total(c, "strata_storage_batch_reads_total") - before
    items = total(c, "strata_storage_reads_total") - reads
    assert batches >= 1, "no batch read"
    assert items >= 121 and batches < items / 4, (batches, items)
