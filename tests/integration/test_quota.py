"""Directory quotas (issue 15, docs/namespace.md "Quotas"): meta enforces
byte and inode limits on a directory tree exactly at the limit, with
EDQUOT; 'strata quota set|get' sets and reads them (set needs an admin
token); usage shows in 'strata status' and meta's /metrics, and survives a
restart of the cluster.

One 'strata local up' cluster for the module; each test works under its
own top-level directory. The restart test comes last: it takes the
cluster down and up again.
"""
import json
import re

import pytest

from conftest import (fetch_metrics_text, parse_metrics, run_strata, sanitizer_reports,
                      signed_token, wait_until)

DQUOT = "Disk quota exceeded"


@pytest.fixture(scope="module")
def qc(module_cluster):
    return module_cluster(1, timeout=90)


@pytest.fixture
def fs(qc):
    """fs(*args, ok=None) -> CompletedProcess of 'strata ARGS' against the
    cluster with the admin token ($STRATA_TOKEN_FILE)."""
    def fn(*args, ok=None, env=None):
        e = {"STRATA_MGMT": json.loads((qc.dir / "cluster.json").read_text())["mgmt"]}
        e.update(env or {})
        r = run_strata(*args, timeout=60, env=e)
        assert not sanitizer_reports(r.stderr), r.stderr
        if ok is not None:
            assert (r.returncode == 0) == ok, "strata %s: %d\n%s%s" % (
                args, r.returncode, r.stdout, r.stderr)
        return r
    return fn


@pytest.fixture
def local(tmp_path):
    """local(name, size) -> a local file of size bytes."""
    def fn(name, size):
        p = tmp_path / name
        p.write_bytes(bytes((i * 7) & 0xff for i in range(size)))
        return p
    return fn


def usage(fs, path):
    """{max_bytes, max_inodes, bytes, inodes} from 'strata quota get'."""
    r = fs("quota", "get", path, ok=True)
    m = re.search(r"limits: bytes=(\d+) inodes=(\d+) used: bytes=(\d+) inodes=(\d+)", r.stdout)
    assert m, r.stdout
    return dict(zip(("max_bytes", "max_inodes", "bytes", "inodes"), map(int, m.groups())))


def refused(r):
    assert r.returncode == 1, r.stdout + r.stderr
    assert DQUOT in r.stderr, r.stderr


def test_byte_quota_is_exact(fs, local):
    fs("mkdir", "/qb", ok=True)
    assert "no quota" in fs("quota", "get", "/qb", ok=True).stdout
    fs("quota", "set", "/qb", "--bytes", "10000", ok=True)
    fs("put", "-q", local("a", 6000), "/qb/a", ok=True)
    # The last byte fits ...
    fs("put", "-q", local("b", 4000), "/qb/b", ok=True)
    assert usage(fs, "/qb") == {"max_bytes": 10000, "max_inodes": 0, "bytes": 10000,
                                "inodes": 2}
    # ... one more does not, and the refusal says why.
    refused(fs("put", "-q", local("c", 1), "/qb/c"))
    assert usage(fs, "/qb")["bytes"] == 10000
    # Removing the limit lets it grow.
    fs("quota", "set", "/qb", "--bytes", "0", ok=True)
    assert "no quota" in fs("quota", "get", "/qb", ok=True).stdout
    fs("put", "-q", local("d", 100), "/qb/d", ok=True)


def test_inode_quota_is_exact(fs, local):
    fs("mkdir", "/qi", ok=True)
    fs("quota", "set", "/qi", "--inodes", "3", ok=True)
    fs("mkdir", "/qi/a", ok=True)
    fs("put", "-q", local("f", 10), "/qi/a/f", ok=True)
    fs("put", "-q", local("g", 10), "/qi/g", ok=True)      # the 3rd fits
    refused(fs("mkdir", "/qi/h"))                           # the 4th does not
    refused(fs("put", "-q", local("h", 0), "/qi/a/h"))
    u = usage(fs, "/qi")
    assert (u["inodes"], u["bytes"]) == (3, 20), u
    # Setting the other limit keeps this one.
    fs("quota", "set", "/qi", "--bytes", "1M", ok=True)
    assert usage(fs, "/qi")["max_inodes"] == 3


def test_nested_quotas_all_apply(fs, local):
    fs("mkdir", "-p", "/qn/in", ok=True)
    fs("put", "-q", local("pre", 500), "/qn/in/pre", ok=True)
    fs("quota", "set", "/qn", "--bytes", "5000", ok=True)
    # A quota set on a tree with content counts it.
    assert usage(fs, "/qn")["bytes"] == 500
    fs("quota", "set", "/qn/in", "--bytes", "2000", ok=True)
    assert usage(fs, "/qn/in")["bytes"] == 500
    fs("put", "-q", local("x", 1500), "/qn/in/x", ok=True)     # inner full
    refused(fs("put", "-q", local("y", 1), "/qn/in/y"))
    fs("put", "-q", local("z", 3000), "/qn/z", ok=True)        # outer full
    refused(fs("put", "-q", local("w", 1), "/qn/w"))
    assert usage(fs, "/qn")["bytes"] == 5000
    # The outer limit binds inside the inner root too.
    fs("rm", "/qn/in/x", ok=True)
    fs("quota", "set", "/qn/in", "--bytes", "100000", ok=True)
    fs("put", "-q", local("v", 1500), "/qn/in/v", ok=True)
    refused(fs("put", "-q", local("u", 1), "/qn/in/u"))


def test_rename_into_a_full_quota_is_refused_and_unlink_frees(fs, local):
    fs("mkdir", "/qr", ok=True)
    fs("mkdir", "/qfree", ok=True)
    fs("quota", "set", "/qr", "--bytes", "1000", "--inodes", "10", ok=True)
    fs("put", "-q", local("full", 1000), "/qr/full", ok=True)
    fs("put", "-q", local("x", 10), "/qfree/x", ok=True)
    refused(fs("mv", "/qfree/x", "/qr/x"))
    fs("stat", "/qfree/x", ok=True)
    assert usage(fs, "/qr")["bytes"] == 1000
    # Unlinking frees the bytes and the inode: the move fits now.
    fs("rm", "/qr/full", ok=True)
    u = usage(fs, "/qr")
    assert (u["bytes"], u["inodes"]) == (0, 0), u
    fs("mv", "/qfree/x", "/qr/x", ok=True)
    assert usage(fs, "/qr")["bytes"] == 10
    # Moving out gives it back.
    fs("mv", "/qr/x", "/qfree/x", ok=True)
    assert usage(fs, "/qr")["bytes"] == 0


def test_non_admin_token_cannot_set_a_quota(fs, qc, tmp_path):
    tok = signed_token(qc.dir, tmp_path / "u1000.token", "--expires", "1h", "--uid", "1000",
                       "--gid", "1000", "--path", "rw:/")
    fs("mkdir", "/qt", ok=True)
    fs("quota", "set", "/qt", "--inodes", "5", ok=True)
    r = fs("quota", "set", "/qt", "--inodes", "500", "--token", tok)
    assert r.returncode == 1 and "ermission denied" in r.stderr, r.stderr
    assert usage(fs, "/qt")["max_inodes"] == 5
    # Reading it needs only a token that reaches the directory.
    r = fs("quota", "get", "/qt", "--token", tok, ok=True)
    assert "inodes=5" in r.stdout


def test_status_and_metrics_show_usage(fs, qc, local):
    fs("mkdir", "/qm", ok=True)
    fs("quota", "set", "/qm", "--bytes", "4096", ok=True)
    fs("put", "-q", local("m", 1024), "/qm/m", ok=True)
    r = fs("status")
    row = [l for l in r.stdout.splitlines() if l.startswith("/qm ")]
    assert row and "1.0 KiB of 4.0 KiB" in row[0], r.stdout
    meta = next(n for n in qc.nodes if "meta" in n.services.split(","))
    metrics = lambda: parse_metrics(fetch_metrics_text(meta.metrics_port)[2])
    key = 'strata_meta_quota_bytes_used{path="/qm"}'
    wait_until(lambda: metrics().get(key) == 1024, 10, 0.2, "the quota in /metrics")
    m = metrics()
    assert m['strata_meta_quota_bytes_limit{path="/qm"}'] == 4096
    assert m['strata_meta_quota_inodes_used{path="/qm"}'] == 1
    assert m["strata_meta_quota_roots"] >= 1


def test_usage_survives_a_restart(fs, qc, local):
    fs("mkdir", "/qs", ok=True)
    fs("quota", "set", "/qs", "--bytes", "3000", "--inodes", "2", ok=True)
    fs("put", "-q", local("s", 3000), "/qs/s", ok=True)
    before = usage(fs, "/qs")
    r = qc.down()
    assert r.returncode == 0, r.stderr
    qc.up(1, timeout=90)
    assert usage(fs, "/qs") == before
    refused(fs("put", "-q", local("t", 1), "/qs/t"))
    fs("rm", "/qs/s", ok=True)
    fs("put", "-q", local("t", 3000), "/qs/t", ok=True)
