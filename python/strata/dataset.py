"""Sample sources on Strata, independent of PyTorch: a directory of sample
files, or packed shards, and a reader that keeps many sample reads in
flight through the batch ring.

Packed datasets (format: include/strata/dataset.h, docs/python.md) are
written and indexed by libstrata itself (strata_pack_*, through ctypes):
the same code as `strata pack`, so there is one implementation of the
format.
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

from ._lib import check, declare
from .client import Client, Ring, buffer_info

_P = ctypes.c_void_p
_PROTOS = {
    "strata_pack_opts_init": (None, [_P, ctypes.c_size_t]),
    "strata_pack_new": (ctypes.c_int, [_P, ctypes.c_char_p, _P, ctypes.POINTER(_P)]),
    "strata_pack_add": (ctypes.c_int, [_P, _P, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_uint64)]),
    "strata_pack_close": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_uint64),
                                         ctypes.POINTER(ctypes.c_uint32)]),
    "strata_pack_abort": (None, [_P]),
    "strata_pack_index_open": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "strata_pack_index_free": (None, [_P]),
    "strata_pack_index_count": (ctypes.c_uint64, [_P]),
    "strata_pack_index_shards": (ctypes.c_uint32, [_P]),
    "strata_pack_index_shard_path": (ctypes.c_char_p, [_P, ctypes.c_uint32]),
    "strata_pack_index_export": (None, [_P, _P, _P, _P]),
    "strata_cache_prefetch": (ctypes.c_int, [_P, ctypes.c_char_p]),
}

_ENOENT, _EAGAIN = -2, -11


class _PackOpts(ctypes.Structure):
    _fields_ = [("opts_size", ctypes.c_size_t), ("samples_per_shard", ctypes.c_uint64),
                ("shard_bytes", ctypes.c_uint64)]


def _plib():
    """libstrata with the packed-dataset prototypes declared."""
    return declare(_PROTOS)


_EBADMSG = -(4096 + 7)          # STRATA_EBADMSG (strata/errors.h)


def _check_pack(rc, path):
    """check(), with a malformed dataset reported as ValueError."""
    if rc == _EBADMSG:
        try:
            check(rc, path)
        except OSError as e:
            raise ValueError("strata: %r is not a valid packed dataset (%s)"
                             % (path, e.strerror)) from None
    return check(rc, path)


def epoch_order(n: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """The sample order of an epoch: a permutation of range(n) that depends
    only on (seed, epoch) -- the same on every rank, worker and run."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    return np.random.default_rng([int(seed), int(epoch)]).permutation(n).astype(np.int64)


def _join(d, name):
    return d.rstrip("/") + "/" + name


class ShardWriter:
    """Writes a packed dataset: add() appends a sample (bytes-like, numpy
    array, CPU tensor) to the current shard; a shard is closed once it
    holds samples_per_shard samples or shard_bytes bytes; close() writes
    the last index and dataset.json. Leaving a with block by an exception
    abandons the dataset (no dataset.json: readers never see it)."""

    def __init__(self, client: Client, directory: Any, samples_per_shard: int = 1024,
                 shard_bytes: int = 1 << 30):
        self.client = client
        self.dir = os.fsdecode(directory)       # str or bytes in, str (os.fsdecode) kept
        parent = os.path.dirname(self.dir.rstrip("/"))
        if parent and parent != "/":
            client.makedirs(parent, exist_ok=True)
        L = _plib()
        o = _PackOpts()
        L.strata_pack_opts_init(ctypes.byref(o), ctypes.sizeof(o))
        o.samples_per_shard = samples_per_shard
        o.shard_bytes = shard_bytes
        h = _P()
        check(L.strata_pack_new(client.handle, os.fsencode(self.dir), ctypes.byref(o),
                                ctypes.byref(h)), self.dir)
        self._h = h
        self.count = 0
        self.shards = 0

    def add(self, sample: Any) -> int:
        """Appends one sample; returns its global index."""
        if self._h is None:
            raise ValueError("strata: ShardWriter is closed")
        addr, n, keep = buffer_info(sample, False)
        i = ctypes.c_uint64()
        _check_pack(_plib().strata_pack_add(self._h, addr, n, ctypes.byref(i)), self.dir)
        del keep
        self.count = i.value + 1
        return i.value

    def close(self) -> None:
        """Closes the last shard and writes dataset.json."""
        if self._h is None:
            return
        h, self._h = self._h, None
        n, k = ctypes.c_uint64(), ctypes.c_uint32()
        rc = _plib().strata_pack_close(h, ctypes.byref(n), ctypes.byref(k))
        self.count, self.shards = n.value, k.value
        _check_pack(rc, self.dir)

    def abort(self) -> None:
        """Stops without writing dataset.json."""
        if self._h is not None:
            h, self._h = self._h, None
            _plib().strata_pack_abort(h)

    def __enter__(self):
        return self

    def __exit__(self, exc, *rest):
        if exc is None:
            self.close()
        else:
            self.abort()

    def __del__(self):
        try:
            self.abort()
        except Exception:
            pass


class SampleIndex:
    """Where every sample lives: paths[i] (or a shard path), offsets[i],
    lengths[i]. SampleIndex.open(client, path) reads a packed dataset
    (path holds dataset.json) or lists a directory of sample files (sorted
    by name, one sample per file)."""

    def __init__(self, paths, shard_of, offsets, lengths, packed):
        self.paths = paths              # file (or shard) paths
        self.shard_of = shard_of        # sample -> index into paths
        self.offsets = offsets
        self.lengths = lengths
        self.packed = packed

    def __len__(self):
        return len(self.lengths)

    @classmethod
    def open(cls, client: Client, path: Any) -> "SampleIndex":
        path = os.fsdecode(path)
        if client.exists(_join(path, "dataset.json")):
            return cls._packed(client, path)
        return cls._files(client, path)

    @classmethod
    def _packed(cls, client, path):
        L = _plib()
        h = _P()
        _check_pack(L.strata_pack_index_open(client.handle, os.fsencode(path), ctypes.byref(h)),
                    path)
        try:
            n = L.strata_pack_index_count(h)
            paths = [os.fsdecode(L.strata_pack_index_shard_path(h, k))
                     for k in range(L.strata_pack_index_shards(h))]
            shard_of = np.empty(n, np.int32)
            offs = np.empty(n, np.int64)
            lens = np.empty(n, np.int64)
            L.strata_pack_index_export(h, shard_of.ctypes.data, offs.ctypes.data,
                                       lens.ctypes.data)
        finally:
            L.strata_pack_index_free(h)
        return cls(paths, shard_of, offs, lens, True)

    @classmethod
    def _files(cls, client, path):
        ents = sorted((e for e in client.scandir(path) if e.is_file()), key=lambda e: e.name)
        paths = [e.path for e in ents]
        lens = np.array([client.stat(p).st_size for p in paths], dtype=np.int64)
        return cls(paths, np.arange(len(paths), dtype=np.int32), np.zeros(len(paths), np.int64),
                   lens, False)

    def read(self, client: Client, i: int, files: Optional[Dict[int, Any]] = None) -> bytearray:
        """Reads sample i into a new bytearray (files: a cache of open
        File objects by path index, reused)."""
        k = int(self.shard_of[i])
        buf = bytearray(int(self.lengths[i]))
        if files is not None and k in files:
            files[k].pread_into(buf, int(self.offsets[i]))
            return buf
        f = client.open(self.paths[k], "rb", buffering=0)
        try:
            f.pread_into(buf, int(self.offsets[i]))
        finally:
            if files is not None and self.packed:
                files[k] = f
            else:
                f.close()
        return buf


class PrefetchReader:
    """Reads samples in a known order (the sampler's), keeping up to
    depth reads in flight through one batch ring, and yields (index,
    bytearray) in that order. Packed shards stay open for the whole run;
    sample files are opened as their reads are queued.

    With the client's read cache on (STRATA_CACHE_MEM or STRATA_CACHE_DIR,
    docs/cache.md), starting a packed shard k queues shards k+1..k+ahead
    for the cache's background prefetch (strata_cache_prefetch; the order
    shards are laid out in, which is the order a shard-sequential epoch
    reads them). Without a cache, nothing is queued."""

    def __init__(self, client: Client, index: SampleIndex, order: Any, depth: int = 64,
                 ahead: int = 2):
        self.client = client
        self.index = index
        self.order = order
        self.depth = max(1, depth)
        self.ahead = max(0, ahead)
        self._queued = set()
        self._no_cache = False

    def _prefetch_after(self, k: int) -> None:
        """Queues the shards after k (packed datasets, a cache on)."""
        if self._no_cache or not self.index.packed:
            return
        for j in range(k + 1, min(k + 1 + self.ahead, len(self.index.paths))):
            if j in self._queued:
                continue
            rc = _plib().strata_cache_prefetch(self.client.handle,
                                               os.fsencode(self.index.paths[j]))
            if rc == _ENOENT:           # no cache on this client
                self._no_cache = True
                return
            if rc == _EAGAIN:           # the queue is full: later
                return
            self._queued.add(j)

    def __iter__(self) -> Iterator[Tuple[int, bytearray]]:
        idx = self.index
        shards = {}
        pending = {}            # position -> (sample, buf, file or None)
        done = {}
        ring = Ring(self.client, self.depth)
        try:
            nxt = 0
            out = 0
            n = len(self.order)
            while out < n:
                while nxt < n and ring.inflight < self.depth and nxt - out < 4 * self.depth:
                    i = int(self.order[nxt])
                    k = int(idx.shard_of[i])
                    buf = bytearray(int(idx.lengths[i]))
                    own = None
                    if idx.packed:
                        f = shards.get(k)
                        if f is None:
                            f = shards[k] = self.client.open(idx.paths[k], "rb",
                                                             buffering=0)
                            self._prefetch_after(k)
                    else:
                        f = own = self.client.open(idx.paths[k], "rb", buffering=0)
                    if len(buf):
                        ring.prep_read(f, buf, int(idx.offsets[i]), nxt)
                        pending[nxt] = (i, buf, own)
                    else:
                        done[nxt] = (i, buf)
                        if own:
                            own.close()
                    nxt += 1
                if out not in done:
                    ring.submit()
                    for ud, res in ring.wait(1):
                        i, buf, own = pending.pop(ud)
                        if own:
                            own.close()
                        if res < 0:
                            from ._lib import check
                            check(res, idx.paths[int(idx.shard_of[i])])
                        if res != len(buf):
                            raise OSError(5, "short read of sample %d (%d of %d bytes)"
                                          % (i, res, len(buf)), idx.paths[int(idx.shard_of[i])])
                        done[ud] = (i, buf)
                while out in done:
                    yield done.pop(out)
                    out += 1
        finally:
            ring.close()
            for _, _, own in pending.values():
                if own:
                    own.close()
            for f in shards.values():
                f.close()


def open_client(client: Any) -> Client:
    """A Client from a Client, an address or a cluster directory."""
    return client if isinstance(client, Client) else Client(client)
