"""Layer streaming and model switching from the memory plane (strata bench
mem runs it: python/bench/bench_offload.py --pool ADDRS [--mgmt MGMT], with
python/ on PYTHONPATH).

Layer streaming: a stack of Linear+GELU layers run resident, then with its
weights offloaded to the pool (strata.offload.offload) and fetched per
layer; the forward time of each and whether the outputs are identical.
Model switching: the same weights loaded into a model from the pool, and,
with --mgmt, from files on the storage plane (one batch of ring reads).
"""
import sys

import torch

from strata.client import Client
from strata.mem import Pool
from strata.offload import _layers, load_module, offload, put_module


def _bench_model(nlayers, width):
    torch.manual_seed(1)
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width),
                                                     torch.nn.GELU())
                                 for _ in range(nlayers)]).eval()


def _timeit(fn, reps):
    import time
    fn()        # warm up
    best = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best.append(time.perf_counter() - t0)
    best.sort()
    return best[len(best) // 2]


def _bench(argv):
    import argparse
    import time
    ap = argparse.ArgumentParser(prog="python/bench/bench_offload.py")
    ap.add_argument("--pool", required=True)
    ap.add_argument("--mgmt", default=None)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    pool = Pool(a.pool)
    m = _bench_model(a.layers, a.width)
    x = torch.randn(a.batch, a.width)
    wbytes = sum(p.numel() * p.element_size() for p in m.parameters())
    with torch.no_grad():
        ref = m(x)
        t_res = _timeit(lambda: m(x), a.reps)
        h = offload(m, pool, prefix="bench/stream")
        t_str = _timeit(lambda: m(x), a.reps)
        same = torch.equal(m(x), ref)
        peak = max(sum(t.numel() * t.element_size() for _a, t, _o in (L.pending or []))
                   for L in h.layers) if h.layers else 0
        h.remove()
    print("layer streaming: %d layers x %.1f MiB (%.0f MiB of weights), batch %d, 1 torch thread: "
          "resident %.2f ms/forward, streamed %.2f ms/forward (overhead %.2fx, +%.2f ms), "
          "outputs identical: %s; resident weights while streaming <= 2 layers"
          % (a.layers, wbytes / a.layers / 2**20, wbytes / 2**20, a.batch, t_res * 1e3,
             t_str * 1e3, t_str / t_res, (t_str - t_res) * 1e3, same))
    del peak
    # Model switching: the same weights from the pool vs from files.
    put_module(pool, "bench/modelA", m)
    m2 = _bench_model(a.layers, a.width)
    for p in m2.parameters():
        p.data.zero_()
    t_pool = _timeit(lambda: load_module(pool, "bench/modelA", m2), a.reps)
    with torch.no_grad():
        ok = torch.equal(m2(x), ref)
    line = ("model switch (%.0f MiB): from the pool %.1f ms (%.2f GB/s), identical: %s"
            % (wbytes / 2**20, t_pool * 1e3, wbytes / t_pool / 1e9, ok))
    if a.mgmt:
        c = Client(a.mgmt)
        c.makedirs("/bench-models/A", exist_ok=True)
        files = []
        for lname, _mod, ts in _layers(m):
            for attr, t, _ in ts:
                path = "/bench-models/A/%s.%s" % (lname, attr)
                with c.open(path, "wb") as f:
                    f.write(t.detach().contiguous().numpy().tobytes())
                files.append(path)
        tensors = [t for _l, _m, ts in _layers(m2) for _a, t, _ in ts]

        def from_files():
            c.read_batch([(p, 0, t.data) for p, t in zip(files, tensors)])
        for p in m2.parameters():
            p.data.zero_()
        t_file = _timeit(from_files, a.reps)
        with torch.no_grad():
            okf = torch.equal(m2(x), ref)
        line += ("; from files on the storage plane %.1f ms (%.2f GB/s), identical: %s; "
                 "pool is %.2fx faster" % (t_file * 1e3, wbytes / t_file / 1e9, okf,
                                           t_file / t_pool))
        c.rmtree("/bench-models", missing_ok=True)
        c.close()
    print(line)
    for k in pool.keys("bench/"):
        pool.remove(k)
    pool.close()
    del time
    return 0


if __name__ == "__main__":
    sys.exit(_bench(sys.argv[1:]))
