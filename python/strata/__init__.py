"""Strata for Python: a ctypes binding over libstrata (no build step).

    import strata
    c = strata.Client("127.0.0.1:7000")      # or a 'strata local up' dir, or $STRATA_MGMT
    with c.open("/data/x.bin", "wb") as f:
        f.write(b"...")
    arr = numpy.empty(n, numpy.uint8)
    with c.open("/data/x.bin", "rb") as f:   # open()'s rules: buffered, text by default
        f.readinto(arr)
    with c.open("/ckpt/m.pt", "wb") as f:
        torch.save(model.state_dict(), f)

Submodules (imported on first use): strata.checkpoint (async, atomic,
sharded checkpoints), strata.dataset (packed shards: writer and reader),
strata.pytorch (PyTorch datasets and a prefetching loader), strata.mem,
strata.fsspec (the fsspec filesystem for strata:// URLs). The library is
found through $STRATA_LIB, $STRATA_BUILD or the repository's build trees.
"""
import importlib

from .client import (Client, DirEntry, File, Ring, StatResult, buffer_info,  # noqa: F401
                     RENAME_EXCHANGE, RENAME_NOREPLACE)

__all__ = ["Client", "File", "Ring", "StatResult", "DirEntry", "buffer_info",
           "RENAME_NOREPLACE", "RENAME_EXCHANGE", "checkpoint", "dataset", "pytorch", "mem"]


def __getattr__(name):
    if name in ("checkpoint", "dataset", "pytorch", "mem", "fsspec", "offload"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'strata' has no attribute %r" % name)
