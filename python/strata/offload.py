"""Layer streaming and model switching over the memory plane.

    import strata.mem, strata.pytorch
    pool = strata.mem.Pool(...)
    h = strata.pytorch.offload(model, pool, prefix="llm-a")   # weights -> pool
    y = model(x)        # layer i+1 is fetched while layer i computes
    h.remove()          # weights back in the module, hooks gone

offload() moves the weights of every module that owns parameters or
buffers (a "layer", in registration order) into the pool and leaves empty
placeholders behind. A forward pre-hook on layer i makes its weights
resident (waiting for a prefetch or fetching them) and starts fetching
layer i+1 straight into freshly allocated tensors (asynchronous gets);
a forward hook releases layer i. At most two layers are resident, so a
model larger than the compute node's memory budget runs. Outputs are
bit-identical to the resident model: the same bytes, the same kernels.

put_module()/load_module() store a whole model's weights in the pool and
load them back into a module (all tensors fetched concurrently): switching
models on a compute node without reading files.
"""
from __future__ import annotations

from typing import Optional

import torch

from .mem import Pool  # noqa: F401  (the pool type offload expects)


def _layers(module):
    """(name, submodule, [(attr, tensor, is_param)]) of every module owning
    tensors directly, in registration order."""
    out = []
    for name, m in module.named_modules():
        ts = [(n, p, True) for n, p in m.named_parameters(recurse=False) if p is not None]
        ts += [(n, b, False) for n, b in m.named_buffers(recurse=False) if b is not None]
        if ts:
            out.append((name or "root", m, ts))
    return out


def _key(prefix, layer, attr):
    return "%s/%s/%s" % (prefix, layer, attr)


def put_module(pool: Pool, prefix: str, module: torch.nn.Module) -> int:
    """Stores every parameter and buffer of module under prefix/<layer>/<name>.
    Returns the number of bytes stored."""
    total = 0
    for lname, _m, ts in _layers(module):
        for attr, t, _ in ts:
            pool.put(_key(prefix, lname, attr), t.detach().contiguous())
            total += t.numel() * t.element_size()
    return total


def load_module(pool: Pool, prefix: str, module: torch.nn.Module) -> int:
    """Fills module's parameters and buffers in place from the pool (every
    tensor fetched concurrently, straight into its storage). Returns the
    number of bytes loaded."""
    ops, total = [], 0
    for lname, _m, ts in _layers(module):
        for attr, t, _ in ts:
            ops.append(pool.get_async(_key(prefix, lname, attr), t.data))
            total += t.numel() * t.element_size()
    for op in ops:
        op.wait()
    return total


class _Layer:
    def __init__(self, name, module, tensors):
        self.name, self.module = name, module
        # attr -> (shape, dtype, is_param)
        self.specs = [(a, tuple(t.shape), t.dtype, p) for a, t, p in tensors]
        self.pending = None     # [(attr, tensor, op)] of a fetch in flight
        self.resident = False


class Offloaded:
    """Handle returned by offload(): remove() restores the module."""

    def __init__(self, module, pool, prefix, layers, release):
        self.module, self.pool, self.prefix = module, pool, prefix
        self.layers, self.release_done = layers, release
        self.hooks = []
        self.fetches = 0
        self.waited = 0

    def _start_fetch(self, L):
        if L.resident or L.pending is not None:
            return
        fetched = []
        for attr, shape, dtype, _ in L.specs:
            t = torch.empty(shape, dtype=dtype)
            fetched.append((attr, t, self.pool.get_async(_key(self.prefix, L.name, attr), t)))
        L.pending = fetched
        self.fetches += 1

    def _make_resident(self, L):
        if L.resident:
            return
        self._start_fetch(L)
        for attr, t, op in L.pending:
            if not op.done():
                self.waited += 1
            op.wait()
            getattr(L.module, attr).data = t
        L.pending = None
        L.resident = True

    def _release(self, L):
        if not L.resident:
            return
        for attr, _shape, dtype, _ in L.specs:
            getattr(L.module, attr).data = torch.empty(0, dtype=dtype)
        L.resident = False

    def _pre(self, i):
        def hook(_mod, _inp):
            self._make_resident(self.layers[i])
            if i + 1 < len(self.layers):
                self._start_fetch(self.layers[i + 1])
        return hook

    def _post(self, i):
        def hook(_mod, _inp, _out):
            if self.release_done:
                self._release(self.layers[i])
        return hook

    def resident_bytes(self):
        n = 0
        for L in self.layers:
            for attr, _s, _d, _ in L.specs:
                t = getattr(L.module, attr)
                n += t.numel() * t.element_size()
        return n

    def remove(self, keep_in_pool=False):
        """Makes every layer resident again and removes the hooks (and,
        unless keep_in_pool, the weights from the pool)."""
        for h in self.hooks:
            h.remove()
        self.hooks = []
        for L in self.layers:
            self._make_resident(L)
            if not keep_in_pool:
                for attr, *_ in L.specs:
                    try:
                        self.pool.remove(_key(self.prefix, L.name, attr))
                    except FileNotFoundError:
                        pass


def offload(module: torch.nn.Module, pool: Pool, prefix: Optional[str] = None,
            release: bool = True) -> "Offloaded":
    """Moves module's weights into pool and streams them layer by layer
    during forward passes (see the module's doc). prefix names the model in
    the pool (default: a unique name). release=False keeps layers resident
    once fetched (a warm cache). Returns an Offloaded handle."""
    if prefix is None:
        prefix = "offload/%x" % id(module)
    layers = []
    for name, m, ts in _layers(module):
        for attr, t, _ in ts:
            pool.put(_key(prefix, name, attr), t.detach().contiguous())
        layers.append(_Layer(name, m, ts))
    h = Offloaded(module, pool, prefix, layers, release)
    for L in layers:
        L.resident = True
        h._release(L)
    if layers:
        # The first layer's fetch starts as the model's forward begins.
        h.hooks.append(module.register_forward_pre_hook(
            lambda _m, _i: h._start_fetch(layers[0])))
    for i, L in enumerate(layers):
        h.hooks.append(L.module.register_forward_pre_hook(h._pre(i)))
        h.hooks.append(L.module.register_forward_hook(h._post(i)))
    return h
