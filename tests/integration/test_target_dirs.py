"""One target per disk: storage.target_dirs (docs/operations.md, "One
target per disk").

A storage daemon whose two targets are two separate file systems (tmpfs
mounts of different sizes): each is counted with its own capacity, files
written through it read back, and each directory is bound to its slot by
target.owner (0600). Swapped directories, a missing one (a disk not
mounted) and another node's directory are refused at start with the
reason; bad lists are refused by --check-config naming the key.
"""
import json
import os
import subprocess

import pytest

from conftest import STRATA, DaemonError, run_strata, wait_until

MiB = 1 << 20


@pytest.fixture
def disks(tmp_path, request):
    """Two tmpfs mounts, 16 and 32 MiB: two disks."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    out = []
    for name, size in (("disk0", "16m"), ("disk1", "32m")):
        d = tmp_path / name
        d.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(d)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip("cannot mount a tmpfs: %s" % r.stderr.strip())
        request.addfinalizer(lambda d=d: subprocess.run(["umount", "-l", str(d)],
                                                        capture_output=True))
        out.append(d)
    return out


def _status(mgmt):
    r = run_strata("status", "--json", "--mgmt", mgmt.addr, timeout=30)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("value,words", [
    ("disk0", ["storage.target_dirs", "'disk0' is not an absolute path"]),
    ("/a,,/b", ["storage.target_dirs", "an empty directory"]),
    ("/a,/b/,/a", ["storage.target_dirs", "'/a' is named twice"]),
    ("/a,/b,/c --storage.targets=2", ["storage.targets", "storage.target_dirs", "disagree"]),
])
def test_bad_target_dirs_are_refused(tmp_path, run_stratad, value, words):
    value, *more = value.split(" ")
    r = run_stratad("--check-config", "--data", tmp_path / "d", "--node.listen=127.0.0.1:0",
                    "--node.services=storage", "--storage.target_dirs=" + value, *more)
    assert r.returncode == 2, r.stdout + r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


@pytest.mark.timeout(120)
def test_one_target_per_disk(daemon_factory, disks, tmp_path):
    mgmt = daemon_factory(node_id=1, extra_flags=[
        "--node.services=mgmt,meta", "--mgmt.expect_nodes=1", "--mgmt.replication=1",
        "--mgmt.heartbeat=300ms"])
    flags = ["--node.services=storage", "--mgmt.address=%s" % mgmt.addr,
             "--mgmt.heartbeat=300ms"]
    dirs = "%s, %s/" % (disks[0], disks[1])
    node = daemon_factory(node_id=2, extra_flags=flags + ["--storage.target_dirs=" + dirs])

    def targets():
        return sorted((t for t in _status(mgmt)["targets"] if t["node"] == 2),
                      key=lambda t: t["id"])
    wait_until(lambda: len(targets()) == 2 and all(t.get("capacity") for t in targets()),
               30, 0.3, "node 2's two targets with their capacity")
    caps = [t["capacity"] for t in targets()]
    # Each disk is its own file system, counted with its own size.
    assert 12 * MiB <= caps[0] <= 16 * MiB and 28 * MiB <= caps[1] <= 32 * MiB, caps
    assert not (node.data / "targets" / "0").exists()
    for i, d in enumerate(disks):
        owner = d / "target.owner"
        assert owner.stat().st_mode & 0o777 == 0o600
        ident = (node.data / "node.ident").read_text().strip()
        assert owner.read_text() == "%s %d\n" % (ident, i)

    # Files written through them read back.
    src = tmp_path / "f"
    data = os.urandom(3 * MiB + 17)
    src.write_bytes(data)
    for k in range(4):
        r = run_strata("put", "-q", src, "/f%d" % k, "--mgmt", mgmt.addr, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    for k in range(4):
        r = subprocess.run([str(STRATA), "cat", "/f%d" % k, "--mgmt", mgmt.addr],
                           capture_output=True, timeout=60)
        assert r.returncode == 0 and r.stdout == data, r.stderr
    assert any((d / "chunks").exists() and any((d / "chunks").rglob("*")) for d in disks)

    # Swapped disks: refused, naming both slots.
    node.stop()
    swapped = "%s,%s" % (disks[1], disks[0])
    with pytest.raises(DaemonError):
        node.start(flags + ["--storage.target_dirs=" + swapped], timeout=10)
    wait_until(lambda: not node.running, 10, 0.2, "the refused daemon to exit")
    assert "belongs to target 1 of the data directory" in node.log, node.log_tail()
    # A disk that is not mounted (its directory is gone): refused, not created.
    missing = tmp_path / "disk2"
    with pytest.raises(DaemonError):
        node.start(flags + ["--storage.target_dirs=%s,%s" % (disks[0], missing)], timeout=10)
    wait_until(lambda: not node.running, 10, 0.2, "the refused daemon to exit")
    assert "a target directory is not created" in node.log, node.log_tail()
    assert not missing.exists()
    # Another node's directory: refused.
    other = daemon_factory(node_id=3, start=False, name="other")
    with pytest.raises(DaemonError):
        other.start(flags + ["--storage.target_dirs=%s" % disks[0]], timeout=10)
    wait_until(lambda: not other.running, 10, 0.2, "the other daemon to exit")
    assert "belongs to target 0 of the data directory" in other.log, other.log_tail()
    # Back in their slots, node 2 serves its files again.
    node.start(flags + ["--storage.target_dirs=" + dirs])
    for k in range(4):
        r = subprocess.run([str(STRATA), "cat", "/f%d" % k, "--mgmt", mgmt.addr],
                           capture_output=True, timeout=60)
        assert r.returncode == 0 and r.stdout == data, r.stderr
