"""Who runs now: every computation on a text is admitted before it starts, by its estimate in seconds and bytes
(explorer.run.cost), so that one visitor's long text can neither stall a class nor take the server's memory.

- A memory budget: a run that would take the process past it waits until enough runs end, or, when it could not fit
  even alone, is refused at once with the room there is (`Refused`), and nothing already running is touched.
- Two lanes: runs estimated under SHORT_SECONDS (a sentence, a layer of a short text) have a slot long ones cannot
  take; long runs queue in order for theirs, and each is told its place and about how long until it starts.
- A waiting run calls `waiting(place)` every POLL_SECONDS: that is where the app cancels it (the visitor left, or
  started another run) by raising, and the run leaves the line.

No streamlit here: explorer/app/waiting.py holds the one Gate of the server process and draws what waits.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from attention_explorer.explorer.run import caps
from attention_explorer.explorer.run.cost import observe
from attention_explorer.explorer.run.cost import pace as pace_now

SHORT_SECONDS = 1.0  # "about a second": a sentence on MiniLM (0.04 s at 128 tokens), SmolLM2 at 256 tokens (~0.4 s)
POLL_SECONDS = 0.5  # how often a waiting run is told its place (and may be cancelled)


@dataclass(frozen=True)
class Cost:
    """A computation's estimate: its time alone on the machine and the memory it adds at its peak."""

    seconds: float
    bytes: int

    observed: bool = True  # whether its time says the process's pace (cost.observe): False where `seconds` is a
    # whole run's and the block only a part of it (a corpus's batch, a measurement's chunk)

    @property
    def short(self) -> bool:
        return self.seconds < SHORT_SECONDS


class Refused(RuntimeError):
    """A run that could not fit in the budget even with nothing else running: `needed` bytes, `room` the most a run
    may have now (the budget less what the process holds)."""

    def __init__(self, needed: int, room: int, budget: int) -> None:
        super().__init__(f"needs about {gigabytes(needed)}; this server lets a run have {gigabytes(room)} now")
        self.needed, self.room, self.budget = needed, room, budget


@dataclass(frozen=True)
class Place:
    """What a waiting run is told: the runs before it in its line, those running, about how long until it may
    start, and what it waits for ("memory" or "turn")."""

    ahead: int
    running: int
    seconds: float
    reason: str


@dataclass
class _Ticket:
    cost: Cost
    number: int
    started: float = 0.0
    slot: str = ""  # "short" (the short lane's own) or "any", once started
    done: float = 0.0  # the share of its work done, as the run reports it (Gate.progress)

    def left(self, now: float) -> float:
        """About how long it still runs: from its own pace once it has reported progress (a busy machine is slower
        than the estimate), else the estimate less the time it has run."""
        ran = now - self.started
        if self.done > 0:
            return ran * (1 - self.done) / self.done
        return max(0.0, self.cost.seconds - ran)


def gigabytes(n: int) -> str:
    """'8.2 GB', '310 MB': bytes as a page says them (decimal units, as system monitors show memory)."""
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{max(1, round(n / 1e6)):,} MB"


def resident_bytes() -> int:
    """This process's resident memory now (Linux /proc; elsewhere 0, and the budget counts only the runs)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# A process that runs one long text beside a class's short ones: 60% of a 24 GB machine (14.4 GB) holds SmolLM2's
# 8,192-token first run (about 7 GB at its peak) once, beside the app's models and caches, and leaves the rest to the
# system and the browsers on the same machine; on a 16 GB laptop (9.6 GB) that run still fits, alone.
DEFAULT_SHARE = 0.6


def default_budget() -> int:
    return int(DEFAULT_SHARE * caps.total_memory()) or 8 * 2**30


class Gate:
    """One server process's admission: `with gate.admitted(cost, waiting):` around each computation."""

    def __init__(
        self,
        budget: int,
        resident: Callable[[], int] | None = None,
        short_slots: int = 1,
        any_slots: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budget, self.resident, self.clock = budget, resident or resident_bytes, clock
        self.slots = {"short": short_slots, "any": any_slots}
        self._changed = threading.Condition()
        self._waiting: list[_Ticket] = []
        self._running: list[_Ticket] = []
        self._numbers = itertools.count()
        self._held_here = threading.local()  # the ticket this thread runs under, if any
        self._idle = self.resident()  # what the process holds with nothing running (sampled whenever nothing runs)

    # -- what the process holds, and the room a run has
    def _held(self) -> int:
        """Bytes held apart from the runs admitted: the idle sample, or more where the process has grown since
        (a model loaded, a cache filled) beyond what the runs themselves were estimated to add."""
        reserved = sum(t.cost.bytes for t in self._running)
        if not self._running:
            self._idle = self.resident()
        return max(self._idle, self.resident() - reserved)

    def room(self) -> int:
        """The most a run may add now with nothing else running: the budget less what the process holds."""
        with self._changed:
            return max(0, self.budget - self._held())

    def running(self) -> int:
        with self._changed:
            return len(self._running)

    # -- admission
    def _slot_for(self, ticket: _Ticket) -> str | None:
        """The slot this ticket may take now, or None: a short run takes the short lane's, else the shared one; a
        long run only the shared one."""
        used = {name: sum(t.slot == name for t in self._running) for name in self.slots}
        lanes = ("short", "any") if ticket.cost.short else ("any",)
        return next((name for name in lanes if used[name] < self.slots[name]), None)

    def _first_in_line(self, ticket: _Ticket) -> bool:
        same = [t for t in self._waiting if t.cost.short == ticket.cost.short]
        return same[0] is ticket

    def _fits(self, ticket: _Ticket) -> bool:
        reserved = sum(t.cost.bytes for t in self._running)
        return self._held() + reserved + ticket.cost.bytes <= self.budget

    def _place(self, ticket: _Ticket) -> Place:
        now = self.clock()
        same = [t for t in self._waiting if t.cost.short == ticket.cost.short]
        ahead = same[: same.index(ticket)]
        left = [t.left(now) for t in self._running if not t.cost.short]
        seconds = (min(left) if left else 0.0) + sum(t.cost.seconds for t in ahead)
        reason = "turn" if self._slot_for(ticket) is None or ahead else "memory"
        return Place(len(ahead), len(self._running), seconds, reason)

    @contextlib.contextmanager
    def admitted(self, cost: Cost, waiting: Callable[[Place], None] | None = None) -> Iterator[None]:
        """Run the block once `cost` fits: at once, after those before it in its lane, or when enough memory is free.
        Raises Refused (at once, or while waiting should the process grow) when it cannot fit even alone; whatever
        `waiting` raises cancels it. Inside an admitted block, in the same thread, it admits at once: the outer run's
        estimate covers what it calls (a run never waits for the slot it holds itself)."""
        if getattr(self._held_here, "ticket", None) is not None:
            yield  # already admitted in this thread (a layer recomputed inside a run): the outer estimate covers it
            return
        ticket = _Ticket(cost, next(self._numbers))
        with self._changed:
            self._refuse_if_too_big(cost)
            self._waiting.append(ticket)
        try:
            self._wait_for_turn(ticket, waiting)
        except BaseException:
            with self._changed:
                self._waiting.remove(ticket)
                self._changed.notify_all()
            raise
        self._held_here.ticket = ticket
        at_pace = pace_now()
        try:
            yield
            if cost.observed:  # its estimate against what happened: the pace later estimates are multiplied by
                observe(cost.seconds, self.clock() - ticket.started, at_pace)
        finally:
            self._held_here.ticket = None
            with self._changed:
                self._running.remove(ticket)
                self._changed.notify_all()

    def _refuse_if_too_big(self, cost: Cost) -> None:
        room = self.budget - self._held() if not self._running else self.budget - self._idle
        if cost.bytes > room:
            raise Refused(cost.bytes, max(0, room), self.budget)

    def progress(self, done: float) -> None:
        """The run admitted in this thread has done this share of its work (0..1): what those waiting are told."""
        ticket = getattr(self._held_here, "ticket", None)
        if ticket is not None:
            ticket.done = min(1.0, max(0.0, done))

    def _startable(self, ticket: _Ticket) -> str | None:
        slot = self._slot_for(ticket)
        return slot if slot is not None and self._first_in_line(ticket) and self._fits(ticket) else None

    def _wait_for_turn(self, ticket: _Ticket, waiting: Callable[[Place], None] | None) -> None:
        while True:
            with self._changed:
                if (slot := self._startable(ticket)) is not None:
                    self._waiting.remove(ticket)
                    ticket.slot, ticket.started = slot, self.clock()
                    self._running.append(ticket)
                    return
                if not self._running:  # nothing left to wait for: it does not fit alone (the process grew)
                    self._refuse_if_too_big(ticket.cost)
                place = self._place(ticket)
                if waiting is None:
                    self._changed.wait(POLL_SECONDS)
                    continue
            waiting(place)  # outside the lock: it may draw, or raise to cancel
            with self._changed:  # a change while it drew is seen here, not missed
                if self._startable(ticket) is None:
                    self._changed.wait(POLL_SECONDS)
