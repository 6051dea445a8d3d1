"""strata bench ckpt (python/bench/bench_ckpt.py): checkpoint save and
restore of a llama-style model shard, scaled down, on a local cluster
(3 storage daemons, R=3) against torch.save / torch.load on a local
directory, in the same run.

Reports: the training stall of an async save (time until save() returns:
the snapshot into host buffers) against a synchronous save of the same
state, save GB/s (until committed) and restore GB/s, and torch.save /
torch.load (each file fsync'ed) on a local directory. The local
torch.load reads from the page cache (the file was just written). The
storage daemons serve reads through their page cache
(--storage.buffered_reads=true; writes stay O_DIRECT), so each round
restores three times: into existing tensors right after the save (the
daemons read their disks), the same again (from the daemons' page
cache: torch.load's footing), and into new tensors (allocated by the
restore, as torch.load does).

Also torch.save / torch.load through strata.Client.open (a BufferedWriter
of the file's chunk size; closing it publishes the file), the way a
PyTorch user writes to Strata without strata.checkpoint; with --raw, also
torch.save through the unbuffered file (buffering=0), what Client.open
returned before it followed open().

With mem nodes (--pool-replicas R, default 2; 0: none): a two-tier save
(save(..., pool=)) in the same rounds: its stall, the time until it is
committed in the memory pool (every piece on R mem nodes) and until it
is drained to the storage plane, and a restore from its pool copy.

With --ranks N[,N...]: a checkpoint burst of N ranks at once, R=1 and
R=3, against N local torch.save + fsync (bench_ckpt_ranks.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

import strata
import strata.checkpoint as ck
import strata.mem


def llama_shard(hidden, layers, vocab, tp, dtype=torch.bfloat16, seed=0):
    """One tensor-parallel rank's shard of a llama-style model: attention
    q/k/v/o, MLP gate/up/down (ffn = 8/3 hidden rounded to 256), norms,
    embedding and output head, each split tp ways like Megatron does."""
    g = torch.Generator().manual_seed(seed)
    ffn = (int(hidden * 8 / 3) + 255) // 256 * 256
    sd = {"tok_embeddings.weight": torch.randn(vocab // tp, hidden, generator=g).to(dtype)}
    for i in range(layers):
        p = "layers.%d." % i
        for n in ("wq", "wk", "wv"):
            sd[p + "attention.%s.weight" % n] = torch.randn(hidden // tp, hidden, generator=g).to(dtype)
        sd[p + "attention.wo.weight"] = torch.randn(hidden, hidden // tp, generator=g).to(dtype)
        sd[p + "feed_forward.w1.weight"] = torch.randn(ffn // tp, hidden, generator=g).to(dtype)
        sd[p + "feed_forward.w3.weight"] = torch.randn(ffn // tp, hidden, generator=g).to(dtype)
        sd[p + "feed_forward.w2.weight"] = torch.randn(hidden, ffn // tp, generator=g).to(dtype)
        sd[p + "attention_norm.weight"] = torch.ones(hidden, dtype=dtype)
        sd[p + "ffn_norm.weight"] = torch.ones(hidden, dtype=dtype)
    sd["norm.weight"] = torch.ones(hidden, dtype=dtype)
    sd["output.weight"] = torch.randn(vocab // tp, hidden, generator=g).to(dtype)
    return sd


def nbytes(sd):
    return sum(t.numel() * t.element_size() for t in sd.values())


def local_save(sd, path):
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="strata bench ckpt")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (shard = 1/tp)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mgmt", help="an existing cluster (else a local one is started)")
    ap.add_argument("--strata", default=os.environ.get("STRATA_CLI", "strata"),
                    help="the strata command (to start the local cluster)")
    ap.add_argument("--raw", action="store_true",
                    help="also torch.save through Client.open(buffering=0) (slow)")
    ap.add_argument("--ranks", help="N[,N...]: N ranks save at the same moment "
                    "(bench_ckpt_ranks.py); the other size flags are then ignored")
    ap.add_argument("--replication", default="1,3", help="--ranks: R of the clusters started")
    ap.add_argument("--size-mib", type=float, default=64, help="--ranks: each rank's shard")
    ap.add_argument("--writers", type=int, default=0,
                    help="writer threads per save (0: libstrata's default)")
    ap.add_argument("--snapshot-threads", type=int, default=0,
                    help="threads copying an async save's snapshot (0: libstrata's default)")
    ap.add_argument("--pool-replicas", type=int, default=2,
                    help="two-tier rows: copies of each piece in the memory pool (0: no "
                    "two-tier rows; with --mgmt, the pool is $STRATA_MEM)")
    ap.add_argument("--mem-nodes", type=int, default=3,
                    help="two-tier rows: mem daemons of the local cluster")
    ap.add_argument("--mem-capacity", default="2G", help="two-tier rows: each mem daemon's pool")
    a = ap.parse_args(argv)
    if a.ranks:
        import bench_ckpt_ranks
        return bench_ckpt_ranks.main(a)
    root = tempfile.mkdtemp(prefix="strata-bench-ckpt-")
    up = False
    try:
        mgmt = a.mgmt
        if not mgmt:
            cdir = os.path.join(root, "cluster")
            mem = ["--mem", str(a.mem_nodes)] if a.pool_replicas else []
            subprocess.run([a.strata, "local", "up", "--dir", cdir, "--storage", "3"] + mem +
                           ["--daemon-flags",
                            "--node.log_level=warn --storage.buffered_reads=true"
                            " --mem.capacity=%s" % a.mem_capacity],
                           check=True, stdout=subprocess.DEVNULL)
            up = True
            mgmt = cdir
        c = strata.Client(mgmt)
        c.makedirs("/bench-ckpt", exist_ok=True)
        pool = None
        if a.pool_replicas and (up or os.environ.get("STRATA_MEM")):
            pool = strata.mem.Pool(os.environ.get("STRATA_MEM") or None,
                                   replicas=a.pool_replicas,
                                   local_dir=None if os.environ.get("STRATA_MEM") else mgmt)
        elif a.pool_replicas:
            print("strata bench ckpt: no two-tier rows: --mgmt without $STRATA_MEM (the mem "
                  "nodes' addresses)")
        sd = llama_shard(a.hidden, a.layers, a.vocab, a.tp)
        size = nbytes(sd)
        print("strata bench ckpt: llama-style shard (hidden %d, %d layers, vocab %d, 1/%d tensor "
              "parallel, bf16): %d tensors, %.1f MiB; cluster of 3 storage daemons, R=3; "
              "baseline torch.save/torch.load on %s (fsync'ed)"
              % (a.hidden, a.layers, a.vocab, a.tp, len(sd), size / 2**20, root))
        # warm-up: the host snapshot buffer is allocated once and reused
        ck.save(sd, "/bench-ckpt/warm", client=c, writers=a.writers).wait()
        rows = {"async_stall": [], "async_total": [], "sync": [], "restore_cold": [],
                "restore": [], "restore_new": [],
                "torch_save": [], "torch_load": [], "open_save": [], "open_load": []}
        phases = {"async": [], "sync": []}
        if a.raw:
            rows["open_save_raw"] = []
        modes = ["async", "sync"]
        if pool is not None:
            for k in ("tier_stall", "tier_commit", "tier_drained", "tier_restore"):
                rows[k] = []
            phases["tier"] = []
            modes.append("tier")
        # Nothing is removed until every round is done: a removal's chunk GC
        # runs in the background for a while and slows whatever is timed
        # next (measured on its own below). Async and sync take turns
        # going first.
        gone = []

        def timed_async(path):
            st = {}
            t0 = time.perf_counter()
            h = ck.save(sd, path, client=c, writers=a.writers, stats=st,
                        snapshot_threads=a.snapshot_threads)
            stall = time.perf_counter() - t0
            h.wait()
            return stall, time.perf_counter() - t0, st

        for i in range(a.repeat):
            for mode in modes[i % len(modes):] + modes[:i % len(modes)]:
                if mode == "tier":
                    st = {}
                    t0 = time.perf_counter()
                    h = ck.save(sd, "/bench-ckpt/tier-%d" % i, client=c, pool=pool,
                                pool_prefix="bench-ckpt", writers=a.writers, stats=st,
                                snapshot_threads=a.snapshot_threads)
                    rows["tier_stall"].append(time.perf_counter() - t0)
                    h.wait()
                    rows["tier_commit"].append(time.perf_counter() - t0)
                    h.wait_drained()
                    # until marked drained, from this t0 (the pool retention that
                    # follows is not counted)
                    rows["tier_drained"].append(h.drained_s + rows["tier_stall"][-1]
                                                - st["snapshot_s"])
                elif mode == "async":
                    stall, total, st = timed_async("/bench-ckpt/async-%d" % i)
                    rows["async_stall"].append(stall)
                    rows["async_total"].append(total)
                else:
                    st = {}
                    t0 = time.perf_counter()
                    ck.save(sd, "/bench-ckpt/sync-%d" % i, client=c, async_=False,
                            writers=a.writers, stats=st)
                    rows["sync"].append(time.perf_counter() - t0)
                phases[mode].append(st)
            into = {k: torch.empty_like(v) for k, v in sd.items()}
            for key in ("restore_cold", "restore"):
                for v in into.values():
                    v.zero_()
                t0 = time.perf_counter()
                ck.load("/bench-ckpt/sync-%d" % i, into=into, client=c)
                rows[key].append(time.perf_counter() - t0)
                assert all(torch.equal(into[k].view(torch.int16), sd[k].view(torch.int16))
                           for k in sd)
            if pool is not None:
                for v in into.values():
                    v.zero_()
                lst = {}
                t0 = time.perf_counter()
                ck.load("/bench-ckpt/tier-%d" % i, into=into, client=c, pool=pool, stats=lst)
                rows["tier_restore"].append(time.perf_counter() - t0)
                assert lst["source"] == "pool", lst
                assert all(torch.equal(into[k].view(torch.int16), sd[k].view(torch.int16))
                           for k in sd)
            del into
            t0 = time.perf_counter()
            back = ck.load("/bench-ckpt/sync-%d" % i, client=c)
            rows["restore_new"].append(time.perf_counter() - t0)
            assert all(torch.equal(back[k].view(torch.int16), sd[k].view(torch.int16)) for k in sd)
            del back
            lp = os.path.join(root, "torch-%d.pt" % i)
            t0 = time.perf_counter()
            local_save(sd, lp)
            rows["torch_save"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(lp)
            rows["torch_load"].append(time.perf_counter() - t0)
            os.unlink(lp)
            sp = "/bench-ckpt/open-%d.pt" % i
            t0 = time.perf_counter()
            with c.open(sp, "wb") as f:
                torch.save(sd, f)
            rows["open_save"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with c.open(sp, "rb") as f:
                back = torch.load(f)
            rows["open_load"].append(time.perf_counter() - t0)
            assert all(torch.equal(back[k].view(torch.int16), sd[k].view(torch.int16)) for k in sd)
            del back
            gone.append(sp)
            if a.raw:
                sp = "/bench-ckpt/open-raw-%d.pt" % i
                t0 = time.perf_counter()
                with c.open(sp, "wb", buffering=0) as f:
                    torch.save(sd, f)
                rows["open_save_raw"].append(time.perf_counter() - t0)
                gone.append(sp)
            gone += ["/bench-ckpt/async-%d" % i, "/bench-ckpt/sync-%d" % i]
            if pool is not None:
                gone.append("/bench-ckpt/tier-%d" % i)
        # What the old order measured: an async save right after two
        # checkpoints were removed, while their chunks are being freed.
        rows["async_gc"] = []
        for i in range(a.repeat):
            for p in gone[:2]:
                c.rmtree(p)
            gone = gone[2:]
            stall, total, st = timed_async("/bench-ckpt/gc-%d" % i)
            rows["async_gc"].append(total)
            gone.append("/bench-ckpt/gc-%d" % i)
        for p in gone:
            c.rmtree(p)
        if pool is not None:
            pool.mremove(pool.keys("bench-ckpt/"))
        med = {k: sorted(v)[len(v) // 2] for k, v in rows.items()}
        gb = size / 1e9
        print("%-44s %10s %10s" % ("(median of %d)" % a.repeat, "seconds", "GB/s"))
        for name, key in (("strata async save: training stall", "async_stall"),
                          ("strata async save: until committed", "async_total"),
                          ("  the same while chunk GC runs", "async_gc"),
                          ("strata sync save (stall = whole save)", "sync"),
                          ("strata two-tier save: training stall", "tier_stall"),
                          ("  until committed in the pool (R=%d)" % a.pool_replicas,
                           "tier_commit"),
                          ("  until drained to the storage plane", "tier_drained"),
                          ("strata restore from the pool copy", "tier_restore"),
                          ("strata restore, daemons read their disks", "restore_cold"),
                          ("strata restore into existing tensors", "restore"),
                          ("strata restore into new tensors", "restore_new"),
                          ("torch.save to local dir + fsync", "torch_save"),
                          ("torch.load from local dir (page cache)", "torch_load"),
                          ("torch.save through Client.open", "open_save"),
                          ("torch.save through Client.open(buffering=0)", "open_save_raw"),
                          ("torch.load through Client.open", "open_load")):
            if key in med:
                print("%-44s %10.4f %10.2f" % (name, med[key], gb / med[key]))
        for mode in modes:
            ph = {k: sorted(x.get(k, 0) for x in phases[mode])[len(phases[mode]) // 2]
                  for k in ("snapshot_s", "pool_put_s", "write_s", "sync_s", "part_s",
                            "manifest_s", "commit_s", "drain_s")}
            print("%s save phases (median s): %s; %d writers, %d writes" % (
                mode, " ".join("%s %.4f" % (k[:-2], v) for k, v in ph.items()
                               if k in phases[mode][0]),
                phases[mode][0].get("writers", 0), phases[mode][0].get("pieces", 0)))
        print("async commit / sync save = %.2f (%s 1)" % (
            med["async_total"] / med["sync"], "<=" if med["async_total"] <= med["sync"] else "> "))
        print("torch.save through Client.open / local torch.save + fsync = %.2f"
              % (med["open_save"] / med["torch_save"]))
        print("restore speed / torch.load's (page cache): into existing tensors %.2fx, "
              "into new tensors %.2fx, daemons reading their disks %.2fx (>= 1: as fast)"
              % (med["torch_load"] / med["restore"], med["torch_load"] / med["restore_new"],
                 med["torch_load"] / med["restore_cold"]))
        if pool is not None:
            print("two-tier: stall / sync save = 1/%.0f, committed in the pool / sync save = "
                  "%.2f, drained / sync save = %.2f, committed in the pool / local torch.save "
                  "+ fsync = %.2f" % (med["sync"] / med["tier_stall"],
                                      med["tier_commit"] / med["sync"],
                                      med["tier_drained"] / med["sync"],
                                      med["tier_commit"] / med["torch_save"]))
        ratio = med["async_stall"] / med["sync"]
        print("async stall / sync save = %.3f = 1/%.0f (%s 1/50)"
              % (ratio, 1 / ratio, "<=" if ratio <= 0.02 else "> "))
        print(json.dumps({"bytes": size, **{k: round(v, 5) for k, v in med.items()},
                          "stall_ratio": round(ratio, 4)}))
        c.close()
        return 0 if ratio <= 0.1 else 1
    finally:
        if up:
            subprocess.run([a.strata, "local", "down", "--dir", os.path.join(root, "cluster")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
