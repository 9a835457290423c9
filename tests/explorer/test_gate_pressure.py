"""The gate under memory pressure (explorer.run.admission with explorer.run.memo's caches): the caches give way before a
run waits or is refused, least recently used first across every cache; a refusal only when the run could not fit with
every cache empty; a long run waiting for memory keeps its place against steady short traffic, and its "starts in"
says when it really starts; a load and a training run keep to lanes of their own. The process's memory is a fake
reading (what it holds besides, plus what its caches hold), so every figure is exact; threads wait for events with
explicit timeouts, and nothing here depends on speed."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from attention_explorer.explorer.run import memo
from attention_explorer.explorer.run.admission import Cost, Gate, Refused
from tests.explorer.test_admission import LONG, MB, SHORT, TIMEOUT, Held, waiting_for


def filled(cache: memo.BoundedCache, *sizes: int) -> memo.BoundedCache:
    """The cache holding one more array of each size (in MB), used in that order."""
    for size in sizes:
        cache.get(len(cache), lambda size=size: np.zeros(size * MB, dtype=np.uint8))
    return cache


def process(base: int, *caches) -> callable:
    """A fake resident reading: what the process holds besides its caches, plus what they hold now."""
    return lambda: base + sum(cache.reclaimable() for cache in caches)


def test_the_caches_give_way_least_recently_used_first_across_them_all():
    store, layers = memo.BoundedCache(1000 * MB), memo.BoundedCache(1000 * MB)
    filled(store, 100)  # used first
    filled(layers, 100)
    filled(store, 100)
    store.get(0, lambda: pytest.fail("kept"))  # the store's first value used again: the layers' is now the oldest
    gate = Gate(budget=1000 * MB, resident=process(600 * MB, store, layers), caches=lambda: (store, layers))
    assert gate.room() == 400 * MB  # with every cache empty
    with gate.admitted(Cost(LONG, 200 * MB)):  # 600 + 300 held: one 100 MB entry must go, the oldest of all
        assert layers.bytes == 0 and store.bytes == 200 * MB
    assert gate.dropped == 1 and gate.books() == (0, 0, 0)


def test_a_process_over_its_budget_still_admits_what_fits_once_the_caches_are_empty():
    """The door this closes: once the process had grown past the budget, every run was refused, even one byte, until
    a restart."""
    store = filled(memo.BoundedCache(2000 * MB), 500, 600)
    gate = Gate(budget=1000 * MB, resident=process(100 * MB, store), caches=lambda: (store,))
    with gate.admitted(Cost(SHORT, 1)):
        assert store.bytes == 600 * MB  # the least recently used entry went, and that was enough
    with gate.admitted(Cost(LONG, 850 * MB)):
        assert store.bytes == 0
    assert gate.books() == (0, 0, 0)


def test_a_run_that_could_not_fit_with_every_cache_empty_is_refused_and_no_cache_is_touched():
    store = filled(memo.BoundedCache(1000 * MB), 300)
    gate = Gate(budget=1000 * MB, resident=process(800 * MB, store), caches=lambda: (store,))
    with pytest.raises(Refused) as refused, gate.admitted(Cost(LONG, 201 * MB)):
        pytest.fail("a run past the budget ran")
    assert (refused.value.needed, refused.value.room) == (201 * MB, 200 * MB)
    assert store.bytes == 300 * MB and gate.dropped == 0 and gate.books() == (0, 0, 0)


def test_only_models_no_session_holds_give_way():
    class Model:
        def __init__(self, key):
            self.key = key

    shelf = memo.Shelf(Model, kept=3, size=lambda value: 100 * MB)
    held = shelf.get("held")  # a session reads this one now
    shelf.get("free")
    resident = lambda: 700 * MB + 100 * MB * len(shelf.keys())  # noqa: E731 - both models are in memory
    gate = Gate(budget=1000 * MB, resident=resident, caches=lambda: (shelf,))
    assert shelf.reclaimable() == 100 * MB
    with pytest.raises(Refused), gate.admitted(Cost(LONG, 201 * MB)):  # 700 + 100 held by a session: 200 MB room
        pytest.fail("a run past the budget ran")
    with gate.admitted(Cost(LONG, 200 * MB)):
        assert shelf.keys() == ["held"]
    assert held.key == "held" and gate.books() == (0, 0, 0)


def test_a_shelf_lets_the_old_model_go_before_it_loads_the_new_one():
    alive, peak = set(), []

    class Model:
        def __init__(self, key):
            self.key = key
            alive.add(key)
            peak.append(len(alive))

        def __del__(self):
            alive.discard(self.key)

    shelf = memo.Shelf(Model, kept=1)
    shelf.get("a")
    shelf.get("b")
    shelf.get("c")
    assert peak == [1, 1, 1] and alive == {"c"}


def test_a_long_run_waiting_for_memory_keeps_its_place_against_steady_short_runs():
    """The issue's script: budget 100, a long run of 90, three visitors sending 20-byte short runs. Before, the long
    run started only when the short traffic stopped; now it starts as soon as the short runs under way when it came
    have ended, and the time it was told is the time it waited."""
    now = [0.0]
    gate = Gate(budget=100, resident=lambda: 0, clock=lambda: now[0])
    first, second = Held(gate, Cost(SHORT, 20)), Held(gate, Cost(SHORT, 20))  # the short lane's slot, the shared one
    assert first.started.wait(TIMEOUT) and second.started.wait(TIMEOUT)
    long = Held(gate, Cost(LONG, 90))
    assert waiting_for(long)
    told = long.places[-1]
    assert told.seconds == pytest.approx(SHORT)  # when the short runs under way end, from their estimates
    third = Held(gate, Cost(SHORT, 20))  # a visitor's next short run: it must leave the long run its memory
    assert waiting_for(third)
    first.end()  # the short lane's slot is free, but 20 + 20 + 90 > 100: the third still waits
    assert waiting_for(third) and not third.started.is_set()
    assert third.places[-1].seconds == pytest.approx(SHORT + LONG)  # after the long run, which fills the budget
    now[0] = SHORT
    second.end()
    assert long.started.wait(TIMEOUT)
    assert not third.started.is_set()  # 90 + 20 > 100: it waits for the long run, which went first
    long.end()
    assert third.started.wait(TIMEOUT)
    third.end()
    assert all(h.error is None for h in (first, second, long, third))
    assert gate.books() == (0, 0, 0)


def test_short_runs_go_on_beside_a_reserving_long_run_in_the_memory_left_over():
    gate = Gate(budget=1000 * MB, resident=lambda: 0)
    own_slot = Held(gate, Cost(SHORT, 10 * MB))  # the short lane's own slot first
    shared_slot = Held(gate, Cost(SHORT, 10 * MB))  # then the shared one
    assert own_slot.started.wait(TIMEOUT) and shared_slot.started.wait(TIMEOUT)
    long = Held(gate, Cost(LONG, 900 * MB))  # waits for the shared slot a short run holds
    assert waiting_for(long)
    own_slot.end()
    with gate.admitted(Cost(SHORT, 80 * MB)):  # 10 + 900 + 80 <= 1000: the short lane goes on, in its own slot
        assert gate.running() == 2 and not long.started.is_set()
        shared_slot.end()
        assert long.started.wait(TIMEOUT)  # beside the short run, in the memory it was left
    long.end()
    assert gate.books() == (0, 0, 0)


def test_a_load_and_a_training_run_keep_to_their_own_lanes():
    gate = Gate(budget=10_000 * MB, resident=lambda: 0)
    text = Held(gate, Cost(LONG, MB))
    training = Held(gate, Cost(LONG, MB, "train"))
    load = Held(gate, Cost(LONG, MB, "load"))
    assert text.started.wait(TIMEOUT) and training.started.wait(TIMEOUT) and load.started.wait(TIMEOUT)
    another_training = Held(gate, Cost(LONG, MB, "train"))  # one training run per server at a time
    assert waiting_for(another_training)
    assert another_training.places[-1].reason == "turn"
    training.end()
    assert another_training.started.wait(TIMEOUT)
    for held in (text, load, another_training):
        held.end()
    assert gate.books() == (0, 0, 0)


def test_many_sessions_at_once_never_take_the_process_past_its_budget():
    """Twelve visitors' threads, each running short and long runs of random sizes, some raising, some cancelled
    while they wait: whatever the order the machine gives them, the admitted runs and the caches never hold more
    than the budget, every run ends, and the books balance to 0."""
    budget, base = 1000 * MB, 100 * MB
    store = memo.BoundedCache(600 * MB)
    inside, peak, lock = [0], [0], threading.Lock()
    resident = lambda: base + store.reclaimable() + inside[0]  # noqa: E731 - what runs hold is what they allocated
    gate = Gate(budget=budget, resident=resident, any_slots=2, caches=lambda: (store,))
    errors = []

    class Left(Exception):
        pass

    def visitor(seed: int) -> None:
        chance = random.Random(seed)
        for n in range(15):
            size = chance.choice([5, 20, 200, 600]) * MB
            cost = Cost(chance.choice([SHORT, LONG]), size)
            leaves = chance.random() < 0.1

            def waiting(place, leaves=leaves):
                if leaves:
                    raise Left

            try:
                with gate.admitted(cost, waiting):
                    with lock:
                        inside[0] += size
                        peak[0] = max(peak[0], resident())
                    try:
                        store.get((seed, n), lambda: np.zeros(chance.choice([1, 50]) * MB, np.uint8))
                        if chance.random() < 0.1:
                            raise ValueError("the run failed")
                    finally:
                        with lock:
                            inside[0] -= size
            except (Left, ValueError):
                pass
            except BaseException as error:  # noqa: BLE001 - the test reads it
                errors.append(error)

    threads = [threading.Thread(target=visitor, args=(seed,), daemon=True) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads) and errors == []
    assert 0 < peak[0] <= budget
    assert gate.books() == (0, 0, 0)


def until(condition, timeout: float = TIMEOUT) -> bool:
    """Whether `condition()` came true within the timeout (checked every few milliseconds)."""
    done = threading.Event()
    for _ in range(int(timeout / 0.005)):
        if condition():
            return True
        done.wait(0.005)
    return condition()


def test_a_run_that_needs_a_model_again_never_waits_on_a_load_waiting_for_its_memory():
    """A load waits for the memory a run holds; that run needs another model loaded to finish (a long text's layer
    recomputed once its model left the shelf): it loads at once, inside its own admission, and both end."""
    gate = Gate(budget=1000 * MB, resident=lambda: 0)
    shelf = memo.Shelf(lambda key: key, kept=3, admit=lambda key: gate.admitted(Cost(LONG, 600 * MB, "load")))
    go, got = threading.Event(), []
    run = Held(gate, Cost(LONG, 500 * MB), lambda: (go.wait(TIMEOUT), got.append(shelf.get("again"))))
    load = threading.Thread(target=lambda: got.append(shelf.get("new")), daemon=True)
    load.start()
    assert until(lambda: gate.books()[1] == 1)  # the load waits: 500 + 600 > 1000
    go.set()
    assert run.started.wait(TIMEOUT)  # the run got its model without waiting for the load
    run.end()
    load.join(TIMEOUT)
    assert not load.is_alive() and got == ["again", "new"] and run.error is None
    assert gate.books() == (0, 0, 0)
