#!/usr/bin/env python3
"""Rebalance throughput, and client writes during a rebalance against
without one, in one run (docs/operations.md "Adding a host").

A 3-storage-node R=3 'strata local up' cluster gets PRELOAD MiB; two
storage daemons are added with 'strata local add' while the rebalancer is
paused; 'strata put' of a WRITE MiB file is timed (baseline, paused);
then the rebalancer resumes and the same put runs back to back until the
rebalance is done (during); then once more (after, a second baseline).
Each phase writes over one file, so the data does not grow while the
rebalance runs; the cluster's directory is removed at the end.
Rebalance throughput: the bytes the added nodes' resyncs copied
(strata_storage_synced_bytes_total) over the time from resume to
'balanced'.

WRITE_MIB 0: no client writes, the rebalance alone (PRELOAD is written
in 64 MiB files).

usage: bench/rebalance.py BUILD_DIR [PRELOAD_MIB] [WRITE_MIB]"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

build = sys.argv[1]
preload = int(sys.argv[2]) if len(sys.argv) > 2 else 768
wmib = int(sys.argv[3]) if len(sys.argv) > 3 else 64
strata = os.path.join(build, "src", "cli", "strata")
os.environ["PATH"] = os.path.join(build, "src", "stratad") + ":" + os.environ["PATH"]
d = tempfile.mkdtemp(prefix="strata-rb-bench.")


def cli(*args, check=True):
    r = subprocess.run([strata, *[str(a) for a in args], "--dir", d], capture_output=True,
                       text=True, timeout=600)
    if check and r.returncode:
        sys.exit("strata %s: %s%s" % (" ".join(map(str, args)), r.stdout, r.stderr))
    return r.stdout


def rebalance():
    return json.loads(cli("rebalance", "status", "--json"))


def synced_bytes(node_ids):
    total = 0
    for n in node_ids:
        port = open("%s/node%d/stratad.addr" % (d, n)).read().split("\n")[1]
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port).read().decode()
        for line in text.splitlines():
            if line.startswith("strata_storage_synced_bytes_total"):
                total += float(line.split()[-1])
    return total


def put(src, dst):
    t = time.monotonic()
    cli("put", "-q", src, dst)
    return time.monotonic() - t


subprocess.run([strata, "local", "up", "--dir", d, "--storage", "3"], check=True,
               stdout=subprocess.DEVNULL)
try:
    src = os.path.join(d, "src.bin")
    with open(src, "wb") as f:
        for _ in range(wmib or 64):
            f.write(os.urandom(1 << 20))
    for i in range(preload // (wmib or 64)):
        cli("put", "-q", src, "/pre%d" % i)
    cli("rebalance", "pause")
    before = {n["id"] for n in json.load(open(os.path.join(d, "cluster.json")))["nodes"]}
    cli("local", "add", "--storage", "2")
    new = sorted({n["id"] for n in json.load(open(os.path.join(d, "cluster.json")))["nodes"]}
                 - before)
    base = [put(src, "/base") for _ in range(3 if wmib else 0)]
    cli("rebalance", "resume")
    t0 = time.monotonic()
    during, t_done, k = [], None, 0
    while t_done is None and wmib:
        dt = put(src, "/during")
        k += 1
        st = rebalance()
        if st["state"] == "balanced":
            t_done = time.monotonic()
        # A put counts as "during" when the rebalance was still moving as it ended.
        if t_done is None or t_done - dt > t0:
            during.append(dt)
    while rebalance()["state"] != "balanced":
        time.sleep(0.05)
    t_done = min(t_done or time.monotonic(), time.monotonic())
    after = [put(src, "/after") for _ in range(3 if wmib else 0)]
    st = rebalance()
    moved = synced_bytes(new)
    secs = t_done - t0
    med = lambda xs: sorted(xs)[len(xs) // 2]
    bw = lambda s: wmib / s
    print("preload %d MiB, R=3, 3 -> 5 storage nodes, %d moves (mgmt.rebalance_max_moves=1)"
          % (preload, st["moves_done"]))
    print("rebalance: %.1f MiB copied by the added nodes' resyncs in %.2f s = %.1f MiB/s"
          " (mgmt's estimate: %.1f MiB)" % (moved / 2**20, secs, moved / 2**20 / secs,
                                          st["bytes_moved"] / 2**20))
    if not wmib:
        sys.exit(0)
    print("client put of %d MiB (median MiB/s; ratio: to the paused baseline):" % wmib)
    print("  without rebalance (paused) %8.1f" % bw(med(base)))
    print("  during rebalance           %8.1f   ratio %.2f  (%d puts)"
          % (bw(med(during)), med(base) / med(during), len(during)))
    print("  after (balanced)           %8.1f   ratio %.2f" % (bw(med(after)),
                                                             med(base) / med(after)))
finally:
    subprocess.run([strata, "local", "down", "--dir", d], stdout=subprocess.DEVNULL)
    shutil.rmtree(d, ignore_errors=True)
