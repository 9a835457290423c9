"""The shared store: bounded in bytes, least recently used out, read-only values, one computation per key."""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np
import pytest

from attention_explorer.explorer.run import memo


def array(kb: int) -> np.ndarray:
    return np.zeros(kb * 256, dtype=np.float32)  # kb kilobytes


def test_bytes_stay_within_the_bound_and_the_least_recent_goes_first():
    cache = memo.BoundedCache(max_bytes=3 * 1024)
    for key in "abc":
        cache.get(key, lambda: array(1))
    cache.get("a", lambda: pytest.fail("a is cached"))  # a is now the most recent
    cache.get("d", lambda: array(1))
    assert cache.bytes == 3 * 1024 and len(cache) == 3
    calls = []
    cache.get("b", lambda: calls.append("b") or array(1))
    assert calls == ["b"]  # b was the least recently used, so it had gone


def test_a_value_over_the_bound_is_returned_but_not_kept():
    cache = memo.BoundedCache(max_bytes=1024)
    big = cache.get("big", lambda: {"x": array(2)})
    assert big["x"].nbytes == 2048 and len(cache) == 0 and cache.bytes == 0


def test_cached_arrays_are_read_only():
    cache = memo.BoundedCache(max_bytes=1 << 20)
    value = cache.get("k", lambda: (array(1), {"y": array(1)}))
    with pytest.raises(ValueError, match="read-only"):
        value[1]["y"][0] = 1


def test_concurrent_callers_of_one_key_compute_it_once():
    cache = memo.BoundedCache(max_bytes=1 << 20)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return array(1)

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("same", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(results) == 8 and all(r is results[0] for r in results)


def test_a_failed_computation_is_not_kept_and_can_be_retried():
    cache = memo.BoundedCache(max_bytes=1 << 20)
    with pytest.raises(RuntimeError):
        cache.get("k", lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert cache.get("k", lambda: array(1)).nbytes == 1024


def test_a_shelf_keeps_the_most_recently_used_and_releases_the_rest():
    loads = []

    class Model:
        def __init__(self, key):
            self.key = key
            self.self_ref = self  # a reference cycle, as torch modules have: only the collector frees it

    def load(key):
        loads.append(key)
        return Model(key)

    shelf = memo.Shelf(load, kept=2)
    a = shelf.get("a")
    dropped = weakref.ref(a)
    assert shelf.get("a") is a and loads == ["a"]
    shelf.get("b")
    shelf.get("a")  # now "b" is the least recently used
    del a
    shelf.get("c")
    assert shelf.keys() == ["a", "c"] and loads == ["a", "b", "c"]
    shelf.get("d")  # "a" falls off and is freed at once, cycle and all
    assert shelf.keys() == ["c", "d"] and dropped() is None
    shelf.get("a")
    assert loads == ["a", "b", "c", "d", "a"]


def test_a_shelf_loads_a_key_once_when_many_ask_at_once():
    loads = []
    started = threading.Event()

    def load(key):
        loads.append(key)
        started.wait(timeout=60)  # everyone else asks while this load is under way
        return object()

    shelf = memo.Shelf(load, kept=3)
    results = []
    threads = [threading.Thread(target=lambda: results.append(shelf.get("m"))) for _ in range(6)]
    for t in threads:
        t.start()
    started.set()
    for t in threads:
        t.join(timeout=60)
    assert loads == ["m"] and len(results) == 6 and all(r is results[0] for r in results)


def test_a_failed_load_is_not_kept():
    shelf = memo.Shelf(lambda key: (_ for _ in ()).throw(OSError("broken file")), kept=2)
    with pytest.raises(OSError, match="broken file"):
        shelf.get("x")
    assert shelf.keys() == []


def test_a_value_being_computed_is_seen_as_such_by_another_caller():
    cache = memo.BoundedCache(2**20)
    inside, release = threading.Event(), threading.Event()

    def slow():
        inside.set()
        assert release.wait(60)
        return np.zeros(3)

    worker = threading.Thread(target=lambda: cache.get("k", slow), daemon=True)
    worker.start()
    assert inside.wait(60)
    assert cache.computing("k") and not cache.computing("other")
    release.set()
    worker.join(60)
    assert not cache.computing("k") and cache.peek("k") is not None
