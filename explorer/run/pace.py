"""This process's pace: how much longer than explorer/run/cost.py's fitted rates its runs take here and now, in two
parts, because a busy machine may slow two kinds of work unalike:
- the latency pace multiplies a run's fixed terms (its layers' operations dispatched): on 2 cores shared with other
  work an operation torch spreads over its threads may wait for a core whatever its size;
- the throughput pace multiplies its work (weights read, multiply-adds, attention weights), which a busy machine
  slows by its share of the cores.

A fresh process starts both at one calibration (`calibrate`: a product and a softmax large enough to be bound by their
work); then every admitted run that ends says what it took against its two parts (`observe`, from admission.Gate),
and the two paces are fitted to the last RUNS of them (`fit`), each kept KEPT_FOR seconds (a calibration as well, made
again once older with no run since). An estimate is a `Seconds`: a float, its two parts at
the fitted rates kept beside it so that the run it admits can be observed.

Why no latency calibration of its own: one was tried (small products, (3, 384) x (384, 1,536), each bound by its
dispatch). Under a load of 7-9 on 2 cores each waited 0.5 ms or 32 ms by the moment (the other work's phases last
seconds), and the runs did not follow it: over 24 first runs of MiniLM and SmolLM2 at 3-512 tokens each beside its
calibrations, a fresh estimate from both calibrations missed by a factor of exp(0.45) on average and by more than
1.5x for 11 runs; from the throughput calibration alone, by exp(0.31) and 6 runs.
"""

from __future__ import annotations

import gc
import math
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass

# The calibration's work, and its time at pace 1: `python -m bench estimates fit`'s fit_unit, at cost.py's rates, to
# first runs of MiniLM and SmolLM2 at 3-512 tokens each beside a calibration (48 runs in two sets under a load of 6-9 on
# 2 cores: 0.0175 s and 0.0152 s)
THROUGHPUT_ROUNDS = 4  # a (256, 1,024) x (1,024, 1,024) product and a softmax over (8, 256, 256) weights, each round
THROUGHPUT_SECONDS = 0.016  # their time at pace 1
REPEATS = 5  # each calibration the median of five: one pause does not set a process's first estimates
# calibrations run first and not counted: a server idle while a class answers read 0.9-3.9x (medians 1.7 and 1.9) on
# its next page, whose runs then went at 1.1x (a reveal said about 8 s; the bench times that click at 2.0-2.5 s)
WARM = 3
RUNS = 9  # the observations the paces are fitted to
# a block shorter than this at the fitted rates says more of the work around it than of either pace: a page's first
# run of MiniLM over 64 tokens (0.047 s) took 0.06-0.16 s in the page (its admission, bar, Streamlit's messages), and
# that one run, observed, set the pace a 2.6 s reveal was said at (about 6 s for 3.1 s; issue 50)
OBSERVED_AFTER = 0.1
LIMITS = (0.1, 200.0)  # no observation moves a pace beyond these
# Python's own work on one core (a GGUF file's fields and names read by transformers): its own calibration, since a
# busy machine slows it less than the threaded products above (one thread keeps a core where two wait for both)
PYTHON_ROUNDS = 20_000  # names built, looked up and sorted, each calibration
PYTHON_SECONDS = 0.0042  # their time at pace 1 (median of 15, a quiet 2-core machine, load 0.3, 2026-11-29)
PYTHON_FOR = 300.0  # seconds a Python calibration is kept before the next estimate makes another
# calibrations run and not counted first: after a moment idle a core ran them 1.1-2.5x slower (40 calibrations, each
# after 50 ms asleep: medians of 5 from 1.13 to 2.51, 1.6 typical; after 10 discarded, 1.01 to 1.33), where a load's
# seconds of work run on a busy core (the SmolLM2 GGUF's said about 30 s for 12.7 s from one cold calibration)
PYTHON_WARM = 10
# seconds a calibration or an observed run says this process's pace: a server's load comes and goes, and one
# calibrated while pip installed beside it said 2.4x for the rest of its life ("about 7 s" for a 2.9 s reveal, with no
# run long enough to observe since); older runs are dropped, and with none left the next estimate calibrates again
KEPT_FOR = 120.0
PRIOR = 0.3  # the weight that holds the two paces near their level where the runs seen do not tell them apart (only
# long runs seen), beside each observation's weight of 1


@dataclass(frozen=True)
class Pace:
    """The two multipliers of the fitted rates (1, 1: as fitted)."""

    latency: float
    throughput: float

    def seconds(self, fixed: float, work: float) -> float:
        return fixed * self.latency + work * self.throughput


class Seconds(float):
    """An estimate in seconds, with its two parts at the fitted rates (`fixed`, `work`) kept beside it: sums and
    multiples of estimates stay estimates; anything else (max, round) makes a plain float."""

    fixed: float
    work: float

    def __new__(cls, fixed: float, work: float, pace: Pace | None = None) -> Seconds:
        made = super().__new__(cls, (pace or now()).seconds(fixed, work))
        made.fixed, made.work = fixed, work
        return made

    def __add__(self, other):
        if isinstance(other, Seconds):
            return _restored(float(self) + float(other), self.fixed + other.fixed, self.work + other.work)
        if isinstance(other, int | float) and other == 0:  # sum() starts from 0
            return self
        return float(self) + other

    __radd__ = __add__

    def __mul__(self, times):
        if isinstance(times, int | float) and not isinstance(times, Seconds):
            return _restored(float(self) * times, self.fixed * times, self.work * times)
        return float(self) * times

    __rmul__ = __mul__

    def __truediv__(self, by):
        if isinstance(by, int | float) and not isinstance(by, Seconds):
            return _restored(float(self) / by, self.fixed / by, self.work / by)
        return float(self) / by

    def __reduce__(self):  # pickled (a cache's copy) as its value and parts, not re-estimated at another pace
        return _restored, (float(self), self.fixed, self.work)

    @property
    def fitted(self) -> float:
        """The work's size: this estimate at the fitted rates (pace 1, 1), whatever the machine's pace."""
        return self.fixed + self.work


def _restored(value: float, fixed: float, work: float) -> Seconds:
    made = float.__new__(Seconds, value)
    made.fixed, made.work = fixed, work
    return made


_observed: deque[tuple[float, float, float, float]] = deque(maxlen=RUNS)  # (fixed, work, took, when observed)
_calibrated: list[tuple[Pace, float]] = []  # (the calibration, when made; inf: given by forget, kept)
_fitted: list[Pace] = []  # the fit to _observed, once made
_python: list[tuple[float, float]] = []  # (pace, when measured)
_lock = threading.Lock()


def throughput_seconds() -> float:
    """One calibration: THROUGHPUT_ROUNDS of a product and a softmax, each bound by its work."""
    import torch

    generator = torch.Generator().manual_seed(0)
    weight, long = torch.randn(1024, 1024, generator=generator), torch.randn(256, 1024, generator=generator)
    scores = torch.randn(8, 256, 256, generator=generator)
    with torch.inference_mode():
        torch.nn.functional.linear(long, weight), scores.softmax(-1)
        start = time.perf_counter()
        for _ in range(THROUGHPUT_ROUNDS):
            torch.nn.functional.linear(long, weight)
            scores.softmax(-1)
        return time.perf_counter() - start


def python_seconds() -> float:
    """One calibration of Python's work on one core: PYTHON_ROUNDS names built into a dict, looked up and sorted."""
    start = time.perf_counter()
    names = {f"blk.{i}.attn_q.weight": i for i in range(PYTHON_ROUNDS)}
    sum(len(name) for name in sorted(names, key=names.__getitem__))
    return time.perf_counter() - start


def python_pace() -> float:
    """How much longer than at pace 1 Python's own one-core work takes here now: the median of REPEATS calibrations
    after PYTHON_WARM uncounted, kept PYTHON_FOR seconds (a page that says a load's estimate twice says the same)."""
    with _lock:
        if _python and time.monotonic() - _python[0][1] < PYTHON_FOR:
            return _python[0][0]
    collecting = gc.isenabled()
    gc.disable()  # the collector's pass over what a process holds then (after a few reveals: 1.7x) is not the load's
    try:
        found = _measured(python_seconds, PYTHON_WARM, PYTHON_SECONDS)
    finally:
        if collecting:
            gc.enable()
    with _lock:
        _python[:] = [(found, time.monotonic())]
    return found


def _measured(timed, warm: int, unit: float) -> float:
    """A calibration's pace: `timed()` run `warm` times uncounted, then the median of REPEATS over its time at pace 1
    (`unit`), within LIMITS."""
    for _ in range(warm):
        timed()
    return _bounded(statistics.median(timed() for _ in range(REPEATS)) / unit)


def calibrate() -> Pace:
    """This machine's pace now, the median of REPEATS calibrations after WARM uncounted, for both parts (until runs
    say more)."""
    found = _measured(throughput_seconds, WARM, THROUGHPUT_SECONDS)
    found = Pace(found, found)
    with _lock:
        _calibrated[:] = [(found, time.monotonic())]
        _fitted[:] = [fit(_runs(), found)] if _observed else []
    return found


def now() -> Pace:
    """This process's pace: the fit to its last runs, or without any in the last KEPT_FOR seconds, the calibration's
    (made on the first call, and again once older than KEPT_FOR)."""
    with _lock:
        _expire(time.monotonic())
        found = _fitted[0] if _fitted else _calibrated[0][0] if _calibrated else None
    return found if found is not None else calibrate()


def _expire(clock: float) -> None:
    """Drop the runs observed KEPT_FOR seconds ago or more (refitting to the rest), then, with none left, a calibration
    as old (the next estimate makes another). Called holding _lock."""
    if _observed and clock - _observed[0][3] >= KEPT_FOR:
        while _observed and clock - _observed[0][3] >= KEPT_FOR:
            _observed.popleft()
        _fitted[:] = [fit(_runs(), _calibrated[0][0])] if _observed and _calibrated else []
    if _calibrated and not _observed and clock - _calibrated[0][1] >= KEPT_FOR:
        _calibrated.clear()


def _runs() -> list[tuple[float, float, float]]:
    """The observed runs as fit takes them: (fixed, work, took)."""
    return [(fixed, work, took) for fixed, work, took, _ in _observed]


def observe(estimate: float, took: float) -> None:
    """An admitted run estimated at `estimate` took `took` seconds: it joins the last RUNS the paces are fitted to.
    A plain float (a model's load, from its files' sizes) has no parts to say either pace by, and is not observed."""
    if not isinstance(estimate, Seconds) or estimate.fitted < OBSERVED_AFTER or took <= 0:
        return
    prior = now()
    with _lock:
        _observed.append((estimate.fixed, estimate.work, took, time.monotonic()))
        _fitted[:] = [fit(_runs(), _calibrated[0][0] if _calibrated else prior)]


def forget(calibrated: float | Pace | None = None) -> None:
    """Back to a fresh process's pace: no run seen, the calibration to be made again, or taken as `calibrated` (a
    number: for both parts; a test's fresh start at the fitted rates: 1)."""
    if isinstance(calibrated, int | float):
        calibrated = Pace(calibrated, calibrated)
    with _lock:
        _observed.clear()
        _fitted.clear()
        _calibrated[:] = [] if calibrated is None else [(calibrated, math.inf)]
        _python.clear()


def fit(observed: list[tuple[float, float, float]], prior: Pace) -> Pace:
    """The two paces that bring the observed runs' estimates closest to what they took: their level first (the
    median of took / estimated at `prior`: both paces scaled by it), then the split between the two by least squares
    in relative error (each run counts alike, short or long), held near that level with weight PRIOR where the runs
    do not tell the two apart (only long runs seen). Robust to one odd run: once three are seen, each is left out in
    turn and the fit that holds the rest closest (in log ratio) is kept; each pace stays within LIMITS."""
    level = statistics.median(t / prior.seconds(f, w) for f, w, t in observed)
    start = Pace(prior.latency * level, prior.throughput * level)
    kept = [observed] if len(observed) < 3 else [observed[:i] + observed[i + 1 :] for i in range(len(observed))]
    fits = [(_log_error(runs, found := _least_squares(runs, start)), found) for runs in kept]
    found = min(fits, key=lambda pair: pair[0])[1]
    return Pace(_bounded(found.latency), _bounded(found.throughput))


def _log_error(observed: list[tuple[float, float, float]], found: Pace) -> float:
    return sum(math.log(max(found.seconds(f, w), 1e-12) / t) ** 2 for f, w, t in observed)


def _least_squares(observed: list[tuple[float, float, float]], prior: Pace) -> Pace:
    """Minimise sum ((L f + P w) / t - 1)^2 + PRIOR^2 ((L / L0 - 1)^2 + (P / P0 - 1)^2) over L, P >= 0: the normal
    equations of two unknowns, solved in closed form."""
    rows = [(f / t, w / t, 1.0) for f, w, t in observed]
    rows += [(PRIOR / prior.latency, 0.0, PRIOR), (0.0, PRIOR / prior.throughput, PRIOR)]
    aa = sum(a * a for a, _, _ in rows)
    ab = sum(a * b for a, b, _ in rows)
    bb = sum(b * b for _, b, _ in rows)
    ay = sum(a * y for a, _, y in rows)
    by = sum(b * y for _, b, y in rows)
    det = aa * bb - ab * ab  # > 0: the prior rows make the two columns independent
    latency, throughput = (bb * ay - ab * by) / det, (aa * by - ab * ay) / det
    if latency < 0:  # the best nonnegative fit lies on an edge: the other alone
        latency, throughput = 0.0, by / bb
    elif throughput < 0:
        latency, throughput = ay / aa, 0.0
    return Pace(latency, throughput)


def _bounded(value: float) -> float:
    return min(max(value, LIMITS[0]), LIMITS[1])
