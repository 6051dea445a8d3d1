"""PyTorch datasets over Strata (import strata.pytorch).

    ds = strata.pytorch.StrataDataset("/data/train", client)           # map-style
    it = strata.pytorch.StrataIterableDataset("/data/train", client, seed=1, epoch=e)
    loader = strata.pytorch.DataLoader(it, batch_size=64, num_workers=4)
    state = loader.state_dict()          # {"epoch", "position", "seed"}: resume mid-epoch
    loader.load_state_dict(state)

Sources: a directory of sample files, or a packed dataset (a directory
with dataset.json, from strata.dataset.ShardWriter or `strata pack`).
Samples come out as uint8 tensors (transform= maps them).

Both datasets are safe with DataLoader workers: the Client reconnects in
each worker after fork. Order: epoch e's order is a permutation that
depends on (seed, e) only (strata.dataset.epoch_order). The iterable
dataset reads that order through the batch ring with the next batches'
reads in flight and hands whole batches to DataLoader workers
round-robin, so the loader yields exactly the seeded order.

strata.pytorch.DataLoader is torch's DataLoader, stateful like torchdata's
StatefulDataLoader: the batch size is given to it once (it tells the
iterable dataset), it counts the batches it has yielded, and
state_dict()/load_state_dict(state) save and restore the position in the
epoch -- of a StrataIterableDataset, or of a ResumableSampler driving a
map-style dataset.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, Iterator, Optional

import numpy as np
import torch    # the real PyTorch (this module is strata.pytorch, so nothing shadows it)
import torch.utils.data as _tud
from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info

from .dataset import PrefetchReader, SampleIndex, epoch_order, open_client

__all__ = ["StrataDataset", "StrataIterableDataset", "ResumableSampler", "DataLoader",
           "epoch_order", "to_tensor", "offload"]


def to_tensor(buf: bytearray) -> torch.Tensor:
    """bytearray -> uint8 tensor sharing its memory."""
    if len(buf) == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(buf, dtype=torch.uint8)


class StrataDataset(Dataset):
    """Map-style: ds[i] reads sample i (with a DataLoader sampler picking
    the order; ResumableSampler gives a seeded, resumable one)."""

    def __init__(self, source: Any, client: Any = None,
                 transform: Optional[Callable[[bytearray], Any]] = None):
        self.client = open_client(client)
        self.source = source
        self.index = SampleIndex.open(self.client, source)
        self.transform = transform or to_tensor
        self._files = {}
        self._pid = None

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if self._pid != os.getpid():        # a new worker: its own open files
            self._files, self._pid = {}, os.getpid()
        return self.transform(self.index.read(self.client, int(i), self._files))

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_files"], d["_pid"] = {}, None
        return d


class ResumableSampler(Sampler):
    """One rank's part of an epoch's seeded order, from position start:
    samples rank, rank + world_size, ... of the permutation, as
    DistributedSampler splits it. drop_last=False (the default, as
    DistributedSampler) keeps the tail by padding the order with its first
    samples so every rank gets ceil(n / world_size); drop_last=True drops
    the tail instead (each sample at most once across ranks).
    set_epoch(e) moves to another epoch (and position 0). state_dict() is
    {"epoch", "position", "seed"}: position counts the samples handed out
    (exact under strata.pytorch.DataLoader, which counts what it yielded;
    a plain DataLoader's workers prefetch ahead of it)."""

    def __init__(self, n: int, seed: int = 0, epoch: int = 0, start: int = 0,
                 shuffle: bool = True, rank: int = 0, world_size: int = 1,
                 drop_last: bool = False):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("strata: rank %d of world_size %d" % (rank, world_size))
        self.n, self.seed, self.epoch, self.start = n, seed, epoch, start
        self.shuffle, self.rank, self.world_size = shuffle, rank, world_size
        self.drop_last = drop_last
        self.position = start

    def per_rank(self) -> int:
        """Samples of an epoch for each rank."""
        if self.drop_last:
            return self.n // self.world_size
        return math.ceil(self.n / self.world_size)

    def order(self) -> np.ndarray:
        """This rank's whole order of the epoch (from position 0)."""
        o = epoch_order(self.n, self.seed, self.epoch, self.shuffle)
        total = self.per_rank() * self.world_size
        if total > len(o) and len(o):
            o = np.resize(o, total)     # pads with the order's start, repeated
        return o[self.rank:total:self.world_size]

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start, self.position = epoch, start, start

    def state_dict(self, position: Optional[int] = None) -> Dict[str, int]:
        """What to save to resume. position (the old call form) overrides
        the count kept by the sampler."""
        return {"epoch": self.epoch, "seed": self.seed,
                "position": self.position if position is None else int(position)}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.seed = state["seed"]
        self.set_epoch(state["epoch"], state["position"])

    def __len__(self) -> int:
        return max(0, self.per_rank() - self.start)

    def __iter__(self) -> Iterator[int]:
        self.position = self.start
        for i in self.order()[self.start:].tolist():
            self.position += 1
            yield i


class StrataIterableDataset(IterableDataset):
    """Iterates one rank's seeded order of an epoch (ResumableSampler's)
    from its position, reading ahead through the batch ring (depth reads
    in flight). Use it with strata.pytorch.DataLoader(ds, batch_size=B,
    num_workers=W): the loader tells the dataset B, worker w takes batches
    w, w+W, ... of the order, and the loader yields the order exactly.
    (With torch's own DataLoader and workers, pass batch_size=B to the
    dataset too.) state_dict()/load_state_dict(state) resume mid-epoch."""

    def __init__(self, source: Any, client: Any = None, batch_size: Optional[int] = None,
                 seed: int = 0, epoch: int = 0, start: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1, depth: int = 64,
                 transform: Optional[Callable[[bytearray], Any]] = None,
                 drop_last: bool = False):
        self.client = open_client(client)
        self.source = source
        self.index = SampleIndex.open(self.client, source)
        self.batch_size = batch_size
        self.sampler = ResumableSampler(len(self.index), seed, epoch, start, shuffle, rank,
                                        world_size, drop_last)
        self.depth = depth
        self.transform = transform or to_tensor

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.sampler.set_epoch(epoch, start)

    def state_dict(self, position: Optional[int] = None) -> Dict[str, int]:
        """{"epoch", "position", "seed"}: position = samples of this epoch
        consumed by this rank (counted by strata.pytorch.DataLoader, or by
        iterating the dataset in this process)."""
        return self.sampler.state_dict(position)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.sampler.load_state_dict(state)

    def __len__(self) -> int:
        return len(self.sampler)

    def _my_order(self):
        order = self.sampler.order()[self.sampler.start:]
        w = get_worker_info()
        if w is None or w.num_workers == 1:
            return order
        b = self.batch_size
        if not b:
            raise ValueError("strata: StrataIterableDataset with %d DataLoader workers needs "
                             "the batch size to keep the order: use "
                             "strata.pytorch.DataLoader(ds, batch_size=...), or pass "
                             "batch_size= to the dataset" % w.num_workers)
        nb = math.ceil(len(order) / b)
        mine = [order[k * b:(k + 1) * b] for k in range(w.id, nb, w.num_workers)]
        return np.concatenate(mine) if mine else order[:0]

    def __iter__(self) -> Iterator[Any]:
        counting = get_worker_info() is None      # in this process: keep the position
        sm = self.sampler
        if counting:
            sm.position = sm.start
        for _, buf in PrefetchReader(self.client, self.index, self._my_order(), self.depth):
            if counting:
                sm.position += 1
            yield self.transform(buf)


class DataLoader(_tud.DataLoader):
    """torch.utils.data.DataLoader that saves and restores its position in
    the epoch, like torchdata's StatefulDataLoader, for a
    StrataIterableDataset or a map-style dataset driven by a
    ResumableSampler (sampler=). The batch size is given here only: the
    iterable dataset learns it from the loader. state_dict() /
    load_state_dict(state) take and give {"epoch", "position", "seed"}, the
    samples of the epoch this rank has received from the loader."""

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, **kwargs: Any):
        if isinstance(dataset, StrataIterableDataset):
            if dataset.batch_size not in (None, batch_size):
                raise ValueError("strata: the dataset's batch_size (%s) differs from the "
                                 "loader's (%s); give it to the loader only"
                                 % (dataset.batch_size, batch_size))
            dataset.batch_size = batch_size
        super().__init__(dataset, batch_size=batch_size, **kwargs)
        self._position = None       # samples yielded (from the epoch's start); None: none yet

    def _resumable(self) -> ResumableSampler:
        if isinstance(self.dataset, StrataIterableDataset):
            return self.dataset.sampler
        if isinstance(self.sampler, ResumableSampler):
            return self.sampler
        raise TypeError("strata: DataLoader state needs a StrataIterableDataset or "
                        "sampler=ResumableSampler(...)")

    def __iter__(self) -> Iterator[Any]:
        sm = self._resumable()
        start, per = sm.start, sm.per_rank()
        b = self.batch_size or 1
        self._position = start
        k = 0
        for batch in super().__iter__():
            # Counted here, not by the sampler: workers prefetch past it.
            k += 1
            self._position = min(start + k * b, per)
            yield batch

    def state_dict(self) -> Dict[str, int]:
        return self._resumable().state_dict(self._position)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self._resumable().load_state_dict(state)
        self._position = None


def offload(*args, **kwargs):
    """Layer streaming from the memory plane: strata.offload.offload
    (weights of a module kept in a strata.mem pool, fetched per layer)."""
    from .offload import offload as _offload
    return _offload(*args, **kwargs)
