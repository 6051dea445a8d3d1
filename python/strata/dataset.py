"""Sample sources on Strata, independent of PyTorch: a directory of sample
files, or packed shards (format: docs/python.md), and a reader that keeps
many sample reads in flight through the batch ring.

Packed dataset DIR (written by ShardWriter or `strata pack`):
    DIR/shard-NNNNN.data   samples appended back to back
    DIR/shard-NNNNN.idx    b"STRPIDX1", u64 count, count x (u64 offset,
                           u64 length), little-endian
    DIR/dataset.json       {"format": "strata-packed", "version": 1,
                            "samples": N, "shards": [{"data": ..., "index":
                            ..., "samples": n, "bytes": b}, ...]}
                           written last: the dataset is complete when it
                           exists.
"""
import json
import os
import struct

import numpy as np

from .client import Client, Ring

IDX_MAGIC = b"STRPIDX1"
FORMAT = "strata-packed"


def epoch_order(n, seed, epoch, shuffle=True):
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
    the last index and dataset.json."""

    def __init__(self, client, directory, samples_per_shard=1024, shard_bytes=1 << 30):
        self.client = client
        self.dir = os.fspath(directory)
        self.samples_per_shard = samples_per_shard
        self.shard_bytes = shard_bytes
        client.makedirs(self.dir, exist_ok=True)
        self.shards = []
        self.count = 0
        self._f = None
        self._idx = []
        self._off = 0

    def _open(self):
        name = "shard-%05d" % len(self.shards)
        self._name = name
        self._f = self.client.open(_join(self.dir, name + ".data"), "wb")
        self._idx = []
        self._off = 0

    def _finish(self):
        if self._f is None:
            return
        self._f.close()
        body = IDX_MAGIC + struct.pack("<Q", len(self._idx))
        body += np.asarray(self._idx, dtype="<u8").reshape(-1).tobytes() if self._idx else b""
        self.client.write_bytes(_join(self.dir, self._name + ".idx"), body)
        self.shards.append({"data": self._name + ".data", "index": self._name + ".idx",
                            "samples": len(self._idx), "bytes": self._off})
        self._f = None

    def add(self, sample):
        """Appends one sample; returns its global index."""
        if self._f is None:
            self._open()
        n = self._f.pwrite(sample, self._off)
        self._idx.append((self._off, n))
        self._off += n
        i = self.count
        self.count += 1
        if len(self._idx) >= self.samples_per_shard or self._off >= self.shard_bytes:
            self._finish()
        return i

    def close(self):
        self._finish()
        meta = {"format": FORMAT, "version": 1, "samples": self.count, "shards": self.shards}
        self.client.write_bytes(_join(self.dir, "dataset.json"), json.dumps(meta).encode())

    def __enter__(self):
        return self

    def __exit__(self, exc, *rest):
        if exc is None:
            self.close()
        elif self._f is not None:
            self._f.close()


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
    def open(cls, client, path):
        path = os.fspath(path)
        if client.exists(_join(path, "dataset.json")):
            return cls._packed(client, path)
        return cls._files(client, path)

    @classmethod
    def _packed(cls, client, path):
        meta = json.loads(client.read_bytes(_join(path, "dataset.json")))
        if meta.get("format") != FORMAT:
            raise ValueError("strata: %r is not a packed dataset" % path)
        paths, shard_of, offs, lens = [], [], [], []
        for k, sh in enumerate(meta["shards"]):
            body = client.read_bytes(_join(path, sh["index"]))
            if body[:8] != IDX_MAGIC:
                raise ValueError("strata: bad index %r" % _join(path, sh["index"]))
            n = struct.unpack_from("<Q", body, 8)[0]
            a = np.frombuffer(body, dtype="<u8", count=2 * n, offset=16).reshape(n, 2)
            paths.append(_join(path, sh["data"]))
            shard_of.append(np.full(n, k, dtype=np.int32))
            offs.append(a[:, 0].astype(np.int64))
            lens.append(a[:, 1].astype(np.int64))
        if not paths:
            e = np.zeros(0, np.int64)
            return cls([], np.zeros(0, np.int32), e, e, True)
        return cls(paths, np.concatenate(shard_of), np.concatenate(offs), np.concatenate(lens),
                   True)

    @classmethod
    def _files(cls, client, path):
        ents = sorted((e for e in client.scandir(path) if e.is_file()), key=lambda e: e.name)
        paths = [e.path for e in ents]
        lens = np.array([client.stat(p).st_size for p in paths], dtype=np.int64)
        return cls(paths, np.arange(len(paths), dtype=np.int32), np.zeros(len(paths), np.int64),
                   lens, False)

    def read(self, client, i, files=None):
        """Reads sample i into a new bytearray (files: a cache of open
        File objects by path index, reused)."""
        k = int(self.shard_of[i])
        buf = bytearray(int(self.lengths[i]))
        if files is not None and k in files:
            files[k].pread_into(buf, int(self.offsets[i]))
            return buf
        f = client.open(self.paths[k], "rb")
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
    sample files are opened as their reads are queued."""

    def __init__(self, client, index, order, depth=64):
        self.client = client
        self.index = index
        self.order = order
        self.depth = max(1, depth)

    def __iter__(self):
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
                            f = shards[k] = self.client.open(idx.paths[k], "rb")
                    else:
                        f = own = self.client.open(idx.paths[k], "rb")
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


def open_client(client):
    """A Client from a Client, an address or a cluster directory."""
    return client if isinstance(client, Client) else Client(client)
