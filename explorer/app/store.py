"""The run store, the one public way a page's computation is run and kept: `key` names a value, `shared()` holds it for
every session, `compute` runs it once admitted by the gate (explorer/run/admission.py, drawn by
explorer/app/waiting.py) with a spinner, `progressing` with a progress bar, `in_chunks` a measurement in chunks of
batch rows, and `first_run` a text's first run. explorer/app/cached.py, experiment_runs.py, patching_runs.py and
compare_runs.py are the getters built on it; cached.py's docstring lists every cache there is."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Hashable

import streamlit as st

from attention_explorer.explorer.app import reduced, shelf, state, waiting
from attention_explorer.explorer.run import admission, cost, memo, trace
from attention_explorer.models import registry

# Traces are the big values (a 512-token MiniLM trace holds about 185 MB of arrays): one store for every session,
# bounded in bytes rather than in entries, holding each array read-only.
STORE_BYTES = 192 * 2**20  # one 512-token MiniLM trace (185 MB) fits; growth stays under 300 MB
# Forwards at once, and how much memory they may take: explorer/run/admission.py's gate (explorer/app/waiting.py draws
# what waits). A short run has a slot of its own that long ones cannot take, so a class's sentences go through while
# someone's long text runs. torch keeps its default intra-op threads in every session's thread (a different count
# changes float rounding, and every session must get the numbers a single user gets).


@st.cache_resource(show_spinner=False)
def shared() -> memo.BoundedCache:
    """The store every session shares: at most STORE_BYTES of arrays, least recently used out first."""
    return memo.BoundedCache(STORE_BYTES)


def key(what: str, model_name: str | state.Choice, *inputs: Hashable) -> tuple:
    """The one way a kept value is named: what it is, the model's key and revision (a model retrained here keeps its
    key but not its revision), then the plain inputs it was computed from (a sidebar's choice: its text and max
    tokens, then the rest)."""
    if isinstance(model_name, state.Choice):
        choice = model_name
        return (what, choice.model, shelf.model(choice.model).revision, choice.text, choice.max_tokens, *inputs)
    return (what, model_name, shelf.model(model_name).revision, *inputs)


def text_cost(model_name: str, tokens: int, rows: int = 1, band: bool = False) -> admission.Cost:
    """About what `rows` forwards over `tokens` tokens of this model take, with their logits where it has them;
    `band`: forwards that keep no raw scores, their sliding-window layers on their band (cost.forward_terms)."""
    loaded = shelf.model(model_name)
    config, logits = loaded.model.config, loaded.family.next_token_head
    return admission.Cost(
        cost.forward_seconds(config, tokens, rows, logits, band), cost.forward_bytes(config, tokens, rows, logits, band)
    )


def first_run_cost(choice: state.Choice) -> admission.Cost:
    """A text's first run: its forward, and before it an encoder-decoder's greedy decoding of its output (at most
    trace.target_budget tokens: a toy task's model stops sooner, an untrained one rarely)."""
    loaded = shelf.model(choice.model)
    tokens, config = tokens_of(choice), loaded.model.config
    needs = text_cost(choice.model, tokens, band=not trace.short(loaded, tokens))  # a long text's run: no raw scores
    decoding = cost.greedy_seconds(config, tokens, trace.target_budget(tokens))
    return admission.Cost(needs.seconds + decoding, needs.bytes)


def tokens_of(choice: state.Choice) -> int:
    """How many tokens the model reads of this text (the trace's own count, without running it)."""
    return len(shelf.model(choice.model).tokenizer.encode(choice.text, choice.max_tokens).ids)


def fits(model_name: str, rows: int = 1) -> Callable[[int], int]:
    """The refusal's advice: the most tokens of this model whose run fits in `room` bytes."""
    loaded = shelf.model(model_name)
    # a text past the first run's advice is a long one, whose run keeps no raw scores (band, as first_run_cost)
    return lambda room: cost.most_tokens(loaded.model.config, room, rows, loaded.family.next_token_head, band=True)


def choice_cost(choice: state.Choice, rows: int = 1) -> admission.Cost:
    """A computation about as big as `rows` forwards over the text: what the smaller read-outs are admitted by."""
    return text_cost(choice.model, tokens_of(choice), rows)


def scored_seconds(choice: state.Choice, target: str) -> float:
    """About how long cached.get_scored takes (0 once kept): the text's first run unless kept, then for a model with a
    source a teacher-forced forward on the target (a decoder-only model scores its text from that run)."""
    if shared().peek(key("scored", choice, target)) is not None:
        return 0.0
    found = 0.0 if shared().peek(key("trace", choice)) is not None else first_run_cost(choice).seconds
    if not shelf.model(choice.model).is_decoder_only:
        found = choice_cost(choice).seconds + found
    return found


def stand_in(needs: admission.Cost) -> admission.Cost:
    """An estimate that sizes a read-out by a forward it may not run (the logit lens or an attribution read off a kept
    run, a decoder-only text scored from its trace): it admits the work, but its time says no pace (pace.observe), or
    a few such quick read-outs would pull every later estimate down."""
    return dataclasses.replace(needs, observed=False)


def batch_bytes(model_name: str, tokens: int, rows: int) -> int:
    """An experiment's chunk of `rows` batch rows over `tokens` tokens (cost.batch_bytes)."""
    loaded = shelf.model(model_name)
    return cost.batch_bytes(loaded.model.config, tokens, rows, loaded.family.next_token_head)


def chunk_rows(part: tuple[int, int] | None) -> int:
    """The batch rows of one chunk of a measurement (None: the clean run, one row)."""
    return part[1] - part[0] if part is not None else 1


def compute(message: str, work, needs: admission.Cost, advice=None):
    """Run `work` once admitted by its estimate `needs` (explorer/app/waiting.py), with a spinner while it runs;
    `advice(room)`: the most tokens that fit, should it be refused (fits)."""
    with waiting.admitted(needs, advice), st.spinner(message):
        return work()


def progressing(message: str, work, needs: admission.Cost):
    """compute for work done in steps: `work(step)` calls step(done, total) and a progress bar under the message
    follows it (removed once the work is done)."""
    bar = st.progress(0.0, text=message)

    def step(done: int, total: int) -> None:
        bar.progress(min(1.0, done / max(total, 1)), text=f"{message} {done} of {total}")

    try:
        return compute(message, lambda: work(step), needs)
    finally:
        bar.empty()


def in_chunks(name: tuple, message: str, unit: str, seconds: float, chunk_bytes: Callable[[int], int], measure):
    """A measurement made in chunks of batch rows (ablate.effects, patching.measure): `measure(kept)` calls
    kept(part, rows, work) for each chunk, and each chunk is kept under (*name, *part) as it finishes (the clean run,
    part None, under (*name, None)), so a measurement stopped by a click goes on from there. Each chunk is admitted by
    its memory, `chunk_bytes(its rows)`, in the lane of the whole measurement's `seconds`; a progress bar under
    `message` counts the rows done, in `unit`. The whole result is kept under `name`."""
    bar = st.progress(0.0, text=message)

    def kept(part, rows, work):
        def run():  # a chunk of batch rows at a time, admitted by its memory
            with waiting.admitted(admission.Cost(seconds, chunk_bytes(chunk_rows(part)), observed=False)):
                return work()

        values = shared().get((*name, *(part or (None,))), run)
        if part is not None:
            bar.progress(part[1] / rows, text=f"{message} {part[1]} of {rows} {unit}")
        return values

    try:
        return shared().get(name, lambda: measure(kept))
    finally:
        bar.empty()


def reload(model_name: str):
    """How a kept trace gets its model back to recompute a layer once the shelf let the model go: from the shelf
    (a model trained in this session is held by its traces)."""
    return (lambda: shelf.get_model(model_name)) if model_name in registry.MODELS else None


def _admit_layer(seconds: float, nbytes: int):
    """How a long text's layer is recomputed when a view reads it: admitted like any run, with a spinner."""
    what = "Running this layer again over the whole text (a text this long keeps no layer's attention)"
    return waiting.admitted(admission.Cost(seconds, nbytes), what=what)


def first_run(message: str, choice: state.Choice, **options) -> trace.Trace:
    """A text's first run as the pages read it (reduced as they read every layer), once admitted, with a bar that
    fills layer by layer: a long text's run takes seconds (SmolLM2 at 2,048 tokens: about 10 s on two cores). A run
    whose visitor has gone stops at its next layer."""
    needs = first_run_cost(choice)
    with waiting.admitted(needs, fits(choice.model)):
        bar = st.progress(0.0, text=message)

        def progress(done: int, layers: int) -> None:
            waiting.check_visitor()
            waiting.gate().progress(done / max(layers, 1))  # those waiting are told its pace, not only its estimate
            bar.progress(done / max(layers, 1), text=f"{message} layer {done} of {layers}")

        loaded = shelf.model(choice.model)
        try:
            return trace.run(
                loaded,
                choice.text,
                choice.max_tokens,
                reload=reload(choice.model),
                reduce=reduced.for_model(loaded),
                progress=progress,
                admit=_admit_layer,
                **options,
            )
        finally:
            bar.empty()


FIRST_RUN = "first_run"  # the ask's button key, and a digest of what it runs


def asked_first(choice: state.Choice, what: str = "model's first run") -> None:
    """A long text's first run waits for a click, said with its estimate in time and memory; the page stops there
    until then. Nothing is asked when the run is kept or short, or once this visitor asked for it."""
    name = (choice.model, choice.text, choice.max_tokens)
    asked = st.session_state.setdefault(state.FIRST_RUNS, set())
    if name in asked or shared().peek(key("trace", choice)) is not None:
        return
    needs = first_run_cost(choice)
    button = f"{FIRST_RUN}_{hashlib.sha256(repr(name).encode()).hexdigest()[:12]}"
    slot = st.empty()  # the question goes once it is answered: the run's progress bar takes its place
    said = f"The {what} on this text is long."
    if waiting.ask_first(said, needs.seconds, "Run the model on this text", button, slot.container(), needs.bytes):
        slot.empty()
        asked.add(name)
        return
    st.stop()
