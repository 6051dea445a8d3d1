"""Checkpoints on Strata: async, atomic, sharded (format: docs/python.md).

    h = strata.checkpoint.save(model.state_dict(), "/ckpt/step-000100",
                               client=c, keep_last=3)   # returns after the snapshot
    ...training continues...
    h.wait()                                              # optional
    strata.checkpoint.load("/ckpt/step-000100", into=model.state_dict(), client=c)

save() copies every tensor into a host buffer (reused across saves), then
a background thread hands the buffer to libstrata's strata_ckpt_save
(include/strata/checkpoint.h; the GIL is released for the whole write;
with overlap=True it starts during the copy and writes each tensor as
soon as it is copied):
the shard is written with many writes in flight, the manifest last, and
the directory is renamed into place, so PATH exists only when complete
and an interrupted save leaves the previous checkpoint as it was.

A state is any tree of dicts, lists and tuples whose leaves are torch
tensors, numpy arrays, numbers, strings, None (other objects are pickled
into the manifest). Tensors are stored as raw bytes under their key path
("layer.weight", "state.0.exp_avg"); the tree is the shard's "meta".

Loading is safe by default, like torch.load(weights_only=True): pickled
leaves are read by a restricted unpickler that builds only tensors,
containers and plain scalars, and refuses anything else by name
(UnsafeCheckpointError) unless load(..., allow_pickle=True).
"""
from __future__ import annotations

import base64
import ctypes
import io
import json
import math
import mmap
import os
import pickle
import sys
import threading
import time
from typing import Any, List, Optional, Tuple, Union

from ._lib import Closable, check, declare
from .client import Client, buffer_info

_P = ctypes.c_void_p
MAX_DIMS = 16
ALIGN = 4096


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("ndim", ctypes.c_uint32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", _P),
                ("len", ctypes.c_uint64)]


class _SaveStats(ctypes.Structure):
    _fields_ = [("stats_size", ctypes.c_size_t), ("write_s", ctypes.c_double),
                ("sync_s", ctypes.c_double), ("part_s", ctypes.c_double),
                ("wait_s", ctypes.c_double), ("manifest_s", ctypes.c_double),
                ("commit_s", ctypes.c_double), ("prune_s", ctypes.c_double),
                ("bytes", ctypes.c_uint64), ("writers", ctypes.c_uint32),
                ("pieces", ctypes.c_uint32)]


class _SaveOpts(ctypes.Structure):
    _fields_ = [("opts_size", ctypes.c_size_t), ("rank", ctypes.c_uint32),
                ("world_size", ctypes.c_uint32), ("tag", ctypes.c_char_p),
                ("meta_json", ctypes.c_char_p), ("depth", ctypes.c_uint32),
                ("io_size", ctypes.c_uint32), ("wait_ms", ctypes.c_uint32),
                ("keep_last", ctypes.c_uint32), ("replace", ctypes.c_int),
                ("writers", ctypes.c_uint32), ("stats", ctypes.POINTER(_SaveStats)),
                ("ready", ctypes.POINTER(ctypes.c_uint64))]


class _Info(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("rank", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32), ("shape", ctypes.c_int64 * MAX_DIMS),
                ("len", ctypes.c_uint64), ("crc32c", ctypes.c_uint32)]


class _Copy(ctypes.Structure):
    _fields_ = [("dst", _P), ("src", _P), ("len", ctypes.c_size_t)]


class _Dst(ctypes.Structure):
    _fields_ = [("index", ctypes.c_size_t), ("data", _P), ("len", ctypes.c_uint64)]


_PROTOS = {
    "strata_ckpt_save_opts_init": (None, [ctypes.POINTER(_SaveOpts), ctypes.c_size_t]),
    "strata_ckpt_save": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_Tensor),
                                        ctypes.c_size_t, ctypes.POINTER(_SaveOpts)]),
    "strata_ckpt_open": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "strata_ckpt_close": (None, [_P]),
    "strata_ckpt_count": (ctypes.c_size_t, [_P]),
    "strata_ckpt_world_size": (ctypes.c_uint32, [_P]),
    "strata_ckpt_info": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.POINTER(_Info)]),
    "strata_ckpt_find": (ctypes.c_ssize_t, [_P, ctypes.c_char_p, ctypes.c_int]),
    "strata_ckpt_meta": (ctypes.c_char_p, [_P, ctypes.c_uint32]),
    "strata_ckpt_read": (ctypes.c_int, [_P, ctypes.POINTER(_Dst), ctypes.c_size_t,
                                        ctypes.c_uint32]),
    "strata_ckpt_prune": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_uint32]),
    "strata_ckpt_clean_partial": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_uint32]),
    "strata_ckpt_latest": (ctypes.c_ssize_t, [_P, ctypes.c_char_p, ctypes.c_char_p,
                                              ctypes.c_size_t]),
    "strata_crc32c": (ctypes.c_uint32, [ctypes.c_uint32, _P, ctypes.c_size_t]),
    "strata_ckpt_snapshot": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_uint32]),
}


def _lib():
    return declare(_PROTOS)


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC32C of a buffer (libstrata's, hardware accelerated)."""
    addr, n, keep = buffer_info(data, False)
    r = _lib().strata_crc32c(crc, addr, n)
    del keep
    return r


_default = None


def _client(client):
    global _default
    if client is not None:
        return client
    if _default is None:
        _default = Client()
    return _default


def _torch():
    return sys.modules.get("torch")


def _is_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _is_ndarray(x):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


# ---------------------------------------------------------------------------
# The tree <-> JSON "meta" with tensors named by key path.

def _encode(obj, prefix, leaves, names):
    if _is_tensor(obj) or _is_ndarray(obj):
        name = prefix or "tensor"
        if name in names:
            k = 1
            while "%s#%d" % (name, k) in names:
                k += 1
            name = "%s#%d" % (name, k)
        names.add(name)
        leaves.append((name, obj))
        return {"$t": name, "np": 1} if _is_ndarray(obj) else {"$t": name}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int, bool)) and k is not None:
                return {"$pickle": base64.b64encode(pickle.dumps(obj)).decode()}
            items.append([k, _encode(v, "%s.%s" % (prefix, k) if prefix else str(k),
                                     leaves, names)])
        return {"$d": items}
    if isinstance(obj, (list, tuple)):
        v = [_encode(x, "%s.%d" % (prefix, i) if prefix else str(i), leaves, names)
             for i, x in enumerate(obj)]
        return v if isinstance(obj, list) else {"$tuple": v}
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"$f": repr(obj)}
    return {"$pickle": base64.b64encode(pickle.dumps(obj)).decode()}


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds a pickled object that is not a tensor, a
    container or a plain scalar, and load() was not given allow_pickle=True.
    .name is the refused global ("module.qualname"), .key the key path of
    the leaf that holds it."""

    def __init__(self, msg, name, key):
        super().__init__(msg)
        self.name, self.key = name, key


def _torch_load_tensor_bytes(b):
    # What pickle.dumps(tensor) stores (torch.storage._load_from_bytes),
    # read back with torch's own restricted unpickler.
    torch = _torch() or __import__("torch")
    return torch.load(io.BytesIO(b), weights_only=True)


# Globals a pickled leaf may name without allow_pickle: containers, plain
# scalars, numpy scalars and arrays, torch tensors, sizes and dtypes.
_SAFE_GLOBALS = {
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
    ("builtins", "slice"), ("builtins", "range"), ("builtins", "bytearray"),
    ("builtins", "list"), ("builtins", "dict"), ("builtins", "tuple"),
    ("collections", "OrderedDict"), ("collections", "deque"),
    ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy.core.multiarray", "scalar"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"), ("numpy._core.multiarray", "_reconstruct"),
    ("torch", "Size"), ("torch", "device"),
    ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
}


class _SafeUnpickler(pickle.Unpickler):
    """pickle.Unpickler that resolves only _SAFE_GLOBALS (and torch dtypes,
    numpy dtype classes); the rest is refused by name."""

    def __init__(self, data, key):
        super().__init__(io.BytesIO(data))
        self.key = key

    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _torch_load_tensor_bytes
        if module == "torch":
            torch = _torch()
            if torch is not None and isinstance(getattr(torch, name, None), torch.dtype):
                return getattr(torch, name)
        if module in ("numpy.dtypes",) and name.endswith("DType"):
            return super().find_class(module, name)
        what = "%s.%s" % (module, name)
        raise UnsafeCheckpointError(
            "strata: refusing to unpickle '%s' at key %r: only tensors, containers and plain "
            "scalars load by default; pass allow_pickle=True to load a checkpoint you trust"
            % (what, self.key or "<root>"), what, self.key)

    def persistent_load(self, pid):
        raise UnsafeCheckpointError("strata: refusing a persistent id at key %r"
                                    % (self.key or "<root>"), "persistent_load", self.key)


def _unpickle(b64, key, allow_pickle):
    data = base64.b64decode(b64)
    if allow_pickle:
        return pickle.loads(data)
    return _SafeUnpickler(data, key).load()


def _decode(j, get, allow_pickle=False, key=""):
    def sub(k):
        return "%s.%s" % (key, k) if key else str(k)
    if isinstance(j, list):
        return [_decode(x, get, allow_pickle, sub(i)) for i, x in enumerate(j)]
    if isinstance(j, dict):
        if "$t" in j:
            return get(j["$t"], bool(j.get("np")))
        if "$d" in j:
            return {k: _decode(v, get, allow_pickle, sub(k)) for k, v in j["$d"]}
        if "$tuple" in j:
            return tuple(_decode(x, get, allow_pickle, sub(i))
                         for i, x in enumerate(j["$tuple"]))
        if "$f" in j:
            return float(j["$f"])
        if "$pickle" in j:
            return _unpickle(j["$pickle"], key, allow_pickle)
        return {k: _decode(v, get, allow_pickle, sub(k)) for k, v in j.items()}
    return j


def _dtype_name(x):
    if _is_ndarray(x):
        return x.dtype.name
    return str(x.dtype).replace("torch.", "")


def _nbytes(x):
    return x.nbytes if _is_ndarray(x) else x.numel() * x.element_size()


# ---------------------------------------------------------------------------
# Host buffers for snapshots, reused across saves (fresh memory costs page
# faults on every save).

_pool_lock = threading.Lock()
_pool = []


def _host_pages(n):
    """n bytes of anonymous memory asking for transparent huge pages: a
    copy into 2 MiB pages takes far fewer TLB misses than into 4 KiB ones
    (docs/python.md, "What an async save's stall is")."""
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass            # no THP here: 4 KiB pages, still correct
    return m


def _take_buffer(n):
    torch = _torch()
    with _pool_lock:
        for i, b in enumerate(_pool):
            if _nbytes(b) >= n:
                return _pool.pop(i)
    n = max(n, ALIGN)
    if torch is not None and torch.cuda.is_available():
        # GPU leaves are copied by DMA: pinned memory
        return torch.empty(n, dtype=torch.uint8, pin_memory=True)
    if torch is not None:
        return torch.frombuffer(_host_pages(n), dtype=torch.uint8)
    import numpy
    return numpy.frombuffer(_host_pages(n), numpy.uint8)


def _copy(copies, threads=0):
    """Does copies [(dst address, src address, nbytes)] with libstrata's
    snapshot copy (threads threads, 0: its default), the GIL released."""
    arr = (_Copy * max(len(copies), 1))(*[_Copy(d, s, n) for d, s, n in copies])
    check(_lib().strata_ckpt_snapshot(arr, len(copies), threads), "snapshot")


def _give_buffer(b):
    with _pool_lock:
        _pool.append(b)
        _pool.sort(key=_nbytes)
        del _pool[:-2]      # keep the two largest


def _plan(leaves):
    """Lays the leaves out in one host buffer. Returns (buffer, [(name,
    dtype, shape, offset, nbytes)])."""
    layout = []
    off = 0
    for name, x in leaves:
        n = _nbytes(x)
        layout.append((name, _dtype_name(x), tuple(x.shape), off, n))
        off += (n + ALIGN - 1) // ALIGN * ALIGN
    return _take_buffer(off), layout


def _snapshot(leaves, buf, layout, ready=None, threads=0):
    """Copies every leaf into buf at its place in layout. Without ready,
    the CPU leaves in one call to libstrata's snapshot copy, by threads
    threads at once (0: its default). ready (a ctypes.c_uint64): leaf
    by leaf in order, raised to i + 1 once leaf i is in place, so a save
    already running writes it while the later ones are copied (GPU
    leaves count only once every copy is synchronized)."""
    torch = _torch()
    base = buffer_info(buf, True)[0]
    cuda = False
    copies, keep = [], []
    for i, ((name, x), (_, _, _, o, n)) in enumerate(zip(leaves, layout)):
        if n and _is_tensor(x) and x.device.type != "cpu":
            dst = buf[o:o + n].view(x.dtype).view(x.shape)
            dst.copy_(x.detach(), non_blocking=True)
            cuda = True
        elif n and _is_tensor(x):
            x = x.detach()
            if not x.is_contiguous():
                x = x.contiguous()
            keep.append(x)
            copies.append((base + o, x.data_ptr(), n))
        elif n:
            import numpy
            x = numpy.ascontiguousarray(x)
            keep.append(x)
            copies.append((base + o, x.ctypes.data, n))
        if ready is not None:
            if copies:
                _copy(copies, 1)
                copies, keep = [], []
            if not cuda:
                ready.value = i + 1
    if copies:
        _copy(copies, threads)
    del keep
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    if ready is not None:
        ready.value = len(leaves)


class SaveHandle:
    """A save in progress: wait() blocks until it is committed (or this
    rank's shard is durable) and raises its error; done() polls."""

    def __init__(self, path):
        self.path = path
        self.error = None
        self._ev = threading.Event()
        self.thread = None

    def done(self) -> bool:
        return self._ev.is_set()

    def wait(self, timeout: Optional[float] = None) -> Any:
        return self._await(self._ev, timeout, "still running")

    def _await(self, ev, timeout, what):
        if not ev.wait(timeout):
            raise TimeoutError("checkpoint save of %r %s" % (self.path, what))
        if self.error is not None:
            raise self.error
        return self.path

    def _settle(self):
        self.wait()


_pending_lock = threading.Lock()
_pending = []


def wait_all() -> None:
    """Waits for every save of this process still in flight (a two-tier
    save: until drained, its held drain released); raises the first
    error."""
    with _pending_lock:
        hs = list(_pending)
    for h in hs:
        h._settle()


def _persist(client, path, layout, base, meta, rank, world_size, tag, keep_last, replace, depth,
             io_size, writers=0, stats=None, ready=None):
    n = len(layout)
    arr = (_Tensor * max(n, 1))()
    keep = []
    for i, (name, dtype, shape, off, nb) in enumerate(layout):
        sh = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        keep.append(sh)
        arr[i] = _Tensor(name.encode(), dtype.encode(), len(shape),
                         ctypes.cast(sh, ctypes.POINTER(ctypes.c_int64)), base + off, nb)
    o = _SaveOpts()
    L = _lib()
    L.strata_ckpt_save_opts_init(ctypes.byref(o), ctypes.sizeof(o))
    o.rank, o.world_size = rank, world_size
    o.tag = tag.encode() if tag else None
    o.meta_json = json.dumps(meta).encode()
    o.keep_last = keep_last or 0
    o.replace = 1 if replace else 0
    if depth:
        o.depth = depth
    if io_size:
        o.io_size = io_size
    if writers:
        o.writers = writers
    if ready is not None:
        o.ready = ctypes.pointer(ready)
    st = _SaveStats()
    st.stats_size = ctypes.sizeof(st)
    o.stats = ctypes.pointer(st)
    t0 = time.perf_counter()
    rc = L.strata_ckpt_save(client.handle, os.fsencode(path), arr, n, ctypes.byref(o))
    if stats is not None:
        stats.update({k: getattr(st, k) for k, _ in _SaveStats._fields_[1:]})
        stats["save_s"] = time.perf_counter() - t0
    check(rc, path)


def save(state: Any, path: Union[str, bytes, os.PathLike], client: Optional[Client] = None,
         async_: bool = True, rank: Optional[int] = None, world_size: Optional[int] = None,
         tag: Optional[str] = None, keep_last: int = 0, replace: bool = True, depth: int = 0,
         io_size: int = 4 << 20, writers: int = 0,
         stats: Optional[dict] = None, overlap: bool = False,
         snapshot_threads: int = 0, pool: Any = None, pool_replicas: Optional[int] = None,
         pool_keep: int = 1, pool_piece: int = 16 << 20, pool_prefix: str = "strata-ckpt",
         hold_drain: bool = False) -> Optional["SaveHandle"]:
    """Saves state (a state_dict or any tree of tensors) as checkpoint
    path (a cluster path, str or bytes; missing parent directories are
    created).

    async_: return a SaveHandle right after the snapshot (the tensors may
    change from then on) and persist in the background; else persist
    before returning (None). rank/world_size: sharded save, every rank
    calls save with its own state and the same path and tag (defaults:
    torch.distributed's when initialized, else 0 and 1; tag defaults to
    $STRATA_CKPT_TAG or "shared"); rank 0 commits once every rank's shard
    is written. keep_last: after the commit keep only the newest N
    checkpoints of path's parent directory. replace: an existing path is
    replaced atomically (else FileExistsError). writers: threads writing
    this rank's shard, depth: writes in flight over all of them (0:
    libstrata's defaults, 4 and 8). stats: a dict filled with
    where the time went (seconds: snapshot_s, write_s, sync_s, part_s,
    wait_s, manifest_s, commit_s, prune_s, save_s; bytes, writers,
    pieces) once the save is done. overlap: the async save writes each
    tensor as soon as the snapshot has copied it, so the copy is not in
    series with the writes; the copy then shares the CPU with the writers
    (on 2 cores: the stall doubled and the commit came no sooner, so it
    is off by default). False: writing starts once the snapshot is
    taken. snapshot_threads: threads copying the snapshot (0:
    libstrata's default, 4 or the CPUs if fewer; not with overlap, which copies in order on
    the calling thread). A save still in flight from an earlier call is
    waited for first.

    pool (a strata.mem.Pool): a two-tier save (docs/python.md, "Two-tier
    saves"), async only; sharded as above (rank 0 commits once every
    rank's pieces are in the pool). After the snapshot the checkpoint
    is put into the pool, each piece (pool_piece bytes at most, 64 MiB
    cap) pinned on pool_replicas distinct mem nodes (None: the Pool's
    replicas; 1..its nodes), and committed by renaming a directory PATH
    holding pool.json (the pieces, their CRC32C, the tree) into place on
    the storage plane; wait() returns then. A background drain then
    writes it to the storage plane as a normal save does and marks
    pool.json drained; wait_drained() returns then (hold_drain=True: the
    drain waits for release_drain(), wait_drained() or the next save).
    After the drain, the pool copies of all but the pool_keep newest
    two-tier checkpoints of PATH's directory are released. Pool keys
    are "pool_prefix/<hash of the directory>/<save id>/<piece>"."""
    client = _client(client)
    path = os.fspath(path)
    parent = os.path.dirname(path.rstrip(b"/" if isinstance(path, bytes) else "/"))
    if parent and parent not in ("/", b"/"):
        client.makedirs(parent, exist_ok=True)
    if rank is None or world_size is None:
        torch = _torch()
        dist = getattr(torch, "distributed", None) if torch else None
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank = dist.get_rank() if rank is None else rank
            world_size = dist.get_world_size() if world_size is None else world_size
        else:
            rank = 0 if rank is None else rank
            world_size = 1 if world_size is None else world_size
    if world_size > 1 and not tag:
        tag = os.environ.get("STRATA_CKPT_TAG", "shared")
    if pool is not None:
        from . import checkpoint_tier
        tier = checkpoint_tier.TierOptions(pool, pool_replicas, pool_keep, pool_piece,
                                           pool_prefix, hold_drain)
        checkpoint_tier.check_save(path, tier, async_, overlap, rank, world_size)
    wait_all()
    leaves = []
    meta = _encode(state, "", leaves, set())
    if pool is not None:
        return checkpoint_tier.save_tiered(
            client, path, leaves, meta, tier, keep_last, replace, dict(
                depth=depth, io_size=io_size, writers=writers), stats, snapshot_threads,
            rank, world_size, tag)
    h = SaveHandle(path)
    if not async_:
        # Straight from the tensors: no snapshot copy needed.
        layout, keep = [], []
        for name, x in leaves:
            if _is_tensor(x) and (x.device.type != "cpu" or not x.is_contiguous()):
                x = x.detach().cpu().contiguous()
            elif _is_ndarray(x):
                import numpy
                x = numpy.ascontiguousarray(x)
            keep.append(x)
        # Each leaf is its own buffer: pass absolute addresses, base 0.
        for (name, _), x in zip(leaves, keep):
            addr = buffer_info(x, False)[0] if _nbytes(x) else 0
            layout.append((name, _dtype_name(x), tuple(x.shape), addr, _nbytes(x)))
        _persist(client, path, layout, 0, meta, rank, world_size, tag, keep_last, replace,
                 depth, io_size, writers, stats)
        del keep
        return None
    # overlap: the save starts at once and writes each leaf as soon as the
    # snapshot has copied it (the copy overlaps the writes).
    t0 = time.perf_counter()
    buf, layout = _plan(leaves)
    base = buffer_info(buf, True)[0]
    ready = ctypes.c_uint64(0)

    def run():
        try:
            _persist(client, path, layout, base, meta, rank, world_size, tag, keep_last,
                     replace, depth, io_size, writers, stats, ready)
        except BaseException as e:     # handed to wait()
            h.error = e
        finally:
            _give_buffer(buf)
            with _pending_lock:
                if h in _pending:
                    _pending.remove(h)
            h._ev.set()

    if not overlap:
        try:
            _snapshot(leaves, buf, layout, threads=snapshot_threads)
        except BaseException:
            _give_buffer(buf)
            raise
        ready.value = len(leaves)
    with _pending_lock:
        _pending.append(h)
    h.thread = threading.Thread(target=run, name="strata-ckpt-save", daemon=True)
    h.thread.start()
    try:
        if overlap:
            _snapshot(leaves, buf, layout, ready)
    except BaseException:
        ready.value = 2**64 - 1        # abandons the save: nothing is committed
        h.thread.join()
        raise
    if stats is not None:
        stats["snapshot_s"] = time.perf_counter() - t0
    return h


# ---------------------------------------------------------------------------

class Checkpoint(Closable):
    """An open committed checkpoint: its tensors (info) and shards' meta."""

    def __init__(self, path: Any, client: Optional[Client] = None):
        self.client = _client(client)
        self.path = os.fspath(path)
        out = _P()
        check(_lib().strata_ckpt_open(self.client.handle, os.fsencode(self.path),
                                      ctypes.byref(out)), self.path)
        self._c = out.value
        L = _lib()
        self.world_size = L.strata_ckpt_world_size(self._c)
        self.tensors = []
        info = _Info()
        for i in range(L.strata_ckpt_count(self._c)):
            check(L.strata_ckpt_info(self._c, i, ctypes.byref(info)), self.path)
            self.tensors.append({"name": info.name.decode(), "dtype": info.dtype.decode(),
                                 "rank": info.rank, "shape": tuple(info.shape[:info.ndim]),
                                 "length": info.len, "crc32c": info.crc32c, "index": i})

    def meta(self, rank: int) -> Any:
        m = _lib().strata_ckpt_meta(self._c, rank)
        return json.loads(m) if m else None

    def close(self) -> None:
        if self._c is not None:
            _lib().strata_ckpt_close(self._c)
            self._c = None

    def read(self, pairs: List[Tuple[int, Any]], depth: int = 0) -> None:
        """pairs: [(tensor index, destination buffer)], read in one batch
        straight into the buffers by libstrata's reader threads (the GIL
        released), each checked against its CRC32C. depth: reads in
        flight over all readers (0: libstrata's default, 64)."""
        n = len(pairs)
        d = (_Dst * max(n, 1))()
        keep = []
        for i, (idx, buf) in enumerate(pairs):
            addr, nb, k = buffer_info(buf, True)
            keep.append(k)
            d[i] = _Dst(idx, addr, nb)
        check(_lib().strata_ckpt_read(self._c, d, n, depth), self.path)
        del keep


def _new_tensor(dtype, shape, as_numpy):
    if as_numpy or _torch() is None:
        import numpy
        return numpy.empty(shape, dtype=numpy.dtype(dtype))
    torch = _torch()
    return torch.empty(shape, dtype=getattr(torch, dtype))


def _lookup(into, path):
    """The leaf of into at the key path of a tensor, or None."""
    return into.get(path) if isinstance(into, dict) else None


class IncompleteCheckpointError(OSError):
    """A two-tier checkpoint whose memory-pool copy is incomplete (a piece
    missing on every replica, or failing its CRC32C) and that was not
    drained to the storage plane: it is lost; load the previous one."""


def _restore_plan(metas, by_name, into, allow_pickle):
    """Decodes each (rank, meta) of metas, choosing every tensor's
    destination: a tensor of into read straight into (CPU, contiguous,
    same dtype and size), else a new one (copied into into's afterwards).
    by_name: {(rank, name): record with dtype, shape, length}. Returns
    (trees, [(record, destination)], [(into's tensor, new tensor)])."""
    pairs, fixups = [], []

    def getter(r):
        def get(name, as_numpy):
            t = by_name[(r, name)]
            cur = _lookup(into, name)
            if (cur is not None and _is_tensor(cur) and cur.device.type == "cpu"
                    and cur.is_contiguous() and _dtype_name(cur) == t["dtype"]
                    and _nbytes(cur) == t["length"]):
                pairs.append((t, cur))
                return cur
            x = _new_tensor(t["dtype"], t["shape"], as_numpy)
            pairs.append((t, x))
            if cur is not None and _is_tensor(cur):
                fixups.append((cur, x))
                return cur
            return x
        return get

    trees = []
    for r, m in metas:
        if m is None:
            m = {"$d": [[name, {"$t": name}] for (rr, name) in by_name if rr == r]}
        trees.append(_decode(m, getter(r), allow_pickle))
    return trees, pairs, fixups


def _restore_finish(path, trees, fixups):
    """Copies the tensors read into new ones into into's (GPU,
    non-contiguous, ...), and merges the ranks' trees."""
    torch = _torch()
    for cur, x in fixups:
        with torch.no_grad():
            if x.dtype != cur.dtype or x.shape != cur.shape:
                raise ValueError("strata: checkpoint %r: tensor of dtype %s shape %s "
                                 "cannot be restored into one of dtype %s shape %s"
                                 % (path, x.dtype, tuple(x.shape), cur.dtype,
                                    tuple(cur.shape)))
            cur.copy_(x)
    if len(trees) == 1:
        return trees[0]
    if all(isinstance(t, dict) for t in trees):
        out = {}
        for t in trees:
            out.update(t)
        return out
    return trees


def load(path: Union[str, bytes, os.PathLike], into: Optional[dict] = None,
         client: Optional[Client] = None, rank: Optional[int] = None, depth: int = 0,
         allow_pickle: bool = False, pool: Any = None,
         stats: Optional[dict] = None) -> Any:
    """Loads checkpoint path. Returns the saved tree with its tensors
    restored bitwise. into: a flat dict of existing tensors (e.g.
    model.state_dict()) restored in place, by name -- a CPU contiguous
    tensor of the same dtype and size is read into directly, others are
    copied into (GPU tensors included); the returned tree holds those same
    tensors. rank: load that rank's shard only; None loads every rank's
    (their trees are merged: dicts united). A checkpoint written by the C
    API without meta loads as a flat {name: tensor} dict. allow_pickle:
    also unpickle leaves that are not tensors, containers or plain
    scalars (arbitrary code: only for checkpoints you trust); without it
    such a leaf raises UnsafeCheckpointError naming the refused object.

    pool: a two-tier checkpoint (save(..., pool=)) is read from its
    memory-pool copy through pool (a strata.mem.Pool, or True: the
    addresses the checkpoint records, trusting it with the token) when
    every piece is there and passes its CRC32C, else from the storage
    plane once drained; neither: IncompleteCheckpointError. None or
    False: the storage copy only (FileNotFoundError naming the pool when
    the checkpoint is not drained yet). stats: a dict given "source"
    ("pool" or "storage") and, after a fallback, "pool_error" (why the
    pool copy was not used)."""
    try:
        import torch    # noqa: F401 (the real PyTorch; absolute import)
    except ImportError:
        pass
    client = _client(client)
    if stats is not None:
        stats["source"] = "storage"
    from . import checkpoint_tier
    if pool is not None and pool is not False:
        got = checkpoint_tier.load_tiered(client, path, into, pool, allow_pickle, stats, rank)
        if got is not None:
            return got[0]
    try:
        ck = Checkpoint(path, client)
    except FileNotFoundError:
        checkpoint_tier.explain_missing(client, path)
        raise
    with ck:
        ranks = [rank] if rank is not None else list(range(ck.world_size))
        by_name = {(t["rank"], t["name"]): t for t in ck.tensors}
        trees, pairs, fixups = _restore_plan([(r, ck.meta(r)) for r in ranks], by_name, into,
                                             allow_pickle)
        ck.read([(t["index"], x) for t, x in pairs], depth)
    return _restore_finish(path, trees, fixups)


def latest(directory: Any, client: Optional[Client] = None,
           pool: Any = None) -> Union[str, bytes, None]:
    """Path of the newest committed checkpoint in directory, or None
    (bytes for a bytes directory, as os does). pool: also count the
    two-tier checkpoints not drained yet whose pool copy has every piece
    (a strata.mem.Pool, or True: each on the addresses it records);
    None: the checkpoints on the storage plane only."""
    client = _client(client)
    buf = ctypes.create_string_buffer(4096)
    r = _lib().strata_ckpt_latest(client.handle, os.fsencode(directory), buf, 4096)
    if r != -2:
        check(r, directory)
    found = buf.value if r != -2 else None
    if pool is not None and pool is not False:
        from . import checkpoint_tier
        found = checkpoint_tier.latest_tiered(client, directory, pool, found)
    if found is None:
        return None
    return found if isinstance(os.fspath(directory), bytes) else os.fsdecode(found)


def clean_partial(directory: Any, older_than: float = 24 * 3600,
                  client: Optional[Client] = None) -> int:
    """Removes the partial saves in directory (NAME.tmp-* left by a save
    that died, NAME.old-* by a commit that died) in which nothing changed
    for older_than seconds; returns how many were removed. A file's time
    moves when it is fsynced or closed, not with each write: older_than
    must exceed the slowest save (default a day). A commit that died
    between its renames (no NAME, NAME.old-TAG and NAME.tmp-TAG) is left
    alone: those may be the only copies."""
    if older_than < 0 or older_than > 0xFFFFFFFF:
        raise ValueError("older_than must be in 0..%d seconds" % 0xFFFFFFFF)
    client = _client(client)
    return check(_lib().strata_ckpt_clean_partial(client.handle, os.fsencode(directory),
                                                  int(older_than)), directory)


def prune(directory: Any, keep_last: int, client: Optional[Client] = None,
          pool: Any = None) -> int:
    """Keeps the keep_last newest committed checkpoints of directory;
    returns how many were removed. Two-tier checkpoints count too: the
    pool copies of those removed are released (through pool, a
    strata.mem.Pool, or None: the addresses each records)."""
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError("strata: prune: keep_last must be a positive integer, not %r"
                         % (keep_last,))
    client = _client(client)
    from . import checkpoint_tier
    removed = checkpoint_tier.prune_tiered(client, directory, keep_last, pool)
    return removed + check(_lib().strata_ckpt_prune(client.handle, os.fsencode(directory),
                                                    keep_last), directory)
