"""The only Streamlit cache wrappers: models shared read-only by every session, traces keyed by plain values.

Models trained on the Train page live in this session's state only, under keys no other session can have, so a
trace cached under such a key is never served to anyone else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import threading

import streamlit as st

from attention_explorer.explorer.app import reduced, state, waiting
from attention_explorer.explorer.experiments import induction
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.run import (
    admission,
    analysis,
    blocks,
    caps,
    compare,
    cost,
    forward,
    memo,
    positions,
    reducers,
    reference_view,
    rows,
    starting,
    trace,
    walkthrough,
)
from attention_explorer.explorer.run.layers import LayerArray
from attention_explorer.models import reference, registry

# The two most recently used models stay loaded (the transformers reference counts as one): every page needs at most
# two at once (Compare weights: MiniLM and its untrained copy; Ours vs transformers: MiniLM and the reference). Another
# is loaded again on its next use, to the same weights and revision, so cached traces stay valid: MiniLM or its
# untrained copy in ~0.3 s, paper-random in ~1.4 s, the reference in ~0.05 s once transformers is imported, with a
# spinner. Keeping three held paper-random (60M parameters, 240 MB) after every page had been opened with every model:
# 807-816 MB instead of ~600 (python -m bench load).
MODELS_KEPT = 2


@st.cache_resource(show_spinner=False)
def _models() -> memo.Shelf:
    return memo.Shelf(_load, MODELS_KEPT)


# A transformers reference (BertModel over MiniLM's files, or the class a folder's model_type names over that folder)
# is one more model on the same shelf, one entry per folder: a class that has left the reference page does not keep it
# (its weights) loaded. Importing transformers' BERT and GPT-2 code stays (~120 MB).
REFERENCE = "transformers reference"  # MiniLM's; another folder's is "transformers reference: <folder>"


def _reference_key(folder: str) -> str:
    return f"{REFERENCE}: {folder}" if folder else REFERENCE


def _load(key: str) -> object:
    if key == REFERENCE or key.startswith(f"{REFERENCE}: "):
        return reference_view.load(key.removeprefix(REFERENCE).removeprefix(": "))
    return registry.load(key)


def _shelved(key: str, message: str):
    shelf = _models()
    if key in shelf:
        return shelf.get(key)
    with st.spinner(message):
        return shelf.get(key)


def get_model(name: str) -> registry.LoadedModel:
    """A registry model, shared read-only by every session; a spinner while it loads."""
    return _shelved(name, "Loading model...")


def _trained() -> dict[str, registry.LoadedModel]:
    return st.session_state.get(state.TRAINED, {})


def model(key: str) -> registry.LoadedModel:
    """A model trained in this session, else a shared one from the registry."""
    return _trained().get(key) or get_model(key)


def model_keys() -> list[str]:
    """The models a visitor is offered: the registry's that the server lists (caps.current: all without a list), then
    those trained in this session (the visitor's own)."""
    return [*caps.current().offered(registry.MODELS), *_trained()]


def described(key: str) -> registry.LoadedModel | registry.ModelSpec:
    """Something with the model's title and description, without loading a registry model."""
    return _trained().get(key) or registry.MODELS[key]


# Traces are the big values (a 512-token MiniLM trace holds about 185 MB of arrays): one store for every session,
# bounded in bytes rather than in entries, holding each array read-only.
STORE_BYTES = 192 * 2**20  # one 512-token MiniLM trace (185 MB) fits; growth stays under 300 MB
# Forwards at once, and how much memory they may take: explorer/run/admission.py's gate (explorer/app/waiting.py draws
# what waits). A short run has a slot of its own that long ones cannot take, so a class's sentences go through while
# someone's long text runs. torch keeps its default intra-op threads in every session's thread (a different count
# changes float rounding, and every session must get the numbers a single user gets).


@st.cache_resource(show_spinner=False)
def store() -> memo.BoundedCache:
    return memo.BoundedCache(STORE_BYTES)


def _key(what: str, model_name: str, *inputs: object) -> tuple:
    """The one way a cached value is named: what it is, the model's key and revision (a model retrained here keeps
    its key but not its revision), then the plain inputs it was computed from."""
    return (what, model_name, model(model_name).revision, *inputs)


def text_cost(model_name: str, tokens: int, rows: int = 1) -> admission.Cost:
    """About what `rows` forwards over `tokens` tokens of this model take, with their logits where it has them."""
    loaded = model(model_name)
    config, logits = loaded.model.config, loaded.family.next_token_head
    return admission.Cost(
        cost.forward_seconds(config, tokens, rows, logits), cost.forward_bytes(config, tokens, rows, logits)
    )


def tokens_of(model_name: str, text: str, max_tokens: int) -> int:
    """How many tokens the model reads of this text (the trace's own count, without running it)."""
    return len(model(model_name).tokenizer.encode(text, max_tokens).ids)


def fits(model_name: str, rows: int = 1):
    """The refusal's advice: the most tokens of this model whose run fits in `room` bytes."""
    loaded = model(model_name)
    return lambda room: cost.most_tokens(loaded.model.config, room, rows, loaded.family.next_token_head)


def _compute(message: str, work, needs: admission.Cost, advice=None):
    """Run `work` once admitted by its estimate `needs` (explorer/app/waiting.py), with a spinner while it runs;
    `advice(room)`: the most tokens that fit, should it be refused (fits)."""
    with waiting.admitted(needs, advice), st.spinner(message):
        return work()


def _sidebar_cost(model_name: str, text: str, max_tokens: int, rows: int = 1) -> admission.Cost:
    """A computation about as big as `rows` forwards over the text: what the smaller read-outs are admitted by."""
    return text_cost(model_name, tokens_of(model_name, text, max_tokens), rows)


def _progressing(message: str, work, needs: admission.Cost):
    """_compute for work done in steps: `work(step)` calls step(done, total) and a progress bar under the message
    follows it (removed once the work is done)."""
    bar = st.progress(0.0, text=message)

    def step(done: int, total: int) -> None:
        bar.progress(min(1.0, done / max(total, 1)), text=f"{message} {done} of {total}")

    try:
        return _compute(message, lambda: work(step), needs)
    finally:
        bar.empty()


def _reload(model_name: str):
    """How a kept trace gets its model back to recompute a layer once the shelf let the model go: from the shelf
    (a model trained in this session is held by its traces)."""
    return (lambda: get_model(model_name)) if model_name in registry.MODELS else None


def _admit_layer(seconds: float, nbytes: int):
    """How a long text's layer is recomputed when a view reads it: admitted like any run, with a spinner."""
    what = "Running this layer again over the whole text (a text this long keeps no layer's attention)"
    return waiting.admitted(admission.Cost(seconds, nbytes), what=what)


def _first_run(message: str, model_name: str, text: str, max_tokens: int, **options) -> trace.Trace:
    """A text's first run as the pages read it (reduced as they read every layer), once admitted, with a bar that
    fills layer by layer: a long text's run takes seconds (SmolLM2 at 2,048 tokens: about 10 s on two cores). A run
    whose visitor has gone stops at its next layer."""
    needs = text_cost(model_name, tokens_of(model_name, text, max_tokens))
    with waiting.admitted(needs, fits(model_name)):
        bar = st.progress(0.0, text=message)

        def progress(done: int, layers: int) -> None:
            waiting.check_visitor()
            waiting.gate().progress(done / max(layers, 1))  # those waiting are told its pace, not only its estimate
            bar.progress(done / max(layers, 1), text=f"{message} layer {done} of {layers}")

        try:
            return trace.run(
                model(model_name),
                text,
                max_tokens,
                reload=_reload(model_name),
                reduce=reduced.for_model(model(model_name)),
                progress=progress,
                admit=_admit_layer,
                **options,
            )
        finally:
            bar.empty()


FIRST_RUN = "first_run"  # the ask's button key, and a digest of what it runs


def asked_first(model_name: str, text: str, max_tokens: int, what: str = "model's first run") -> None:
    """A long text's first run waits for a click, said with its estimate in time and memory; the page stops there
    until then. Nothing is asked when the run is kept or short, or once this visitor asked for it."""
    name = (model_name, text, max_tokens)
    asked = st.session_state.setdefault(state.FIRST_RUNS, set())
    if name in asked or store().peek(_key("trace", *name)) is not None:
        return
    needs = text_cost(model_name, tokens_of(*name))
    key = f"{FIRST_RUN}_{hashlib.sha256(repr(name).encode()).hexdigest()[:12]}"
    slot = st.empty()  # the question goes once it is answered: the run's progress bar takes its place
    said = f"The {what} on this text is long."
    if waiting.ask_first(said, needs.seconds, "Run the model on this text", key, slot.container(), needs.bytes):
        slot.empty()
        asked.add(name)
        return
    st.stop()


SHARED_RUN = "Another visitor is running the model on this same text: its run is shared, and this page waits for it..."


def get_trace(model_name: str, text: str, max_tokens: int) -> trace.Trace:
    asked_first(model_name, text, max_tokens)
    key = _key("trace", model_name, text, max_tokens)
    with st.spinner(SHARED_RUN) if store().computing(key) else contextlib.nullcontext():
        return store().get(key, lambda: _first_run("Running the model...", model_name, text, max_tokens))


def get_encoder_trace(model_name: str, text: str, max_tokens: int) -> trace.Trace:
    """The encoder's part of a trace (for an encoder-decoder: no decoding, decoder fields None), for views that draw
    only encoder self-attention (get_trace_for): paper-random's greedy decoding and decoder internals are seconds and
    tens of MB they would not show. The whole trace when the store already holds it (its encoder is the same)."""
    loaded = model(model_name)
    whole = _key("trace", model_name, text, max_tokens)
    if not loaded.is_encoder_decoder:
        return get_trace(model_name, text, max_tokens)  # the same run: share its entry
    if (kept := store().peek(whole)) is not None:
        return kept  # type: ignore[return-value]
    if store().peek(_key("encoder_trace", model_name, text, max_tokens)) is None:
        asked_first(model_name, text, max_tokens, "encoder's first run")
    return store().get(
        _key("encoder_trace", model_name, text, max_tokens),
        lambda: _first_run("Running the encoder...", model_name, text, max_tokens, encoder_only=True),
    )


@st.cache_data(max_entries=4, show_spinner=False)
def _positions(key: tuple, _loaded: registry.LoadedModel) -> dict:
    return positions.tables(_loaded)


def get_positions(model_name: str) -> dict:
    return _positions(_key("positions", model_name), model(model_name))


@st.cache_data(max_entries=8, show_spinner=False)
def _head_patterns(key: tuple, _loaded: registry.LoadedModel) -> str:
    config = _loaded.model.config
    smooth = config.positional != "learned" or positions.neighbour_cosine(positions.tables(_loaded)["learned"]) > 0.5
    if _loaded.family.origin != "random":  # only random weights' sentence is measured on the embeddings
        return wording.head_patterns(_loaded.family, {}, 0.0, smooth, config.scale_embeddings)
    parts, cosine = positions.input_parts(_loaded), positions.input_cosine(_loaded)
    formula = wording.embedding_sum(config)
    return wording.head_patterns(_loaded.family, parts, cosine, smooth, config.scale_embeddings, formula)


def get_head_patterns(model_name: str) -> str:
    """What this model's heads can be expected to show, measured on its own embeddings (wording.head_patterns)."""
    return _head_patterns(_key("head_patterns", model_name), model(model_name))


def get_trace_for(model_name: str, text: str, max_tokens: int, kind: str) -> trace.Trace:
    """The run a view of one attention kind needs: encoder self-attention needs no decoding (get_encoder_trace: the
    same encoder numbers, bit for bit), the decoder's kinds the whole trace."""
    if kind == "encoder_self":
        return get_encoder_trace(model_name, text, max_tokens)
    return get_trace(model_name, text, max_tokens)


def get_thumbnails(model_name: str, text: str, max_tokens: int, kind: str):
    """Every head's thumbnail for the model view, (L, H, tq, tk): at most blocks.THUMBNAIL x blocks.THUMBNAIL block
    means each (blocks.thumbnails), reduced one layer at a time and kept across reruns."""
    result = get_trace_for(model_name, text, max_tokens, kind)
    if (kept := reduced.of(result, "thumbnails", kind)) is not None:
        return kept
    attention = result.attention(kind)
    layers = (attention.layer(i).weights for i in range(attention.n_layers))
    return store().get(_key("thumbnails", model_name, text, max_tokens, kind), lambda: blocks.every_layer(layers))


def get_statistics(model_name: str, text: str, max_tokens: int, kind: str, words: bool = False) -> tuple[dict, object]:
    """Per-head statistics and labels of one attention kind, over tokens or over words (a pass over every weight:
    kept across reruns)."""
    result = get_trace_for(model_name, text, max_tokens, kind)

    if words:
        weights, queries, keys = get_word_level(model_name, text, max_tokens, kind)
    else:
        weights, (queries, keys) = result.attention(kind).weights, result.tokens_for(kind)
    self_attention = kind != "cross"  # the induction score needs the queries to be the keys
    found = None if words else reduced.of(result, "statistics", kind)

    def compute() -> tuple[dict, object]:
        if found is not None:  # reduced by the run (reducers.Analysis): no layer read
            stats = reducers.as_statistics(found)
        else:
            stats = analysis.head_statistics(weights, keys, queries if self_attention else None)
        first = analysis.marker_names(keys)["cls"] == analysis.FIRST_TOKEN  # no start marker: the text's first token
        return stats, analysis.head_labels(stats, len(keys), analysis.FIRST_SINK if first else analysis.SINK)

    return store().get(_key("statistics", model_name, text, max_tokens, kind, words), compute)


def get_rollout_overview(model_name: str, text: str, max_tokens: int, kind: str, layer: int):
    """The rollout through layers 1..layer+1 as a long map's overview draws it: (t, t) block means (zoom.beside),
    reduced by the run (reducers.Analysis); None where it was not (a text drawn whole, cross-attention, a run without
    it)."""
    found = reduced.of(get_trace_for(model_name, text, max_tokens, kind), "rollout", kind)
    return found[layer] if found is not None and found[layer].size else None


def get_query_rows(model_name: str, text: str, max_tokens: int, kind: str, query: int):
    """(L, H, Tk): what query `query` puts on every key in every layer and head (rows.query_rows: one row of each
    layer, not the layers; kept across reruns)."""
    attention = get_trace_for(model_name, text, max_tokens, kind).attention(kind)
    return store().get(
        _key("query_rows", model_name, text, max_tokens, kind, query),
        lambda: _compute(
            "Reading that query's row of every layer...",
            lambda: rows.query_rows(attention, query),
            _sidebar_cost(model_name, text, max_tokens),
        ),
    )


# One query's rows of a layer, every head (walkthrough.QueryRows), on a shelf of their own: 17 MB for SmolLM2 at 2,421
# tokens, which in the store would push out the text's own run (a full run again); a few kept, so that going back to
# a layer just seen waits for nothing.
WALKTHROUGH_BYTES = 64 * 2**20


@st.cache_resource(show_spinner=False)
def _walkthroughs() -> memo.BoundedCache:
    return memo.BoundedCache(WALKTHROUGH_BYTES)


def layer_wait(model_name: str, text: str, max_tokens: int, kind: str, layer: int) -> float:
    """About how long reading one layer of one attention kind takes: 0 when the run kept it (a short text) or it was
    recomputed a moment ago, else one layer run again over the whole text (a long text keeps no layer)."""
    attention = get_trace_for(model_name, text, max_tokens, kind).attention(kind)
    if attention.ready(layer):
        return 0.0
    queries, keys = attention.mask.shape
    loaded = model(model_name)
    return cost.layer_seconds(
        loaded.model.config, queries, keys, cross=loaded.is_encoder_decoder and kind != "encoder_self"
    )


def get_query_walkthrough(
    model_name: str, text: str, max_tokens: int, kind: str, layer: int, query: int
) -> walkthrough.QueryRows:
    """What query `query` reads in layer `layer`, every head (walkthrough.query_rows: the layer read once), kept
    across reruns: another head of the same layer and query costs nothing, a new layer recomputes that layer only.
    Where a long text's layer must be run again, a spinner says so, with about how long it takes."""
    result = get_trace_for(model_name, text, max_tokens, kind)
    key = _key("query_walkthrough", model_name, text, max_tokens, kind, layer, query)
    seconds = layer_wait(model_name, text, max_tokens, kind, layer)

    def work() -> walkthrough.QueryRows:
        if not seconds:
            return walkthrough.query_rows(result, kind, layer, query)
        keys = result.attention(kind).mask.shape[1]
        message = (
            f"Running layer {layer + 1} again over the {keys:,} tokens for this head's numbers, {cost.about(seconds)} "
            "(a text this long keeps no layer's attention: each is recomputed when it is shown)..."
        )
        needs = admission.Cost(seconds, cost.layer_bytes(model(model_name).model.config, keys))
        return _compute(message, lambda: walkthrough.query_rows(result, kind, layer, query), needs)

    return _walkthroughs().get(key, work)


def get_random_repeat(model_name: str):
    """Every head's induction and previous-token scores on a repeated random sequence of the model's own tokens
    (explorer.experiments.induction: one forward; kept across reruns)."""
    loaded = model(model_name)
    return store().get(
        _key("random_repeat", model_name),
        lambda: _compute(
            "Running a repeated random sequence...",
            lambda: induction.random_repeat(loaded),
            text_cost(model_name, min(loaded.max_tokens, 2 * induction.REPEAT_LENGTH + 2)),
        ),
    )


def get_word_level(model_name: str, text: str, max_tokens: int, kind: str, result: trace.Trace | None = None):
    """(L, H, Wq, Wk) weights of one attention kind merged into words, and the query and key words (a pass over
    every weight, 0.6 s at 512 tokens: kept across reruns); `result`: the text's run where the caller has it."""
    result = result or get_trace_for(model_name, text, max_tokens, kind)
    return store().get(
        _key("words", model_name, text, max_tokens, kind),
        lambda: analysis.at_word_level(result, kind, model(model_name).family.word_start),
    )


def get_flow(model_name: str, text: str, max_tokens: int, kind: str, layer: int):
    """Attention flow through layers 1..layer+1 of the sidebar's trace (slow: seconds for 16 tokens)."""
    weights = get_trace_for(model_name, text, max_tokens, kind).attention(kind).weights
    return store().get(
        _key("flow", model_name, text, max_tokens, kind, layer),
        lambda: _compute(
            "Computing attention flow (a max-flow per token pair)...",
            lambda: analysis.flow(weights[: layer + 1]),
            # a max-flow per pair: never a short run; one layer's weights, sized from the shape (no layer read)
            admission.Cost(admission.SHORT_SECONDS, cost.FLOAT * math.prod(weights.shape[1:])),
        ),
    )


@st.cache_resource(show_spinner=False)
def prepare_reference() -> threading.Thread:
    """Once per process, after the first page is drawn: import transformers' BERT and GPT-2 code in the background, so
    the first opening of Ours vs transformers loads only its weights (0.05 s) instead of also importing (3 s)."""
    thread = threading.Thread(target=reference.import_code, name="import-transformers", daemon=True)
    thread.start()
    return thread


def get_reference(folder: str = ""):
    """transformers' model over a folder's files ("" = MiniLM's: BertModel), shared read-only; a spinner while it
    loads."""
    return _shelved(_reference_key(folder), "Loading the transformers reference...")


def _layers_kept(weights) -> bool:
    """Whether a run kept every layer's weights (a short text) rather than recomputing a layer when read."""
    return not isinstance(weights, LayerArray)


def reference_grid_kept(model_name: str, text: str, max_tokens: int) -> bool:
    """Whether every head's max |ours - reference| on this text is kept (then another head needs only its map)."""
    return store().peek(_key("difference", model_name, text, max_tokens)) is not None


def reference_seconds(model_name: str, text: str, max_tokens: int, layer: int, head: int) -> float:
    """About how long get_reference_difference takes now: 0 when both its results are kept; the reference up to
    `layer` for another head; otherwise the reference's whole forward beside ours read a layer at a time."""
    loaded = get_model(model_name)
    result = get_trace(model_name, text, max_tokens)
    config, tokens = loaded.model.config, len(result.source_tokens)
    has = reference_grid_kept(model_name, text, max_tokens)
    if has and store().peek(_key("reference_head", model_name, text, max_tokens, layer, head)) is not None:
        return 0.0
    n_layers = config.n_encoder_layers + config.n_decoder_layers
    one = cost.forward_seconds(config, tokens) / n_layers  # a layer of the reference's or a layer of ours recomputed
    if has:
        return (layer + 1) * one + one
    ours = 0 if _layers_kept(result.attention(loaded.family.kinds[0]).weights) else n_layers
    return (n_layers + ours) * one


def reference_cost(model_name: str, text: str, max_tokens: int, layer: int, head: int) -> admission.Cost:
    """The reference run's estimate: transformers keeps every layer's attention (L, H, T, T) beside one forward."""
    config, tokens = get_model(model_name).model.config, tokens_of(model_name, text, max_tokens)
    layers = config.n_encoder_layers + config.n_decoder_layers
    every = cost.FLOAT * layers * config.n_heads * tokens * tokens
    seconds = reference_seconds(model_name, text, max_tokens, layer, head)
    return admission.Cost(seconds, every + text_cost(model_name, tokens).bytes)


def get_reference_difference(model_name: str, text: str, max_tokens: int, layer: int, head: int):
    """(per head max |ours - reference| (L, H), the reference's weights of one head (T, T)) on the sidebar's text,
    for the registry model `model_name` read from a folder, in its own attention (the first kind its family has:
    BERT's encoder self-attention, GPT-2's masked decoder self-attention). One reference run, set against ours a layer
    at a time (reference_view.compare), of which only these are kept. Another head once the grid is kept runs the
    reference only up to its layer (0.1 s at 512 tokens; at 2,048 on SmolLM2 up to 10 s, with a progress bar)."""
    folder = reference_view.folder_of(model_name)
    if folder is None:
        raise ValueError(f"model {model_name!r} is not read from a folder: transformers has no reference for it")
    loaded = get_model(model_name)
    reference = get_reference(folder)
    ours = get_trace(model_name, text, max_tokens).attention(loaded.family.kinds[0]).weights
    grid, one = _key("difference", model_name, text, max_tokens), _key("reference_head", model_name, text, max_tokens)
    ran: list = []

    def run(every: bool) -> tuple:  # at most once per call: every layer for the grid, or up to `layer` for the head
        if not ran:
            ran.append(
                _progressing(
                    "Running the transformers reference, a layer at a time...",
                    lambda step: reference_view.compare(
                        reference, loaded, text, max_tokens, ours, layer, head, every=every, step=step
                    ),
                    reference_cost(model_name, text, max_tokens, layer, head),
                )
            )
        return ran[0]

    differences = store().get(grid, lambda: run(True)[0])
    theirs = store().get((*one, layer, head), lambda: run(False)[1])
    return differences, theirs


def get_scored(model_name: str, text: str, max_tokens: int, target: str):
    """(teacher-forced run on the target, where the target comes from): a forward pass, kept across reruns."""
    from attention_explorer.explorer.run import output

    result, loaded = get_trace(model_name, text, max_tokens), model(model_name)

    def work():
        ids, where = output.target_for(loaded, result, target)
        if result.decoder_only:  # its target is its text: the trace's own last states, no forward
            return output.score_text(loaded, result), where
        stack = forward.stack_of(loaded.family.kinds[0])  # the stack that reads the text
        return output.score(loaded, forward.token_ids(loaded, result, stack), ids), where

    key = ("scored", model_name, loaded.revision, text, max_tokens, target)
    return store().get(
        key, lambda: _compute("Scoring the target...", work, _sidebar_cost(model_name, text, max_tokens))
    )


def get_sampled(
    model_name: str, text: str, max_tokens: int, method: str, temperature: float, top_k: int, top_p: float, seed: int
):
    """An output written by a seeded sampler (one decoder pass per token, kept across reruns)."""
    from attention_explorer.explorer.run import output

    result, loaded = get_trace(model_name, text, max_tokens), model(model_name)
    if method == "greedy" and temperature == 1.0 and not result.decoder_only:
        return output.greedy_from_trace(result)
    if method == "greedy":  # k, p and the seed choose nothing: one entry for every greedy run at this temperature
        top_k, top_p, seed = 1, 1.0, 0
    ids = forward.token_ids(loaded, result, forward.stack_of(loaded.family.kinds[0]))
    # an encoder-decoder writes about as many tokens as it read; a decoder-only model continues its text
    budget = output.CONTINUATION if result.decoder_only else min(len(ids) + 2, trace.MAX_TARGET)
    key = ("sampled", model_name, loaded.revision, text, max_tokens, method, temperature, top_k, top_p, seed)
    return store().get(
        key,
        lambda: _compute(
            "Sampling...",
            lambda: output.sample(
                loaded, ids, method, temperature, top_k, top_p, seed, budget, result if result.decoder_only else None
            ),
            _sidebar_cost(model_name, text, max_tokens),
        ),
    )


def get_start(model_name: str, text: str, max_tokens: int, kind: str):
    """Where the pages open on this sentence: the head with the strongest long-range content link and that link
    (starting.best_link), or in a trained model's cross-attention the head showing its alignment
    (starting.aligned_link; random weights align nothing). A pass over every weight: kept across reruns."""
    result = get_trace_for(model_name, text, max_tokens, kind)
    queries, keys = result.tokens_for(kind)
    weights = result.attention(kind).weights
    sink = reduced.sink(model(model_name), kind)
    if wording.opens_on_alignment(model(model_name).family, kind):
        find = functools.partial(starting.aligned_link, weights, queries, keys)
    elif (links := reduced.of(result, "start", kind)) is not None:
        return starting.best_of(links, queries, keys, self_attention=kind != "cross", sink=sink)
    else:
        find = functools.partial(starting.best_link, weights, queries, keys, self_attention=kind != "cross", sink=sink)
    return store().get(_key("start", model_name, text, max_tokens, kind), find)


def get_variant(model_name: str, text: str, max_tokens: int) -> str:
    """Sentence B's start: one word away from A inside what the model reads (compare.first_variant tokenizes up to
    64 candidates: kept across reruns, which ask again while B follows A)."""
    loaded = model(model_name)
    return store().get(
        _key("variant", model_name, text, max_tokens), lambda: compare.first_variant(loaded, text, max_tokens)
    )


# Sentence B on Compare sentences: a long B's run does not fit the store beside A's (two 2,048-token SmolLM2 runs,
# 150 MB each), and each pushed the other out at every rerun: a full run each time (69 s on a busy machine). A long B
# is kept on a shelf of its own, one run at most; a short one in the store, as before.
SECOND_BYTES = 192 * 2**20


@st.cache_resource(show_spinner=False)
def _second() -> memo.BoundedCache:
    return memo.BoundedCache(SECOND_BYTES)


def _second_key(model_name: str, text: str, max_tokens: int, kind: str) -> tuple:
    encoder_only = kind == "encoder_self" and model(model_name).is_encoder_decoder
    return _key("second_trace", model_name, text, max_tokens, encoder_only)


def _trace_kept(model_name: str, text: str, max_tokens: int, kind: str) -> bool:
    """Whether the store or B's shelf holds the run get_second_trace would return (nothing is run)."""
    kept = store().peek(_key("trace", model_name, text, max_tokens)) is not None
    encoder = kind == "encoder_self" and store().peek(_key("encoder_trace", model_name, text, max_tokens)) is not None
    return kept or encoder or _second().peek(_second_key(model_name, text, max_tokens, kind)) is not None


def get_second_trace(model_name: str, text: str, max_tokens: int, kind: str) -> trace.Trace:
    """Sentence B's run (get_trace_for's, the same numbers): from the store when it holds it or the text is short,
    else from B's own shelf."""
    loaded = model(model_name)
    key = _second_key(model_name, text, max_tokens, kind)
    if (kept := _second().peek(key)) is not None:
        return kept  # type: ignore[return-value]
    if store().peek(_key("trace", model_name, text, max_tokens)) is not None or trace.short(
        loaded, len(loaded.tokenizer.encode(text, max_tokens).ids)
    ):
        return get_trace_for(model_name, text, max_tokens, kind)
    message = "Running the model on sentence B..."
    return _second().get(key, lambda: _first_run(message, model_name, text, max_tokens, encoder_only=key[-1]))


def comparison_seconds(
    model_name: str, text: str, other: str, max_tokens: int, kind: str, by_word: bool
) -> tuple[float, float]:
    """(about how long sentence B's own run takes, and comparing every head of A and B): 0 for what is kept.
    TokenizeError when the model cannot read B."""
    loaded = model(model_name)
    config = loaded.model.config
    tokens_b = len(loaded.tokenizer.encode(other, max_tokens).ids)
    logits = loaded.family.next_token_head  # a decoder's run reads its next-token logits too
    run = 0.0 if _trace_kept(model_name, other, max_tokens, kind) else cost.forward_seconds(config, tokens_b, 1, logits)
    if store().peek(_key("changed", model_name, text, other, max_tokens, kind, by_word)) is not None:
        return run, 0.0
    tokens_a = len(get_trace_for(model_name, text, max_tokens, kind).source_tokens)
    n_layers = config.n_encoder_layers if kind == "encoder_self" else config.n_decoder_layers
    cross = kind != "encoder_self" and config.is_encoder_decoder

    def recomputed(tokens: int) -> float:  # a long text's every layer is run again to be read
        return 0.0 if trace.short(loaded, tokens) else n_layers * cost.layer_seconds(config, tokens, cross=cross)

    return run, recomputed(tokens_a) + recomputed(tokens_b)


def get_changed(
    model_name: str, text: str, other: str, max_tokens: int, kind: str, by_word: bool, weights_a, weights_b, alignment
):
    """Per head, the largest |A - B| of the lined-up cells (L, H) (compare.largest_changes: every layer of A and B
    read once), with a progress bar; kept per pair of sentences. The arrays are those the key's plain values name."""
    return store().get(
        _key("changed", model_name, text, other, max_tokens, kind, by_word),
        lambda: _progressing(
            "Comparing every head of A and B, a layer at a time...",
            lambda step: compare.largest_changes(weights_a, weights_b, alignment, step),
            _changed_cost(model_name, text, other, max_tokens, kind, by_word, weights_a, weights_b),
        ),
    )


def _changed_cost(model_name, text, other, max_tokens, kind, by_word, weights_a, weights_b) -> admission.Cost:
    """Comparing every head: a layer of A and of B at a time, each recomputed for a long text."""
    seconds = comparison_seconds(model_name, text, other, max_tokens, kind, by_word)[1]
    config, tokens = model(model_name).model.config, max(weights_a.shape[-1], weights_b.shape[-1])
    return admission.Cost(seconds, 2 * cost.layer_bytes(config, tokens))
