"""Same-host writes through shared memory (docs/protocol.md, "Same-host
writes through shared memory"): a writer on the head daemon's host puts a
write's bytes in a slot of the region it registered for reads
(test_shm_reads.py) and sends only the descriptor (sw.OP_CHUNK_WRITE_SHM).

Shown here against real daemons: files written through the slots read back
byte-exact at R=1 and R=3 (forwarding down the chain stays TCP) and the
heads count them; STRATA_SHM_READS=0 and a daemon with
storage.shm_reads=false keep a writer on TCP; a descriptor that names no
region, a range outside it or not starting at a slot, more than four
slots (a chunk), or a forwarded update is refused and changes nothing; a wrong CRC is refused;
and the daemon used its own copy, not the slot, which the writer may
change as soon as the answer arrives.
"""
import mmap
import os
import struct
import subprocess

import pytest

import strata_wire as sw

from conftest import BUILD, run, wait_until
from test_python import PY
from test_shm_reads import attach, attach_body, cat, child_env, memfd, metric, total
from test_storage import crc32c, mgmt_addr

FAULT = BUILD / "tests" / "integration" / "fault_driver"
SLOT = 1 << 20
EINVAL, ENOENT, ERANGE, EMSGSIZE = -22, -2, -34, -90
EINTEGRITY = -(4096 + 2)
SIZE = 32 << 20


def write_file(c, tmp_path, name, data, env=None):
    """Writes data to /name from one client twice over, a chunk (4 MiB) at
    a time and each write waited for, then a 100 KiB piece rewritten: the
    writes after an I/O thread's first to a head find its region there."""
    src = tmp_path / ("src-" + name)
    src.write_bytes(data)
    code = ("import sys, strata\n"
            "cl = strata.Client()\n"
            "data = open(sys.argv[1], 'rb').read()\n"
            "with cl.open(sys.argv[2], 'wb', buffering=0) as f:\n"
            "    for o in list(range(0, len(data), 4 << 20)) * 2:\n"
            "        f.seek(o)\n"
            "        assert f.write(data[o:o + (4 << 20)]) == len(data[o:o + (4 << 20)])\n"
            "    f.seek(5 << 20)\n"
            "    assert f.write(data[5 << 20:(5 << 20) + 100000]) == 100000\n"
            "print('ok')\n")
    e = child_env(c)
    e.update(env or {})
    r = subprocess.run([PY, "-c", code, str(src), "/" + name], capture_output=True, text=True,
                       timeout=120, env=e)
    assert r.returncode == 0 and r.stdout.split() == ["ok"], r.stderr[-4000:]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nodes", [1, 3])
def test_writes_through_shared_memory_read_back(cluster, tmp_path, nodes):
    c = cluster(nodes)
    shm = total(c, "strata_storage_shm_writes_total")
    writes = total(c, "strata_storage_writes_total")
    data = os.urandom(SIZE)
    write_file(c, tmp_path, "f", data)
    through = total(c, "strata_storage_shm_writes_total") - shm
    applied = total(c, "strata_storage_writes_total") - writes
    # 17 writes; those sent while a head's region was still being attached
    # (one for each client I/O thread) went over TCP.
    assert through >= 6, "few writes went through shared memory: %d" % through
    # Every write is applied at each of the R replicas, and counted as a
    # shared-memory one at its head only.
    assert applied >= nodes * through and applied % nodes == 0, (applied, through)
    # Read back byte-exact, through shared memory and over TCP.
    assert cat(c, "f") == data
    assert cat(c, "f", {"STRATA_SHM_READS": "0"}) == data

    # Switched off for a process: every write over TCP, the same bytes.
    shm = total(c, "strata_storage_shm_writes_total")
    writes = total(c, "strata_storage_writes_total")
    write_file(c, tmp_path, "g", data, {"STRATA_SHM_READS": "0"})
    assert total(c, "strata_storage_shm_writes_total") == shm
    assert total(c, "strata_storage_writes_total") > writes
    assert cat(c, "g") == data


@pytest.mark.timeout(240)
def test_daemon_without_shm_takes_tcp_writes(cluster, tmp_path):
    c = cluster(1, daemon_flags="--storage.shm_reads=false")
    data = os.urandom(SIZE)
    write_file(c, tmp_path, "f", data)
    n = c.storage_nodes[0]
    assert metric(n, "strata_storage_writes_total") > 0
    assert metric(n, "strata_storage_shm_writes_total") == 0
    assert metric(n, "strata_storage_shm_attached_total") == 0
    assert cat(c, "f") == data


def chain_of(c, ino):
    """(chain id, chain version, head target) of chunk 0 of ino."""
    r = run([FAULT, mgmt_addr(c), "steps", str(ino), str(4 << 20), "c:0"], timeout=60)
    assert r.returncode == 0, r.stderr
    line = r.stdout.split()
    return int(line[2]), int(line[4]), int(line[3].split("@")[0].split(",")[0])


@pytest.mark.timeout(240)
def test_bad_descriptors_and_crc_are_refused(cluster, tmp_path):
    c = cluster(1)
    n = c.storage_nodes[0]
    ino = 0x5348_0001
    chain, ver, target = chain_of(c, ino)
    size = 8 << 20
    fd = memfd(size)
    status, region, secret, s = attach(n.addr, attach_body(size), [fd])
    assert status == 0 and secret
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    w = n.client()
    try:
        def upd(length, crc, **kw):
            return sw.sp_update(target, ino, 0, offset=0, length=length, crc=crc,
                                chain_id=chain, chain_ver=ver, **kw)

        def read_back(length):
            f = w.call(sw.OP_CHUNK_READ, sw.sp_read(target, ino, 0, length=length,
                                                    chain_id=chain, chain_ver=ver))
            assert f.status == 0, f.status
            return f.bulk

        # A good write from slot 1: applied, counted, read back.
        a = os.urandom(100000)
        m[SLOT:SLOT + len(a)] = a
        f = w.call(sw.OP_CHUNK_WRITE_SHM, sw.sp_shm_write(upd(len(a), crc32c(a)), region, secret, SLOT))
        assert f.status == 0, f.status
        version = struct.unpack_from("<Q", f.body)[0]
        assert version
        assert metric(n, "strata_storage_shm_writes_total") == 1
        writes = metric(n, "strata_storage_writes_total")
        # The slot is the writer's again: changing it changes nothing.
        m[SLOT:SLOT + len(a)] = b"\xee" * len(a)
        assert read_back(len(a)) == a
        # A whole chunk's write takes slots side by side (4 at most).
        a = os.urandom((3 << 20) + 5)
        m[4 * SLOT:4 * SLOT + len(a)] = a
        f = w.call(sw.OP_CHUNK_WRITE_SHM, sw.sp_shm_write(upd(len(a), crc32c(a)), region, secret,
                                                    4 * SLOT))
        assert f.status == 0, f.status
        version = struct.unpack_from("<Q", f.body)[0]
        assert metric(n, "strata_storage_shm_writes_total") == 2
        writes = metric(n, "strata_storage_writes_total")
        m[4 * SLOT:4 * SLOT + len(a)] = b"\xee" * len(a)
        assert read_back(len(a)) == a

        b = os.urandom(4096)
        m[0:len(b)] = b
        cases = [
            ("an unknown secret", upd(len(b), crc32c(b)), region, secret ^ 2, 0, ENOENT),
            ("an unknown region", upd(len(b), crc32c(b)), 100000, secret, 0, ENOENT),
            ("a slot past the region", upd(len(b), crc32c(b)), region, secret, size, ERANGE),
            ("a range past the region", upd(2 * SLOT, 0), region, secret, size - SLOT, ERANGE),
            ("an offset inside a slot", upd(len(b), crc32c(b)), region, secret, 100, ERANGE),
            ("more than four slots", upd(4 * SLOT + 1, 0), region, secret, 0, EMSGSIZE),
            ("a forwarded update", upd(len(b), crc32c(b), forwarded=sw.FWD_UPDATE,
                                       version=version + 1, base=version),
             region, secret, 0, EINVAL),
            ("a wrong CRC", upd(len(b), crc32c(b) ^ 1), region, secret, 0, EINTEGRITY),
        ]
        for what, u, reg, sec, at, want in cases:
            f = w.call(sw.OP_CHUNK_WRITE_SHM, sw.sp_shm_write(u, reg, sec, at))
            assert f.status == want, (what, f.status)
        # A WRITE_SHM with bulk besides: refused too.
        f = w.call(sw.OP_CHUNK_WRITE_SHM, sw.sp_shm_write(upd(len(b), crc32c(b)), region, secret, 0),
                   bulk=b)
        assert f.status == EINVAL, f.status
        # Nothing changed: the same version and bytes, no write counted.
        f = w.call(sw.OP_CHUNK_STAT, sw.sp_ref(target, ino, 0, chain_id=chain, chain_ver=ver))
        assert f.status == 0 and struct.unpack_from("<QI", f.body) == (version, len(a))
        assert read_back(len(a)) == a
        assert metric(n, "strata_storage_shm_writes_total") == 2
        assert metric(n, "strata_storage_writes_total") == writes

        # The region went with its connection: the descriptor names
        # nothing any more.
        s.close()
        s = None
        wait_until(lambda: metric(n, "strata_storage_shm_regions") == 0, 10,
                   what="a closed attach's region to be unmapped")
        f = w.call(sw.OP_CHUNK_WRITE_SHM, sw.sp_shm_write(upd(len(b), crc32c(b)), region, secret, 0))
        assert f.status == ENOENT, f.status
        assert read_back(len(a)) == a
    finally:
        w.close()
        m.close()
        if s is not None:
            s.close()
