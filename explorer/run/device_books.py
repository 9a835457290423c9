"""The GPU's memory, budgeted beside the process's (explorer.run.admission's Gate): a second set of books, kept apart
from the Gate so that either can change alone.

A run on a GPU adds its activations there, about what explorer.run.cost estimates for the CPU (the same float32
tensors: one layer's attention at a time, every layer's input); the weights already sit there. So each admitted run
reserves its estimate in bytes against a budget of the device's memory (`serve --gpu-memory-budget`, default 90% of
what torch.cuda.mem_get_info says is free when the server starts): a run that cannot fit even alone is refused at once
with one line saying how many tokens would; one that fits alone waits for those running to end. Should CUDA still run
out of memory (another process took it, the estimate was low), the run is refused the same way, torch's cached blocks
are given back (torch.cuda.empty_cache) and the server serves on.

No streamlit here: explorer/app/gpu.py holds the server's one set of books and says what is refused.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping

import torch

from attention_explorer.explorer.run import caps
from attention_explorer.explorer.run.admission import Refused, gigabytes
from attention_explorer.models import device as devices

GPU_BUDGET_ENV = "EXPLORER_GPU_MEMORY_BUDGET"
DEFAULT_SHARE = 0.9  # of the device's free memory at start: the rest for CUDA's own context and fragmentation
WAIT_SECONDS = 0.5  # how often a run waiting for the GPU looks again (and may be cancelled by `waiting`)


class DeviceRefused(Refused):
    """A run the GPU cannot hold: `needed` bytes, `room` the most a run may have on it now; `out_of_memory` when CUDA
    itself ran out (the estimate said it would fit)."""

    def __init__(self, needed: int, room: int, budget: int, out_of_memory: bool = False) -> None:
        super().__init__(needed, room, budget)
        self.out_of_memory = out_of_memory
        if out_of_memory:
            self.args = (f"the GPU ran out of memory; this server lets a run have {gigabytes(room)} of it now",)
        else:
            self.args = (f"needs about {gigabytes(needed)} of GPU memory; a run may have {gigabytes(room)} now",)


def device_memory(device: torch.device) -> tuple[int, int]:
    """(free, total) bytes of a CUDA device, as torch.cuda.mem_get_info says them."""
    free, total = torch.cuda.mem_get_info(device)
    return int(free), int(total)


def default_budget(device: torch.device) -> int:
    """DEFAULT_SHARE of the device's free memory now (call it at start, before the first run)."""
    return int(DEFAULT_SHARE * device_memory(device)[0])


def budget_from(text: str | None, device: torch.device) -> int:
    """`--gpu-memory-budget` / EXPLORER_GPU_MEMORY_BUDGET (12GB, 40GiB, or a share like 80% of the device's total
    memory), else the default; ValueError, one line, for a bad size."""
    if text is None or not text.strip():
        return default_budget(device)
    return caps.parse_memory(text, device_memory(device)[1])


def budget_text(environ: Mapping[str, str] = os.environ) -> str | None:
    """The budget as the environment sets it (None: the default)."""
    return environ.get(GPU_BUDGET_ENV) or None


class DeviceBooks:
    """One CUDA device's memory: `with books.admitted(nbytes):` around each run on it. `allocated()` is what torch
    holds there now (the models' weights with nothing running); tests give their own."""

    def __init__(self, device: torch.device, budget: int, allocated: Callable[[], int] | None = None) -> None:
        self.device, self.budget = device, budget
        self.allocated = allocated or (lambda: int(torch.cuda.memory_allocated(device)))
        self._changed = threading.Condition()
        self._reserved: list[int] = []  # the estimates of the runs on the device now
        self._here = threading.local()  # set while this thread runs inside admitted (a layer within a run)
        self._idle = self.allocated()

    def _held(self) -> int:
        """What the device holds apart from the runs admitted: sampled with nothing running, else the most of that
        sample and what torch holds beyond the runs' estimates."""
        if not self._reserved:
            self._idle = self.allocated()
            return self._idle
        return max(self._idle, self.allocated() - sum(self._reserved))

    def room(self) -> int:
        """The most a run may add on the device now with nothing else running."""
        with self._changed:
            return max(0, self.budget - self._held())

    @contextlib.contextmanager
    def admitted(self, nbytes: int, waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Run the block once `nbytes` fit on the device beside the runs there. DeviceRefused at once when they could
        not fit even alone, or when CUDA runs out of memory inside (its cache then emptied); whatever `waiting`
        raises while it waits cancels it. Inside an admitted block of the same thread it admits at once."""
        if getattr(self._here, "inside", False):
            yield
            return
        while True:
            with self._changed:
                room = self.budget - (self._idle if self._reserved else self._held())
                if nbytes > room:
                    raise DeviceRefused(nbytes, max(0, room), self.budget)
                if self._held() + sum(self._reserved) + nbytes <= self.budget:
                    self._reserved.append(nbytes)
                    break
                self._changed.wait(WAIT_SECONDS)
            if waiting is not None:
                waiting()  # outside the lock: it may draw, or raise to cancel
        self._here.inside = True
        try:
            yield
        except Exception as error:
            if not devices.is_out_of_memory(error):
                raise
            devices.free_memory(self.device)
            raise DeviceRefused(nbytes, max(0, self.budget - self._idle), self.budget, out_of_memory=True) from None
        finally:
            self._here.inside = False
            with self._changed:
                self._reserved.remove(nbytes)
                self._changed.notify_all()
