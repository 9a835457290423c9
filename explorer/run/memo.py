"""A cache bounded by the bytes it holds, shared by every session: least recently used first out, one computation
per key at a time (twenty people typing the same example run the model once)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import gc
import itertools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import TypeVar

import numpy as np

T = TypeVar("T")

# One order of use across every cache (a number drawn at each use): when a run needs memory the admission gate drops
# the least recently used entry of them all first (explorer/run/admission.py), whichever cache holds it.
_uses = itertools.count()


def arrays(value: object) -> Iterator[np.ndarray]:
    """Every numpy array inside a value (through dataclasses, dicts, tuples and lists)."""
    if isinstance(value, np.ndarray):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from arrays(getattr(value, f.name))
    elif isinstance(value, dict):
        for v in value.values():
            yield from arrays(v)
    elif isinstance(value, tuple | list):
        for v in value:
            yield from arrays(v)
    elif callable(getattr(value, "kept_arrays", None)):  # explorer.run.layers.StackLayers: the layers a run kept
        yield from value.kept_arrays()


def nbytes(value: object) -> int:
    """The numpy bytes inside a value; everything else counts as nothing."""
    return sum(a.nbytes for a in arrays(value))


def freeze(value: object) -> None:
    """Make every array inside read-only: a cached value is shared by all sessions, and no one may change it."""
    for a in arrays(value):
        a.setflags(write=False)


TRIM_AFTER_BYTES = 16 * 2**20


def _malloc_trim() -> Callable[[], object]:
    """glibc's malloc_trim(0), or a no-op elsewhere: freed arrays go back to the system instead of staying in the
    heap (without it, a few hundred traces of different sizes leave hundreds of MB resident after eviction)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


release_memory = _malloc_trim()

MALLOC_ARENAS = 2  # glibc's M_ARENA_MAX; its default, 8 per core, lets each session thread keep a heap of its own


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> None:
    """Every thread created from now on shares at most `arenas` glibc heaps (mallopt M_ARENA_MAX; a no-op
    elsewhere). Streamlit runs each script run in a new thread: with a heap per thread, memory freed in one stays
    reserved there (`python -m bench load`: 792 MB instead of 807-811 after every page with every model)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


class BoundedCache:
    """Values by key, at most `max_bytes` of arrays in all; a value larger than that is returned but not kept."""

    def __init__(self, max_bytes: int, size: Callable[[object], int] = nbytes) -> None:
        self.max_bytes, self._size = max_bytes, size  # size: a value's bytes (default: its numpy arrays')
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._computing: dict[Hashable, threading.Lock] = {}
        self._used: dict[Hashable, int] = {}  # each key's last use, in the order of use shared by every cache

    @property
    def bytes(self) -> int:
        return self._bytes

    # -- giving memory back (explorer.run.admission.Giver)
    def reclaimable(self) -> int:
        return self._bytes

    def oldest(self) -> int | None:
        """When the least recently used value was last used (None when empty)."""
        with self._lock:
            return self._used[next(iter(self._items))] if self._items else None

    def drop_oldest(self) -> int:
        """Drop the least recently used value; the bytes it held (0 when empty)."""
        with self._lock:
            if not self._items:
                return 0
            key, (value, size) = self._items.popitem(last=False)
            self._used.pop(key, None)
            self._bytes -= size
        del value  # outside the lock: freeing big arrays takes a moment
        if size >= TRIM_AFTER_BYTES:
            release_memory()
        return size

    def __len__(self) -> int:
        return len(self._items)

    def _hit(self, key: Hashable) -> tuple[bool, object]:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self._used[key] = next(_uses)
                return True, self._items[key][0]
            return False, None

    def computing(self, key: Hashable) -> bool:
        """Whether another caller is computing the value under `key` now (get would wait for its result)."""
        with self._lock:
            return key in self._computing and self._computing[key].locked()

    def peek(self, key: Hashable) -> object | None:
        """The value under `key` if kept (a use: it moves to the back of the line), else None; computes nothing."""
        return self._hit(key)[1]

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        found, value = self._hit(key)
        if found:
            return value  # type: ignore[return-value]
        with self._lock:
            key_lock = self._computing.setdefault(key, threading.Lock())
        with key_lock:  # a second caller for the same key waits for the first one's result
            found, value = self._hit(key)
            if found:
                return value  # type: ignore[return-value]
            try:
                value = compute()
                freeze(value)
                size = self._size(value)
                freed = self._keep(key, value, size)
                if size + freed >= TRIM_AFTER_BYTES:  # a big computation leaves its temporaries in the heap
                    release_memory()
            finally:
                with self._lock:
                    self._computing.pop(key, None)
        return value  # type: ignore[return-value]

    def _keep(self, key: Hashable, value: object, size: int) -> int:
        """Keep the value, evicting the least recently used; returns the bytes evicted."""
        if size > self.max_bytes:
            return 0
        evicted = []  # dropped outside the lock
        with self._lock:
            if key in self._items:
                self._bytes -= self._items[key][1]
                evicted.append(self._items.pop(key))
            self._items[key] = (value, size)
            self._used[key] = next(_uses)
            self._bytes += size
            while self._bytes > self.max_bytes:
                gone, kept = self._items.popitem(last=False)
                self._used.pop(gone, None)
                evicted.append(kept)
                self._bytes -= evicted[-1][1]
        freed = sum(s for _, s in evicted)
        evicted.clear()
        return freed

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._used.clear()
            self._bytes = 0


class Recent:
    """The `kept` values put last, by key (least recently used out first): small values that hold no arrays, bounded
    by their count (a corpus a shared address names by its digest)."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: Hashable, value: object) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.kept:
                self._items.popitem(last=False)

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def __len__(self) -> int:
        return len(self._items)


def model_bytes(value: object) -> int:
    """The bytes of a loaded model's weights (a registry.LoadedModel, or a torch module such as a transformers
    reference): what dropping it gives back once no one else holds it."""
    module = getattr(value, "model", value)
    parameters = getattr(module, "parameters", None)
    if not callable(parameters):
        return 0
    return sum(p.numel() * p.element_size() for p in parameters())


# What refers to a shelf's value when nothing outside does: the shelf's dict and sys.getrefcount's own argument
_SHELF_ONLY = 2


class Shelf:
    """The `kept` most recently used values of an expensive loader (models), shared by every session. One load at a
    time, so two people picking the same model load it once; room is made before a load (the least recently used goes
    first, so two models are never held where one fits), and what falls off is garbage-collected and its heap handed
    back to the system, so memory follows the models in use rather than every model ever opened. `admit(key)`: the
    context a load runs in (the app's admission gate); `size(value)`: its bytes, what it gives back when dropped."""

    def __init__(
        self,
        load: Callable[[Hashable], T],
        kept: int,
        admit: Callable[[Hashable], contextlib.AbstractContextManager] = lambda key: contextlib.nullcontext(),
        size: Callable[[object], int] = model_bytes,
    ) -> None:
        self._load, self._kept, self._admit, self._size = load, kept, admit, size
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._used: dict[Hashable, int] = {}
        self._lock = threading.Lock()  # guards _values; held only briefly
        self._loading = threading.Lock()  # one load at a time

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values

    def keys(self) -> list[Hashable]:
        """Least recently used first."""
        with self._lock:
            return list(self._values)

    def drop(self, key: Hashable) -> None:
        """Forget a value (if kept): its next use loads it again."""
        with self._lock:
            self._values.pop(key, None)
            self._used.pop(key, None)

    def _hit(self, key: Hashable) -> tuple[bool, object]:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                self._used[key] = next(_uses)
                return True, self._values[key]
            return False, None

    # -- giving memory back (explorer.run.admission.Giver): only values no session holds now
    def _unheld(self) -> list[Hashable]:
        return [key for key in self._values if sys.getrefcount(self._values[key]) <= _SHELF_ONLY]

    def reclaimable(self) -> int:
        with self._lock:
            return sum(self._size(self._values[key]) for key in self._unheld())

    def oldest(self) -> int | None:
        with self._lock:
            unheld = self._unheld()
            return self._used[unheld[0]] if unheld else None

    def drop_oldest(self) -> int:
        """Drop the least recently used value no session holds; the bytes it gave back (0: none such)."""
        with self._lock:
            unheld = self._unheld()
            if not unheld:
                return 0
            value = self._values.pop(unheld[0])
            self._used.pop(unheld[0], None)
        size = self._size(value)
        del value
        gc.collect()  # models hold reference cycles (modules and their parents)
        release_memory()
        return size

    def get(self, key: Hashable):
        found, value = self._hit(key)
        if found:
            return value
        # admitted before the lock is taken: a thread holding the lock is always admitted and loading, so a run that
        # needs a model again while a load waits for that run's memory never waits on the lock (it is admitted at
        # once, inside its own run)
        with self._admit(key), self._loading:
            found, value = self._hit(key)  # loaded by someone else while we waited
            if found:
                return value
            with self._lock:  # room first: the model falling off goes before the new one is read
                dropped = [self._values.popitem(last=False) for _ in range(len(self._values) - self._kept + 1)]
                for pair in dropped:
                    self._used.pop(pair[0], None)
            if dropped:
                del dropped, pair  # the last references this shelf held
                gc.collect()
                release_memory()
            value = self._load(key)
            with self._lock:
                self._values[key] = value
                self._used[key] = next(_uses)
        return value
