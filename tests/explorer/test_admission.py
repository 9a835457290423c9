"""Admission by cost (explorer.run.admission): the memory budget, the short runs' own lane, the line in order, and
cancelling a run that waits. Threads wait for events with explicit timeouts; nothing here depends on speed."""

from __future__ import annotations

import threading

import pytest

from attention_explorer.explorer.run import admission
from attention_explorer.explorer.run.admission import Cost, Gate, Refused

TIMEOUT = 60  # seconds any one wait may take on a busy machine before the test fails instead of hanging
MB = 10**6
SHORT, LONG = 0.1, 30.0  # seconds: either side of admission.SHORT_SECONDS


class Held:
    """A run held inside the gate until released, in its own thread: its place while it waited, and its error."""

    def __init__(self, gate: Gate, cost: Cost, inside=lambda: None) -> None:
        self.started, self.release, self.places, self.error = threading.Event(), threading.Event(), [], None
        self.thread = threading.Thread(target=self._run, args=(gate, cost, inside), daemon=True)
        self.thread.start()

    def _run(self, gate: Gate, cost: Cost, inside) -> None:
        try:
            with gate.admitted(cost, self.places.append):
                inside()  # what the run does first, in its own thread
                self.started.set()
                assert self.release.wait(TIMEOUT)
        except BaseException as error:  # noqa: BLE001 - the test reads it
            self.error = error

    def end(self) -> None:
        self.release.set()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()


def waiting_for(held: Held) -> bool:
    """Whether the run has been told its place at least once (it is in line), within the timeout."""
    for _ in range(int(TIMEOUT / admission.POLL_SECONDS) * 2):
        if held.places or held.started.is_set():
            return bool(held.places)
        threading.Event().wait(admission.POLL_SECONDS / 2)
    return False


def test_a_run_that_cannot_fit_even_alone_is_refused_with_the_room_there_is():
    gate = Gate(budget=1000 * MB, resident=lambda: 400 * MB)
    with pytest.raises(Refused) as refused, gate.admitted(Cost(LONG, 700 * MB)):
        pytest.fail("a run past the budget ran")
    assert refused.value.room == 600 * MB and refused.value.needed == 700 * MB
    assert str(refused.value) == "needs about 700 MB; this server lets a run have 600 MB now"
    with gate.admitted(Cost(LONG, 600 * MB)):  # what fits exactly runs, and nothing was left in line
        assert gate.running() == 1
    assert gate.running() == 0


def test_a_short_run_never_waits_behind_a_long_one():
    gate = Gate(budget=10_000 * MB, resident=lambda: 0)
    long_run = Held(gate, Cost(LONG, 100 * MB))
    assert long_run.started.wait(TIMEOUT)
    second_long = Held(gate, Cost(LONG, 100 * MB))  # the shared slot is taken: it waits
    assert waiting_for(second_long)
    with gate.admitted(Cost(SHORT, 10 * MB)):  # the short lane's own slot: at once, in this thread
        assert gate.running() == 2
    place = second_long.places[-1]
    assert (place.ahead, place.reason) == (0, "turn") and 0 < place.seconds <= LONG
    long_run.end()
    assert second_long.started.wait(TIMEOUT)
    second_long.end()
    assert long_run.error is None and second_long.error is None


def test_long_runs_start_in_the_order_they_came_and_know_their_place():
    gate = Gate(budget=10_000 * MB, resident=lambda: 0)
    first = Held(gate, Cost(LONG, MB))
    assert first.started.wait(TIMEOUT)
    second = Held(gate, Cost(LONG, MB))
    assert waiting_for(second)
    third = Held(gate, Cost(LONG, MB))
    assert waiting_for(third)
    assert third.places[-1].ahead == 1 and third.places[-1].seconds > second.places[-1].seconds
    first.end()
    assert second.started.wait(TIMEOUT)
    assert not third.started.is_set()
    second.end()
    assert third.started.wait(TIMEOUT)
    third.end()


def test_a_run_waits_for_memory_and_starts_when_it_is_free():
    gate = Gate(budget=1000 * MB, resident=lambda: 200 * MB, short_slots=1, any_slots=2)
    big = Held(gate, Cost(LONG, 600 * MB))
    assert big.started.wait(TIMEOUT)
    other = Held(gate, Cost(LONG, 500 * MB))  # a slot is free, the memory is not: 200 + 600 + 500 > 1000
    assert waiting_for(other)
    assert other.places[-1].reason == "memory"
    assert not other.started.is_set()
    big.end()
    assert other.started.wait(TIMEOUT)
    other.end()


def test_a_waiting_run_is_cancelled_by_its_waiting_callback_and_leaves_the_line():
    gate = Gate(budget=10_000 * MB, resident=lambda: 0)
    first = Held(gate, Cost(LONG, MB))
    assert first.started.wait(TIMEOUT)

    class Left(Exception):
        pass

    def leave(place):
        raise Left

    with pytest.raises(Left), gate.admitted(Cost(LONG, MB), leave):
        pytest.fail("a cancelled run ran")
    behind = Held(gate, Cost(LONG, MB))  # the cancelled one is not ahead of it
    assert waiting_for(behind) and behind.places[-1].ahead == 0
    first.end()
    assert behind.started.wait(TIMEOUT)
    behind.end()


def test_an_error_inside_a_run_frees_its_slot_and_memory():
    gate = Gate(budget=1000 * MB, resident=lambda: 0)
    with pytest.raises(ValueError), gate.admitted(Cost(LONG, 900 * MB)):
        raise ValueError("the model failed")
    with gate.admitted(Cost(LONG, 900 * MB)):
        assert gate.running() == 1


def test_the_process_grown_past_the_idle_sample_counts():
    resident = [100 * MB]
    gate = Gate(budget=1000 * MB, resident=lambda: resident[0])
    assert gate.room() == 900 * MB
    resident[0] = 700 * MB  # a model loaded meanwhile
    assert gate.room() == 300 * MB
    with pytest.raises(Refused), gate.admitted(Cost(SHORT, 400 * MB)):
        pass


def test_sizes_read_as_a_page_says_them():
    assert [admission.gigabytes(n) for n in (1, 310 * MB, 8_240 * MB)] == ["1 MB", "310 MB", "8.2 GB"]
    assert admission.default_budget() > 0


def test_those_waiting_are_told_the_running_run_s_own_pace():
    """A run estimated at 30 s that has done a tenth of its work in 20 s has about 180 s left, whatever its
    estimate said: the waiting line follows what the machine actually gives it."""
    now = [0.0]
    gate = Gate(budget=10_000 * MB, resident=lambda: 0, clock=lambda: now[0])

    def twenty_seconds_for_a_tenth() -> None:
        now[0] = 20.0
        gate.progress(0.1)

    running = Held(gate, Cost(LONG, MB), twenty_seconds_for_a_tenth)
    assert running.started.wait(TIMEOUT)
    behind = Held(gate, Cost(LONG, MB))
    assert waiting_for(behind)
    assert behind.places[-1].seconds == pytest.approx(180.0)
    running.end()
    assert behind.started.wait(TIMEOUT)
    behind.end()
