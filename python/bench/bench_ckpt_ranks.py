"""strata bench ckpt --ranks N[,N...] (python/bench/bench_ckpt_ranks.py): a
checkpoint burst. N processes, each a data-parallel rank holding its own
llama-style shard, wait on a barrier and then save at the same moment
into one sharded checkpoint (strata.checkpoint.save, async, world_size N;
rank 0 commits once every shard is written). In the same run the same N
processes, after the same barrier, each torch.save + fsync their shard
into a local directory: the baseline.

Reported per cluster (R=1 and R=3, each a local cluster of 3 storage
daemons it starts) and per N, medians of --repeat rounds:
  - aggregate commit GB/s: N shards' bytes over the time from the barrier
    to the commit (rank 0's save done) -- beside the local aggregate
    (N shards over the time from the barrier to the last fsync), as a
    ratio;
  - each rank's stall: the time until save() returned (the snapshot into
    host memory) -- beside that rank's local torch.save + fsync, as a
    ratio.
"""
import multiprocessing as mp
import os
import shutil
import subprocess
import tempfile
import time

import torch


def shard_for(size_mib, seed):
    """A llama-style bf16 shard of about size_mib MiB (hidden 1024, 1/2
    tensor parallel; the embedding and output head take about a quarter,
    the layers the rest)."""
    from bench_ckpt import llama_shard, nbytes
    vocab = max(512, int(size_mib * 2**20 / 4 / 2048) // 2 * 2)
    base = nbytes(llama_shard(1024, 0, vocab, 2, seed=seed))
    one = nbytes(llama_shard(1024, 1, vocab, 2, seed=seed)) - base
    layers = max(0, round((size_mib * 2**20 - base) / one))
    return llama_shard(1024, layers, vocab, 2, seed=seed)


def _rank_main(mgmt, rank, n, size_mib, rounds, barrier, q, local_dir, writers):
    import strata
    import strata.checkpoint as ck
    from bench_ckpt import local_save
    try:
        c = strata.Client(mgmt)
        sd = shard_for(size_mib, seed=rank)
        # warm-up: the reused host snapshot buffer is allocated here
        ck.save(sd, "/bench-ranks/warm-%d" % rank, client=c, writers=writers).wait()
        c.rmtree("/bench-ranks/warm-%d" % rank)
        for i in range(rounds):
            st = {}
            barrier.wait(timeout=120)
            t0 = time.perf_counter()
            h = ck.save(sd, "/bench-ranks/n%d-%d" % (n, i), client=c, rank=rank,
                        world_size=n, tag="r%d" % i, writers=writers, stats=st)
            stall = time.perf_counter() - t0
            h.wait(timeout=300)
            done = time.perf_counter() - t0
            barrier.wait(timeout=120)
            lp = os.path.join(local_dir, "rank%d-%d.pt" % (rank, i))
            t0 = time.perf_counter()
            local_save(sd, lp)
            local = time.perf_counter() - t0
            os.unlink(lp)
            q.put(("ok", rank, i, t0, stall, done, local, st))
        c.close()
    except BaseException as e:  # reported to the parent
        q.put(("error", rank, repr(e)))


def run_n(mgmt, n, size_mib, rounds, local_dir, writers, nbytes_of):
    ctx = mp.get_context("spawn")   # no fork of a process running libstrata or torch threads
    barrier = ctx.Barrier(n)
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(mgmt, r, n, size_mib, rounds, barrier, q,
                                                  local_dir, writers))
             for r in range(n)]
    for p in procs:
        p.start()
    res = []
    deadline = time.monotonic() + 600
    try:
        while len(res) < n * rounds:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("bench ckpt --ranks %d: ranks did not finish in 600 s" % n)
            m = q.get(timeout=left)
            if m[0] == "error":
                raise RuntimeError("rank %d failed: %s" % (m[1], m[2]))
            res.append(m[1:])
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    size = nbytes_of(size_mib)
    out = []
    for i in range(rounds):
        rr = sorted((x for x in res if x[1] == i), key=lambda x: x[0])
        commit = rr[0][4]                   # rank 0's save: until committed
        local = max(x[5] for x in rr)       # the last rank's local fsync
        out.append({"commit": commit, "local": local, "gb": n * size / 1e9,
                    "stalls": [x[3] for x in rr], "locals": [x[5] for x in rr],
                    "write_s": [x[6].get("write_s", 0) for x in rr],
                    "wait_s": rr[0][6].get("wait_s", 0)})
    return out


def _median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main(a):
    import strata
    from bench_ckpt import nbytes
    ranks = [int(x) for x in str(a.ranks).split(",") if x]
    reps = [int(x) for x in str(a.replication).split(",") if x]
    sizes = {}

    def nbytes_of(mib):
        if mib not in sizes:
            sizes[mib] = nbytes(shard_for(mib, 0))
        return sizes[mib]

    size = nbytes_of(a.size_mib)
    root = tempfile.mkdtemp(prefix="strata-bench-ranks-")
    local_dir = os.path.join(root, "local")
    os.makedirs(local_dir)
    print("strata bench ckpt --ranks: %s ranks, each a llama-style bf16 shard of %.1f MiB, "
          "saved at once after a barrier (async save, one checkpoint, rank 0 commits); "
          "baseline: the same ranks each torch.save + fsync to %s, same run; median of %d"
          % (",".join(map(str, ranks)), size / 2**20, local_dir, a.repeat), flush=True)
    rows = []
    try:
        for R in reps:
            cdir = os.path.join(root, "cluster-r%d" % R)
            subprocess.run([a.strata, "local", "up", "--dir", cdir, "--storage", "3",
                            "--replication", str(R)], check=True, stdout=subprocess.DEVNULL,
                           timeout=120)
            try:
                c = strata.Client(cdir)
                c.makedirs("/bench-ranks", exist_ok=True)
                for n in ranks:
                    rs = run_n(cdir, n, a.size_mib, a.repeat, local_dir, a.writers, nbytes_of)
                    for i in range(a.repeat):
                        c.rmtree("/bench-ranks/n%d-%d" % (n, i))
                    commit = _median([r["commit"] for r in rs])
                    local = _median([r["local"] for r in rs])
                    gb = rs[0]["gb"]
                    stalls = [_median([r["stalls"][k] for r in rs]) for k in range(n)]
                    locals_ = [_median([r["locals"][k] for r in rs]) for k in range(n)]
                    rows.append((R, n, gb / commit, gb / local, stalls, locals_, commit, local))
                    print("R=%d ranks=%d: aggregate commit %7.3f GB/s (%.3f s) | local torch.save"
                          "+fsync %7.3f GB/s (%.3f s) | ratio %.2f"
                          % (R, n, gb / commit, commit, gb / local, local,
                             (gb / commit) / (gb / local)), flush=True)
                    for k in range(n):
                        print("R=%d ranks=%d: rank %d stall %.4f s | local torch.save+fsync "
                              "%.4f s | ratio 1/%.0f"
                              % (R, n, k, stalls[k], locals_[k],
                                 locals_[k] / max(stalls[k], 1e-9)), flush=True)
                c.close()
            finally:
                subprocess.run([a.strata, "local", "down", "--dir", cdir],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("%-4s %5s %12s %12s %7s %14s" % ("R", "ranks", "strata GB/s", "local GB/s", "ratio",
                                          "max stall s"))
    for R, n, sg, lg, stalls, _, _, _ in rows:
        print("%-4d %5d %12.3f %12.3f %7.2f %14.4f" % (R, n, sg, lg, sg / lg, max(stalls)))
    return 0
