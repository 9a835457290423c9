"""The shared store: bounded in bytes, least recently used out, read-only values, one computation per key."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from explorer import memo


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
