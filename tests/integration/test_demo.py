"""'strata demo --small': the data-ingest job end to end (src/cli/cmd_demo.c),
and a short smoke run of its benchmark, 'strata bench io' (src/cli/bench_io.c).

The demo starts its own local cluster (3 storage daemons, R=3) in --dir,
generates a small dataset, copies it in with 'strata put', reads it back in
shuffled order through the batch ring and checks every file's CRC32C. It
must exit 0, print its summary lines, stop its cluster and clean up."""

import re
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import free_port, sanitizer_reports, wait_until



@pytest.mark.timeout(150)
def test_demo_small(tmp_path, strata):
    root = tmp_path / "demo"
    cdir = root / "cluster"
    try:
        r = strata("demo", "--small", "--dir", root, timeout=120)
    finally:
        # Whatever happened, leave no daemon behind.
        if (cdir / "cluster.json").exists():
            strata("local", "down", "--dir", cdir, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    # The steps, in order.
    steps = [int(m) for m in re.findall(r"^\[(\d)/7\]", r.stdout, re.M)]
    assert steps == [1, 2, 3, 4, 5, 6, 7], out
    # The job's slice was composed (2 GPUs of the compute node, a volume,
    # pooled memory), used with its own credential, and released.
    m = re.search(r"^  composition (\S+): volume (/volumes/\S+) \(2 GiB\), pooled memory "
                  r"256 MiB, credential in (\S+)$", r.stdout, re.M)
    assert m, out
    job, vol, cred = m.groups()
    assert re.search(r"^  GPUs on compute node \d+: CUDA_VISIBLE_DEVICES=\d,\d$", r.stdout, re.M), out
    # The real 'strata put' ran, into the volume, as the job.
    assert re.search(r"^\s+\$ \S+/strata put .* --token %s .* %s$" % (re.escape(cred),
                     re.escape(vol)), r.stdout, re.M), out
    assert "not available" not in r.stdout, out
    assert "  DELETE /redfish/v1/Systems/%s" % job in r.stdout, out
    assert re.search(r"^summary: the job's slice .* was composed, used with its own "
                     r"credential and released$", r.stdout, re.M), out
    assert not Path(cred).exists()

    m = re.search(r"^summary: verified (\d+)/(\d+) files \(CRC32C", r.stdout, re.M)
    assert m, out
    assert m.group(1) == m.group(2) and int(m.group(2)) == 501, out
    m = re.search(r"^summary: samples (\d+) samples/s, ([\d.]+) MB/s, p50 ([\d.]+) ms, "
                  r"p99 ([\d.]+) ms, p99\.9 ([\d.]+) ms; shards ([\d.]+) MB/s$", r.stdout, re.M)
    assert m, out
    rate, mbs, p50, p99, p999, shard_mbs = (float(g) for g in m.groups())
    assert rate > 0 and mbs > 0 and shard_mbs > 0, out
    assert 0 < p50 <= p99 <= p999, out
    assert re.search(r"^demo: ok \(", r.stdout, re.M), out
    assert "MISMATCH" not in out, out
    assert not sanitizer_reports(out), out

    # The cluster is stopped and what the demo created is gone.
    assert "stopped" in r.stdout, out
    assert not (cdir / "cluster.json").exists()
    assert not cdir.exists() and not (root / "dataset").exists(), list(root.iterdir())


def test_demo_bad_argument(strata):
    r = strata("demo", "--no-such-flag", timeout=30)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unexpected argument '--no-such-flag'" in r.stderr


def test_demo_help(strata):
    r = strata("demo", "--help", timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--small" in r.stdout


@pytest.mark.timeout(150)
def test_bench_io_smoke(strata):
    """Every row of 'bench io' runs and has a ratio; the loopback line and
    the ratio of the sequential read to it are printed; nothing is left."""
    r = strata("bench", "io", "--seconds", "0.3", "--threads", "2", "--file-mib", "8",
               timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert not sanitizer_reports(out), out
    rows = [l for l in r.stdout.splitlines()
            if re.match(r"^(seq|rand|create|stat|unlink)", l)]
    # 3 sequential, 6 random, then the 2 sequential rows of the
    # authentication on/off comparison (metadata rates: bench meta).
    assert len(rows) == 3 + 6 + 2, out
    assert "authentication (median of 3 rounds)" in r.stdout, out
    for l in rows:
        assert "failed" not in l, l
        assert re.search(r"\s\d+\.\d\d$", l), l
    assert re.search(r"^raw loopback TCP, one-way streaming of 1 MiB writes: [\d.]+ GB/s",
                     r.stdout, re.M), out
    assert re.search(r"^libstrata seq read 1 MiB .* = \d+\.\d\d$", r.stdout, re.M), out
    # The read against raw request/response: alternating rounds, with N
    # and 2N readers, and the median of each.
    for n in (2, 4):
        rounds = re.findall(r"^libstrata seq read 1 MiB \(%d thr, cached\) / raw request/response "
                            r"\(%d conn\), round \d: [\d.]+ GB/s / [\d.]+ GB/s = \d+\.\d\d$" % (n, n),
                            r.stdout, re.M)
        assert len(rounds) == 3, out
        assert re.search(r"^libstrata seq read 1 MiB \(%d thr, cached\) / raw request/response, "
                         r"median of 3 rounds: [\d.]+ GB/s, ratio = \d+\.\d\d$" % n, r.stdout, re.M), out
    assert "stopped" in r.stdout, out


@pytest.mark.timeout(150)
def test_bench_io_against_a_deployed_cluster(strata, cluster):
    """bench io --mgmt: a cluster it did not start, the sequential rows
    each beside the raw network measured by iperf3 (its own client
    against 'iperf3 -s'); without an iperf3 server the rows are printed
    with no ratio and the reason. Nothing is left in the cluster."""
    c = cluster(3)
    port = free_port()
    srv = subprocess.Popen(["iperf3", "-s", "-p", str(port), "-B", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _listening(port), 10, 0.1, "iperf3 -s to listen")
        r = strata("bench", "io", "--mgmt", c.dir, "--iperf3", "127.0.0.1:%d" % port,
                   "--seconds", "0.3", "--threads", "2", "--file-mib", "8", timeout=120)
    finally:
        srv.kill()
        srv.wait()
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert not sanitizer_reports(out), out
    assert re.search(r"^raw network \(iperf3 -P 2 to 127.0.0.1:%d\): send [\d.]+ MB/s, "
                     r"receive [\d.]+ MB/s$" % port, r.stdout, re.M), out
    rows = [l for l in r.stdout.splitlines() if l.startswith("seq ")]
    assert len(rows) == 3, out
    for l in rows:
        assert re.search(r"MB/s\s+[\d.]+ MB/s\s+\d+\.\d\d$", l), l
    # No server: the reason, the rows without a ratio, still exit 0.
    r = strata("bench", "io", "--mgmt", c.dir, "--iperf3", "127.0.0.1:%d" % port,
               "--seconds", "0.3", "--threads", "2", "--file-mib", "8", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "raw network baseline: none: iperf3 against 127.0.0.1:%d: unable to connect" % port \
        in r.stdout, r.stdout
    assert len([l for l in r.stdout.splitlines() if re.match(r"seq .* -\s+-$", l)]) == 3, r.stdout
    r = strata("ls", "/", "--mgmt", c.dir, timeout=30)
    assert r.returncode == 0 and "bench-io" not in r.stdout, r.stdout + r.stderr


def _listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_bench_io_usage(strata):
    r = strata("bench", "io", "--help", timeout=30)
    assert r.returncode == 0 and "--threads" in r.stdout, r.stdout + r.stderr
    r = strata("bench", "io", "--threads", "0", timeout=30)
    assert r.returncode == 2 and "--threads must be in" in r.stderr, r.stdout + r.stderr
    for args, msg in [(("--mgmt", "x:1", "--iperf3", "h:0"), "--iperf3 port must be in"),
                      (("--mgmt", "x:1", "--iperf3", ":5201"), "is not HOST[:PORT]"),
                      (("--iperf3", "h"), "--iperf3 goes with --mgmt")]:
        r = strata("bench", "io", *args, timeout=30)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stdout + r.stderr)
