"""PyTorch datasets over Strata (import strata.pytorch).

    ds = strata.pytorch.StrataDataset("/data/train", client)          # map-style
    it = strata.pytorch.StrataIterableDataset("/data/train", client,
            batch_size=64, seed=1, epoch=e, start=pos)                # prefetching
    loader = torch.utils.data.DataLoader(it, batch_size=64, num_workers=4)

Sources: a directory of sample files, or a packed dataset (a directory
with dataset.json, from strata.dataset.ShardWriter or `strata pack`).
Samples come out as uint8 tensors (transform= maps them).

Both are safe with DataLoader workers: the Client reconnects in each
worker after fork. Order: epoch e's order is a permutation that depends on
(seed, e) only (strata.dataset.epoch_order). The iterable dataset reads
that order through the batch ring with the next batches' reads in flight;
it hands whole batches to DataLoader workers round-robin, so the loader
yields exactly the seeded order, and it resumes from (epoch, position,
seed): position = samples of the epoch already consumed by this rank.
"""
import math

import torch    # the real PyTorch (this module is strata.pytorch, so nothing shadows it)
from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info

from .dataset import PrefetchReader, SampleIndex, epoch_order, open_client

__all__ = ["StrataDataset", "StrataIterableDataset", "ResumableSampler", "epoch_order",
           "to_tensor", "offload"]


def to_tensor(buf):
    """bytearray -> uint8 tensor sharing its memory."""
    if len(buf) == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(buf, dtype=torch.uint8)


class StrataDataset(Dataset):
    """Map-style: ds[i] reads sample i (with a DataLoader sampler picking
    the order; ResumableSampler gives a seeded, resumable one)."""

    def __init__(self, source, client=None, transform=None):
        self.client = open_client(client)
        self.source = source
        self.index = SampleIndex.open(self.client, source)
        self.transform = transform or to_tensor
        self._files = {}
        self._pid = None

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        import os
        if self._pid != os.getpid():        # a new worker: its own open files
            self._files, self._pid = {}, os.getpid()
        return self.transform(self.index.read(self.client, int(i), self._files))

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_files"], d["_pid"] = {}, None
        return d


class ResumableSampler(Sampler):
    """The seeded order of an epoch for one rank (samples rank, rank +
    world_size, ... of the permutation; the tail is dropped so every rank
    gets the same count), starting at position start. set_epoch(e) moves
    to another epoch (and position 0)."""

    def __init__(self, n, seed=0, epoch=0, start=0, shuffle=True, rank=0, world_size=1):
        self.n, self.seed, self.epoch, self.start = n, seed, epoch, start
        self.shuffle, self.rank, self.world_size = shuffle, rank, world_size

    def order(self):
        o = epoch_order(self.n, self.seed, self.epoch, self.shuffle)
        per = self.n // self.world_size
        return o[self.rank:per * self.world_size:self.world_size]

    def set_epoch(self, epoch, start=0):
        self.epoch, self.start = epoch, start

    def state_dict(self, position):
        return {"epoch": self.epoch, "position": position, "seed": self.seed}

    def __len__(self):
        return max(0, self.n // self.world_size - self.start)

    def __iter__(self):
        return iter(self.order()[self.start:].tolist())


class StrataIterableDataset(IterableDataset):
    """Iterates one rank's seeded order of an epoch from position start,
    reading ahead through the batch ring (depth reads in flight). With
    DataLoader(num_workers=W, batch_size=batch_size) worker w takes batches
    w, w+W, ... of the order, so the loader yields the order exactly.
    state_dict(position) / from_state(...) resume an epoch mid-way."""

    def __init__(self, source, client=None, batch_size=1, seed=0, epoch=0, start=0,
                 shuffle=True, rank=0, world_size=1, depth=64, transform=None):
        self.client = open_client(client)
        self.source = source
        self.index = SampleIndex.open(self.client, source)
        self.batch_size = batch_size
        self.sampler = ResumableSampler(len(self.index), seed, epoch, start, shuffle, rank,
                                        world_size)
        self.depth = depth
        self.transform = transform or to_tensor

    def set_epoch(self, epoch, start=0):
        self.sampler.set_epoch(epoch, start)

    def state_dict(self, position):
        """What to save to resume: position = samples of this epoch
        consumed by this rank."""
        return self.sampler.state_dict(position)

    def load_state_dict(self, st):
        self.sampler.seed = st["seed"]
        self.sampler.set_epoch(st["epoch"], st["position"])

    def __len__(self):
        return len(self.sampler)

    def _my_order(self):
        order = self.sampler.order()[self.sampler.start:]
        w = get_worker_info()
        if w is None or w.num_workers == 1:
            return order
        b = self.batch_size
        nb = math.ceil(len(order) / b)
        mine = [order[k * b:(k + 1) * b] for k in range(w.id, nb, w.num_workers)]
        return torch.cat([torch.as_tensor(m) for m in mine]).numpy() if mine else order[:0]

    def __iter__(self):
        for _, buf in PrefetchReader(self.client, self.index, self._my_order(), self.depth):
            yield self.transform(buf)


def offload(*args, **kwargs):
    """Layer streaming from the memory plane: strata.offload.offload
    (weights of a module kept in a strata.mem pool, fetched per layer)."""
    from .offload import offload as _offload
    return _offload(*args, **kwargs)
