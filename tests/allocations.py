"""Torch's own allocations counted while a computation runs: the most bytes of tensor storage alive at once.

A TorchDispatchMode sees every tensor each operator returns; a storage is counted from the operator that made it
until it is freed (torch.multiprocessing's StorageWeakRef tells when, checked at every operator). Storages made before
the count began (the weights, the input) are not counted. Deterministic: no allocator, page or timing in it."""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class PeakAllocations(TorchDispatchMode):
    """`with PeakAllocations() as count: ...`, then count.peak: the most bytes of new storage alive at one time."""

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[int, tuple[StorageWeakRef, int]] = {}  # by storage address
        self.now = 0
        self.peak = 0

    def _forget_freed(self) -> None:
        for key, (ref, size) in list(self.alive.items()):
            if ref.expired():
                del self.alive[key]
                self.now -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._forget_freed()
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in self.alive and self.alive[key][0].expired():  # an address freed and given out again
                    self.now -= self.alive.pop(key)[1]
                if key and key not in self.alive and storage.nbytes():
                    self.alive[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.now += storage.nbytes()
        self.peak = max(self.peak, self.now)
        return out
