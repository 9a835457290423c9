"""What a visitor sees of admission (explorer.run.admission): a long computation asks first, with its estimate in time
and memory; a run that waits says its place in line and about how long; one that cannot fit says why in one line and
what would. Each waiting run checks that its visitor is still there (a closed tab, another run started) and is
cancelled otherwise, so that the line holds only runs someone will see.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from attention_explorer.explorer.app import gpu
from attention_explorer.explorer.run import admission, caps, cost, device_books

# `serve --memory-budget` or EXPLORER_MEMORY_BUDGET (explorer.run.caps), else a share of the machine's memory
BUDGET_NOTE = "serve --memory-budget"


def budget() -> int:
    """The bytes this server may use: serve --memory-budget, else a share of the machine's memory."""
    return caps.current().memory_budget or admission.default_budget()


def _caches() -> tuple[admission.Giver, ...]:
    """Every cache that gives way when a run needs memory (explorer/app/cached.py lists them), fetched at each ask:
    a cache cleared and made again is the one asked. Imported here, not above: they are admitted by this gate."""
    from attention_explorer.explorer.app import cached, compare_runs, corpus_runs, shelf, store
    from attention_explorer.explorer.run import layers

    caches = (store.shared(), layers.cache(), cached.walkthroughs(), compare_runs.second())
    return (*caches, corpus_runs.prepared_corpora(), shelf.shelf())


@st.cache_resource(show_spinner=False)
def gate() -> admission.Gate:
    """The server process's one gate, shared by every session; the caches give way to what it admits."""
    return admission.Gate(budget(), caches=_caches)


def visitor_here() -> bool:
    """Whether this script run's session is still connected (False once its tab is closed)."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():
        return True  # a bare script (a bench, a test without a server): nobody to lose
    return Runtime.instance().is_active_session(ctx.session_id)


def check_visitor() -> None:
    """Stop this run when its visitor has gone: what it computes would be seen by nobody."""
    if not visitor_here():
        st.stop()


def place_line(place: admission.Place, seconds: float, needed: int) -> str:
    """The one line a waiting run shows: what it waits for, about when it starts, and what it then takes."""
    if place.reason == "memory":
        why = "for memory: the runs under way hold what this server may use"
    elif place.ahead:
        why = f"in line, behind {place.ahead} long run{'s' if place.ahead > 1 else ''}"
    else:
        why = "for its turn: another long run is under way"
    start = f" It starts in {cost.about(place.seconds)} (an estimate)," if place.seconds >= 1 else " It starts soon,"
    return (
        f"Your run waits {why}.{start} then takes {cost.about(seconds)} and about {admission.gigabytes(needed)}. "
        "Short sentences go on meanwhile; leaving the page or changing the text cancels it."
    )


def refusal_line(refused: admission.Refused, fits: Callable[[int], int] | None, what: str = "This run") -> str:
    """Why a run cannot start, in one line, and what would fit."""
    most = fits(refused.room) if fits is not None else 0
    advice = f" At most {most:,} tokens fit now: lower Max tokens in the sidebar." if most else ""
    return (
        f"{what} needs about {admission.gigabytes(refused.needed)} of memory, and this server lets one run have "
        f"{admission.gigabytes(refused.room)} now (its memory budget, {admission.gigabytes(refused.budget)}, less "
        f"what it already holds; set with {BUDGET_NOTE}).{advice}"
    )


@contextlib.contextmanager
def queued(needs: admission.Cost, device_bytes: int | None = None) -> Iterator[None]:
    """Run the block once the gate admits `needs`, saying meanwhile where it stands; admission.Refused goes to the
    caller (a model's load: the model cannot be opened, as one whose files are broken). On a GPU its books admit
    `device_bytes` (what the work adds there), else `needs.bytes`."""
    place = st.empty()

    def waiting(where: admission.Place) -> None:
        check_visitor()
        place.info(place_line(where, needs.seconds, needs.bytes), icon=":material/hourglass_top:")

    on_gpu = needs.bytes if device_bytes is None else device_bytes
    try:
        with gate().admitted(needs, waiting), gpu.admitted(on_gpu, check_visitor):  # GPU: explorer/app/gpu.py
            place.empty()
            yield
    finally:
        place.empty()


@contextlib.contextmanager
def admitted(needs: admission.Cost, fits: Callable[[int], int] | None = None, what: str = "This run") -> Iterator[None]:
    """Run the block once the gate admits `needs`, saying meanwhile where it stands; refused: the reason, and the
    page stops there (`fits(room)`: the most tokens that would fit in `room` bytes, for the advice)."""
    try:
        with queued(needs):
            yield
    except device_books.DeviceRefused as refused:
        st.error(gpu.refusal_line(refused, fits, what), icon=":material/memory:")
        st.stop()
    except admission.Refused as refused:
        st.error(refusal_line(refused, fits, what), icon=":material/memory:")
        st.stop()


READOUT_LANE = "readout"


def readout_cost(config, keys: int, also: admission.Cost | None = None) -> admission.Cost:
    """A small read-out on a kept run (one row of a layer recomputed, a head's walkthrough): one query against `keys`
    keys, its projections, scores and feed-forward, in the read-out lane; `also`: a layer it must first run again
    (a long text keeps none), whose estimate it then carries in the ordinary lanes (it is no longer small)."""
    seconds = cost.layer_seconds(config, 1, keys)
    nbytes = cost.FLOAT * (3 * config.n_heads * keys + 8 * max(config.d_model, config.d_ff))
    if also is not None and also.seconds:
        return admission.Cost(seconds + also.seconds, nbytes + also.bytes)
    return admission.Cost(seconds, nbytes, READOUT_LANE)


@contextlib.contextmanager
def readout(loaded, result, stack: str, layer: int | None, what: str) -> Iterator[None]:
    """Admit a read-out of one row of `result`'s `stack` (its embedding where `layer` is None, else that layer's
    sub-layers) in the read-out lane; where the row needs a layer the run no longer keeps, that layer's recompute is
    in the estimate (it runs inside this admission)."""
    config = loaded.model.config
    kinds = [k for k in result.kinds if (k == "encoder_self") == (stack == "encoder")]
    shapes = {k: result.attention(k).mask.shape for k in kinds}  # (queries, keys)
    keys = max((keys for _, keys in shapes.values()), default=1)
    also = None
    missing = [k for k in kinds if layer is not None and not result.attention(k).ready(layer)]
    if missing:
        seconds = sum(cost.layer_seconds(config, *shapes[k], cross=k == "cross") for k in missing)
        also = admission.Cost(seconds, cost.layer_bytes(config, keys))
    with admitted(readout_cost(config, keys if layer is not None else 1, also), what=what):
        yield


def ask_first(
    what: str, seconds: float, label: str, key: str, container=None, needed: int = 0, always: bool = False
) -> bool:
    """Whether the work may run in this rerun: at once when estimated under cost.ASK_AFTER_SECONDS (unless `always`),
    or when its button was just pressed; otherwise `what` it is and its estimate (time, and memory where `needed` is
    given) are said, beside the button (keyed `key`)."""
    if not (always or cost.asks_first(seconds)) or get_script_run_ctx() is None:  # a bare script: nobody to ask
        return True
    place = container if container is not None else st.container()
    memory = f" and about {admission.gigabytes(needed)} of the server's memory" if needed else ""
    place.info(
        f"{what} At this length that takes {cost.about(seconds)}{memory} (an estimate from the number of tokens and "
        "the model's size; a busy server takes longer), so it starts only when you ask.",
        icon=":material/hourglass_top:",
    )
    return place.button(label, key=key, icon=":material/play_arrow:")


def at_once(*seconds: float) -> float:
    """What runs as soon as the page goes on, of these estimates in the order the page runs them: each up to the first
    that asks first (it says its own estimate beside its button, and the page stops there until it is pressed)."""
    found = 0.0
    for part in seconds:
        if cost.asks_first(part):
            break
        found = part + found
    return found


def reveal_label(seconds: float, label: str = "Reveal the model's answer") -> str:
    """A reveal button that runs work: its estimate in the label ('Reveal the model's answer (about 6 s)'), said
    before the class presses it; nothing added under a second."""
    return f"{label} ({cost.about(seconds)})" if seconds >= 1 else label
