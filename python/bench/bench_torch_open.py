"""torch.save / torch.load through strata.Client.open against a local file
(python/bench/bench_torch_open.py --mgmt DIR_OR_ADDR [--hidden H]
[--layers L] [--vocab V] [--repeat R] [--local DIR]), with python/ on
PYTHONPATH.

The same llama-style bf16 shard as bench_ckpt.py, saved in turn with
torch.save to a local file + fsync, through Client.open (buffered, as
open() does), through Client.open(buffering=0) (the raw file, what
Client.open returned before issue 23) and into memory (io.BytesIO: the
serialization alone); then loaded back from the local file and through
Client.open. Nothing else runs on the cluster meanwhile: unlike `strata
bench ckpt`, no checkpoint is written or removed between the rounds.
Prints the median of each and one JSON line.
"""
import argparse
import io
import json
import os
import sys
import tempfile
import time

import torch

import strata
from bench_ckpt import llama_shard, nbytes


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python/bench/bench_torch_open.py")
    ap.add_argument("--mgmt", required=True, help="a cluster address or 'strata local up' dir")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--local", default=None, help="directory for the local files (a tmp dir)")
    a = ap.parse_args(argv)
    c = strata.Client(a.mgmt)
    c.makedirs("/bench-torch-open", exist_ok=True)
    sd = llama_shard(a.hidden, a.layers, a.vocab, 2)
    size = nbytes(sd)
    ldir = tempfile.mkdtemp(prefix="strata-bench-torch-", dir=a.local)
    lp, sp = os.path.join(ldir, "m.pt"), "/bench-torch-open/m.pt"

    def local_save():
        with open(lp, "wb") as f:
            torch.save(sd, f)
            f.flush()
            os.fsync(f.fileno())

    def open_save(**kw):
        with c.open(sp, "wb", **kw) as f:
            torch.save(sd, f)

    def open_load():
        with c.open(sp, "rb") as f:
            return torch.load(f)

    runs = [("torch.save to memory (io.BytesIO)", "memory", lambda: torch.save(sd, io.BytesIO())),
            ("torch.save to local file + fsync", "local_save", local_save),
            ("torch.save through Client.open", "open_save", open_save),
            ("torch.save through Client.open(buffering=0)", "open_save_raw",
             lambda: open_save(buffering=0)),
            ("torch.load from local file (page cache)", "local_load", lambda: torch.load(lp)),
            ("torch.load through Client.open", "open_load", open_load)]
    times = {key: [] for _, key, _ in runs}
    try:
        for fn in (local_save, open_save):      # warm up: first file, first connection
            fn()
        for _ in range(a.repeat):
            for _, key, fn in runs:
                t0 = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t0)
    finally:
        c.rmtree("/bench-torch-open", missing_ok=True)
        if os.path.exists(lp):
            os.unlink(lp)
        os.rmdir(ldir)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print("torch.save/torch.load of a llama-style bf16 shard: %d tensors, %.1f MiB"
          % (len(sd), size / 2**20))
    print("%-46s %10s %10s" % ("(median of %d)" % a.repeat, "seconds", "GB/s"))
    for name, key, _ in runs:
        print("%-46s %10.4f %10.2f" % (name, med[key], size / 1e9 / med[key]))
    print("through Client.open / local + fsync: save %.2f, load %.2f"
          % (med["open_save"] / med["local_save"], med["open_load"] / med["local_load"]))
    print(json.dumps({"bytes": size, **{k: round(v, 5) for k, v in med.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
