"""Who runs now: every computation on a text is admitted before it starts, by its estimate in seconds and bytes
(explorer.run.cost), so that one visitor's long text can neither stall a class nor take the server's memory.

- A memory budget: a run that would take the process past it first has the caches give way (their least recently
  used entries, across every cache, and loaded models no session holds, dropped until it fits); then it waits until
  enough runs end, or, when it could not fit even alone with every cache empty, is refused at once with the room there
  is (`Refused`), and nothing already running is touched.
- Lanes: runs estimated under SHORT_SECONDS (a sentence, a layer of a short text) have a slot long ones cannot take;
  long runs queue in order for the shared one, and each is told its place and about how long until it starts. A
  long run waiting for memory keeps its place: new short runs keep to their own slot and leave it the memory it
  needs, so steady short traffic cannot starve it. A model's load and a training run have a lane each ("load",
  "train": one at a time per server), and so do small read-outs on a kept run ("readout": one row recomputed, a
  head's walkthrough; two at a time), which neither wait behind a long run nor hold memory back for themselves.
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from attention_explorer.explorer.run import caps
from attention_explorer.explorer.run.pace import observe

SHORT_SECONDS = 1.0  # "about a second": a sentence on MiniLM (0.04 s at 128 tokens), SmolLM2 at 256 tokens (~0.4 s)
POLL_SECONDS = 0.5  # how often a waiting run is told its place (and may be cancelled)


@dataclass(frozen=True)
class Cost:
    """A computation's estimate: its time alone on the machine and the memory it adds at its peak; `lane`: a lane of
    its own ("load": a model's load, "train": a training run), else the short or the shared lane by its time."""

    seconds: float
    bytes: int
    lane: str = ""

    observed: bool = True  # whether its time says the process's pace (pace.observe): False where `seconds` is a
    # whole run's and the block only a part of it (a corpus's batch, a measurement's chunk)

    @property
    def short(self) -> bool:
        return not self.lane and self.seconds < SHORT_SECONDS

    @property
    def lanes(self) -> tuple[str, ...]:
        """The slots it may take, in the order it tries them."""
        return (self.lane,) if self.lane else ("short", "any") if self.short else ("any",)


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


class Giver(Protocol):
    """A cache that gives memory back when a run needs it (memo.BoundedCache, memo.Shelf): what it could give, when
    its least recently used entry was last used (memo's one order of use across caches; None: nothing to give), and
    dropping that entry (the bytes it held)."""

    def reclaimable(self) -> int: ...

    def oldest(self) -> int | None: ...

    def drop_oldest(self) -> int: ...


class Gate:
    """One server process's admission: `with gate.admitted(cost, waiting):` around each computation. `caches()`: the
    caches that give way under memory pressure (least recently used entry first, across them all)."""

    def __init__(
        self,
        budget: int,
        resident: Callable[[], int] | None = None,
        short_slots: int = 1,
        any_slots: int = 1,
        clock: Callable[[], float] = time.monotonic,
        caches: Callable[[], Sequence[Giver]] = tuple,
        load_slots: int = 1,
        train_slots: int = 1,
        readout_slots: int = 2,
    ) -> None:
        self.budget, self.resident, self.clock, self.caches = budget, resident or resident_bytes, clock, caches
        self.slots = {"short": short_slots, "any": any_slots, "load": load_slots, "train": train_slots}
        self.slots["readout"] = readout_slots
        self._changed = threading.Condition()
        self._waiting: list[_Ticket] = []
        self._running: list[_Ticket] = []
        self._numbers = itertools.count()
        self._held_here = threading.local()  # the ticket this thread runs under, if any
        self._idle = self.resident()  # what the process holds with nothing running (sampled whenever nothing runs)
        self.dropped = 0  # cache entries dropped to make room, since the start (the fault suite reads it)

    # -- what the process holds, and the room a run has
    def _held(self) -> int:
        """Bytes held apart from the runs admitted: the idle sample, or more where the process has grown since
        (a model loaded, a cache filled) beyond what the runs themselves were estimated to add."""
        reserved = sum(t.cost.bytes for t in self._running)
        if not self._running:
            self._idle = self.resident()
        return max(self._idle, self.resident() - reserved)

    def _floor(self) -> int:
        """What the process would hold with every cache empty: a run that cannot fit beside this is refused."""
        held = self._held() if not self._running else self._idle
        return max(0, held - sum(cache.reclaimable() for cache in self.caches()))

    def room(self) -> int:
        """The most a run may add now with nothing else running and every cache emptied: the budget less what the
        process would still hold."""
        with self._changed:
            return max(0, self.budget - self._floor())

    def running(self) -> int:
        with self._changed:
            return len(self._running)

    def books(self) -> tuple[int, int, int]:
        """(runs admitted, runs waiting, bytes reserved for the admitted): (0, 0, 0) once every run has ended."""
        with self._changed:
            return len(self._running), len(self._waiting), sum(t.cost.bytes for t in self._running)

    # -- admission
    def _reserving(self) -> _Ticket | None:
        """The first long run in line that waits for memory or for a slot short runs hold (not for a long run ahead
        of it): new short runs keep to the short lane's own slot and leave it the memory it needs."""
        for ticket in self._waiting:
            if ticket.cost.short or ticket.cost.lane == "readout":  # a read-out is small: it reserves nothing
                continue
            lane = ticket.cost.lanes[0]
            held = sum(t.slot == lane and not t.cost.short for t in self._running)
            return ticket if held < self.slots[lane] else None
        return None

    def _slot_for(self, ticket: _Ticket) -> str | None:
        """The slot this ticket may take now, or None: a short run takes the short lane's, else the shared one (not
        while a long run reserves it); a long run only the shared one; a load or a training run its own lane's."""
        used = {name: sum(t.slot == name for t in self._running) for name in self.slots}
        lanes = ticket.cost.lanes
        if ticket.cost.short and self._reserving() is not None:
            lanes = ("short",)
        return next((name for name in lanes if used[name] < self.slots[name]), None)

    def _first_in_line(self, ticket: _Ticket) -> bool:
        same = [t for t in self._waiting if t.cost.lanes == ticket.cost.lanes]
        return same[0] is ticket

    def _reserved_for(self, ticket: _Ticket) -> int:
        """The bytes a short run must leave to the long run that reserves them (0 for any other)."""
        long = self._reserving() if ticket.cost.short else None
        return long.cost.bytes if long is not None else 0

    def _fits(self, ticket: _Ticket) -> bool:
        reserved = sum(t.cost.bytes for t in self._running) + self._reserved_for(ticket)
        return self._held() + reserved + ticket.cost.bytes <= self.budget

    def _make_room(self, ticket: _Ticket) -> bool:
        """Drop the least recently used cache entries, across every cache, until the ticket fits; whether it does."""
        while not self._fits(ticket):
            found = [(stamp, cache) for cache in self.caches() if (stamp := cache.oldest()) is not None]
            if not found:
                return False
            _, cache = min(found, key=lambda pair: pair[0])
            freed = cache.drop_oldest()
            if not freed:
                return False  # it held nothing after all: the process is no smaller
            self._idle = max(0, self._idle - freed)  # the idle sample held it too
            self.dropped += 1
        return True

    def _starts_at(self, ticket: _Ticket, now: float) -> float:
        """When memory lets it start, from now, as the runs under way end at their own pace (and, for a short run
        behind a long one that reserves the memory, once that run has started and the two fit)."""
        runs = [(t.left(now), t.cost.bytes) for t in self._running]
        floor = 0.0
        long = self._reserving() if ticket.cost.short else None
        if long is not None:
            floor = self._starts_at(long, now)
            runs.append((floor + long.cost.seconds, long.cost.bytes))
        held = self._held()
        ends = sorted({floor, *(end for end, _ in runs if end > floor)})
        for at in ends:
            if held + sum(b for end, b in runs if end > at) + ticket.cost.bytes <= self.budget:
                return at
        return ends[-1]  # past every run's end: what the caches give back makes the rest

    def _place(self, ticket: _Ticket) -> Place:
        now = self.clock()
        same = [t for t in self._waiting if t.cost.lanes == ticket.cost.lanes]
        ahead = same[: same.index(ticket)]
        slot = self._slot_for(ticket)
        lanes = ticket.cost.lanes if slot is None else ()
        holding = [t.left(now) for t in self._running if t.slot in lanes]
        slot_in = min(holding) if holding else 0.0
        seconds = max(slot_in, self._starts_at(ticket, now)) + sum(t.cost.seconds for t in ahead)
        reason = "turn" if slot is None or ahead else "memory"
        return Place(len(ahead), len(self._running), seconds, reason)

    @contextlib.contextmanager
    def admitted(self, cost: Cost, waiting: Callable[[Place], None] | None = None) -> Iterator[None]:
        """Run the block once `cost` fits: at once, after those before it in its lane, or when enough memory is free
        (the caches' least recently used entries dropped first). Raises Refused (at once, or while waiting should the
        process grow) when it cannot fit even alone with every cache empty; whatever `waiting` raises cancels it.
        Inside an admitted block, in the same thread, it admits at once: the outer run's estimate covers what it calls
        (a run never waits for the slot it holds itself)."""
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
        try:
            yield
            if cost.observed:  # its estimate against what happened: the paces later estimates are multiplied by
                observe(cost.seconds, self.clock() - ticket.started)
        finally:
            self._held_here.ticket = None
            with self._changed:
                self._running.remove(ticket)
                self._changed.notify_all()

    def _refuse_if_too_big(self, cost: Cost) -> None:
        held = self._held() if not self._running else self._idle
        if cost.bytes <= self.budget - held:
            return  # it fits as things are: no cache is asked
        room = self.budget - self._floor()
        if cost.bytes > room:
            raise Refused(cost.bytes, max(0, room), self.budget)

    def progress(self, done: float) -> None:
        """The run admitted in this thread has done this share of its work (0..1): what those waiting are told."""
        ticket = getattr(self._held_here, "ticket", None)
        if ticket is not None:
            ticket.done = min(1.0, max(0.0, done))

    def _startable(self, ticket: _Ticket) -> str | None:
        slot = self._slot_for(ticket)
        if slot is None or not self._first_in_line(ticket):
            return None
        return slot if self._fits(ticket) or self._make_room(ticket) else None

    def _wait_for_turn(self, ticket: _Ticket, waiting: Callable[[Place], None] | None) -> None:
        while True:
            with self._changed:
                if (slot := self._startable(ticket)) is not None:
                    self._waiting.remove(ticket)
                    ticket.slot, ticket.started = slot, self.clock()
                    self._running.append(ticket)
                    self._changed.notify_all()  # a short run behind a reserving long one may start now
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
