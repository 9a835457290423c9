"""Small read-outs on a kept run are admitted too (issue 52): a token's embedding and a layer recomputed for one row
(the Forward pass page), and a head's walkthrough of a kept layer, each go through the Gate with an estimate in a lane
of their own ("readout"), so a long run holding the shared slot does not hold them up; a read-out that cannot fit is
refused in one line, and the books end at 0. The gate reads a fixed resident memory here, so every room is exact."""

from __future__ import annotations

import threading

import pytest

from attention_explorer.explorer.app import shelf, store, waiting
from attention_explorer.explorer.run import admission, caps
from tests.app import new_app

MB = 10**6
WAIT_S = 60  # a generous limit for another thread to take its slot on a busy machine


def test_a_readout_starts_in_its_own_lane_beside_a_long_and_a_short_run_and_one_too_big_is_refused():
    gate = admission.Gate(100 * MB, resident=lambda: 10 * MB)
    holding, release = threading.Barrier(3), threading.Event()

    def hold(cost: admission.Cost) -> None:
        with gate.admitted(cost):
            holding.wait(WAIT_S)
            release.wait(WAIT_S)

    threads = [
        threading.Thread(target=hold, args=(admission.Cost(30.0, 20 * MB),)),  # long: the shared slot
        threading.Thread(target=hold, args=(admission.Cost(0.1, 20 * MB),)),  # short: the short lane's own slot
    ]
    for thread in threads:
        thread.start()
    try:
        holding.wait(WAIT_S)
        assert gate.books() == (2, 0, 40 * MB)
        with gate.admitted(waiting.readout_cost(_config(), 64)):  # no slot of theirs is free: its own lane is
            assert gate.books()[:2] == (3, 0)
        # it fits no more than any run: past the room it could have alone with every cache empty, refused at once
        with pytest.raises(admission.Refused) as refused, gate.admitted(admission.Cost(0.001, 95 * MB, "readout")):
            pass
        assert (refused.value.needed, refused.value.room) == (95 * MB, 100 * MB - 10 * MB)
    finally:
        release.set()
        for thread in threads:
            thread.join(WAIT_S)
    assert gate.books() == (0, 0, 0)


def test_a_readout_that_needs_a_layer_again_carries_that_layer_in_the_ordinary_lanes():
    config = _config()
    small = waiting.readout_cost(config, 2048)
    layer = admission.Cost(3.0, 50 * MB)
    both = waiting.readout_cost(config, 2048, layer)
    assert small.lane == "readout" and small.bytes > 0 and small.seconds > 0
    assert both.lane == "" and both.bytes == small.bytes + layer.bytes and both.seconds == small.seconds + 3.0


def _config():
    from attention_explorer.models import registry

    return registry.load("translate").model.config


@pytest.fixture
def served(monkeypatch):
    """A server whose process holds 10 MB besides its caches, with a budget of 10 GB: the gate, cleared."""
    monkeypatch.setattr(admission, "resident_bytes", lambda: 10 * MB)
    monkeypatch.setenv(caps.MEMORY_BUDGET_ENV, "10000MB")
    _clear()
    yield
    monkeypatch.undo()
    _clear()


def _clear() -> None:
    for cleared in (caps.current.cache_clear, waiting.gate.clear, shelf.shelf.clear):
        cleared()
    store.shared().clear()


def test_the_forward_page_admits_its_readouts_and_one_that_cannot_fit_is_refused(served, monkeypatch):
    lanes: list[admission.Cost] = []
    admitted = admission.Gate.admitted

    def recording(self, cost, waiting_=None):
        lanes.append(cost)
        return admitted(self, cost, waiting_)

    monkeypatch.setattr(admission.Gate, "admitted", recording)
    at = new_app("forward").run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    readouts = [c for c in lanes if c.lane == "readout"]
    assert len(readouts) >= 2  # the embedding's row and the layer's row, each with its estimate
    assert all(c.bytes > 0 and c.seconds > 0 for c in readouts)
    gate = waiting.gate()
    assert gate.books() == (0, 0, 0)
    # the run is kept; now the server's budget leaves no room (it holds 10 MB, the budget is 5 MB, no cache to give
    # way: the fixed resident figure would not shrink): the page's first read-out is refused in one line, and
    # nothing stays on the books
    gate.budget, gate.caches = 5 * MB, tuple
    at.run()
    assert not at.exception
    (error,) = at.error
    assert error.value.startswith("This token's embedding needs about") and "memory" in error.value
    assert gate.books() == (0, 0, 0)
