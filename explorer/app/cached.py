"""The cached getters the pages read, each a value of the run store (explorer/app/store.py): a text's run and what
the views read of it, named by the sidebar's choice (state.Choice) and kept for every session. Models, shared
read-only, come from the shelf (explorer/app/shelf.py; its names are this module's too, for the pages).

Models trained on the Train page live in this session's state only, under keys no other session can have, so a
trace cached under such a key is never served to anyone else.

Every cache in the app and the engine (tests/explorer/test_house.py checks that each one is named here): what it
holds, its key, its bound. None holds what another holds, so none was merged: the run store, B's shelf and the
walkthroughs' shelf hold different values and are apart on purpose (each says why where it is made), and the notebook
API's models (api._loaded) are another door's, in a process without Streamlit.

Shared by every session of the server (st.cache_resource, st.cache_data):
- explorer/app/store.py:shared -- the run store (memo.BoundedCache, STORE_BYTES = 192 MiB of arrays, least recently
  used out first): every getter's value here, in experiment_runs, patching_runs and compare_runs (a text's run, its
  statistics, thumbnails, experiments, patching grids and their chunks, ...); key store.key(what, model, revision,
  plain inputs).
- explorer/app/shelf.py:shelf -- the loaded models (memo.Shelf, MODELS_KEPT = 2, least recently used out); key a
  registry key, or shelf.reference_key(folder) for a transformers reference.
- explorer/app/cached.py:walkthroughs -- one query's rows of one layer, every head (memo.BoundedCache,
  WALKTHROUGH_BYTES = 64 MiB); key store.key("query_walkthrough", choice, kind, layer, query).
- explorer/app/compare_runs.py:second -- sentence B's long run on Compare sentences (memo.BoundedCache, SECOND_BYTES
  = 192 MiB: one run); key store.key("second_trace", B's choice, encoder only).
- explorer/app/cached.py:_positions -- a model's position tables (st.cache_data, max_entries=4); key
  store.key("positions", model).
- explorer/app/cached.py:_head_patterns -- what a model's heads can be expected to show, a sentence (st.cache_data,
  max_entries=8); key store.key("head_patterns", model).
- explorer/app/corpus_runs.py:corpora -- the corpora visitors ran, by digest, so a shared address (?corpus=digest)
  opens one (memo.Recent, CORPORA_KEPT = 32 corpora, each at most corpus_input.MAX_BYTES of text); key the digest.
  A corpus's statistics and a head's queries and keys are the run store's values (store.key("corpus_stats", model,
  digest, max tokens), store.key("corpus_points", ..., layer, head)).
- explorer/app/corpus_runs.py:prepared_corpora -- corpora tokenized for a model (memo.BoundedCache sized by tokens,
  PREPARED_BYTES = 768 MiB); key store.key("corpus_prepared", model, digest, max tokens).
- explorer/app/waiting.py:gate -- the admission gate (explorer/run/admission.py), one per process; holds no values.
- explorer/app/shelf.py:prepare_reference -- the one thread importing transformers' code, started once per process.
- explorer/app/shelf.py:left_out -- the models whose load could not fit the memory budget (models/footprint.py), found
  once per process from their files' sizes; one dict of estimates.
- explorer/app/gpu.py:chosen -- the server's device (serve --device, $EXPLORER_DEVICE) and why it fell back to the
  CPU, one value per process.
- explorer/app/gpu.py:books -- the GPU's memory books (explorer/run/device_books.py), one per process; None on the CPU;
  holds no values.

The engine's, at module level (no Streamlit; shared by every session too):
- explorer/run/layers.py:_CACHE -- the layers a long text's run recomputes when a view reads them (memo.BoundedCache,
  LAYERS_BYTES = 384 MiB: the largest module global); key (the run's token, layer); on a GPU also one head of a
  layer read alone (explorer/run/device_layers.py), key (the run's token, layer, module, field, head).
- explorer/run/reducers.py:_columns -- (5, Tk) marks of a text's keys, for every layer of a run (lru_cache, 4 texts);
  key the keys.
- explorer/run/reducers.py:_induction_targets -- a text's induction targets (lru_cache, 2 texts: 32 MB at 2,048
  tokens of one repeated token); key the tokens.
- explorer/run/device_reducers.py:_marks, explorer/run/device_reducers.py:_targets -- the same two, as tensors on a
  run's device (lru_cache, 4 and 2); key (the keys or tokens, the device).
- explorer/run/starting.py:_allowed_of -- (Tq, Tk) which links count (lru_cache, 4: 4 MB each at 2,048 tokens); key
  (queries, keys, self-attention, sink).
- explorer/run/caps.py:current -- this process's caps, one value (functools.cache; cache_clear() reads them again).
- explorer/run/layers.py:_side, explorer/run/reducers.py:_pool -- a thread pool each, one per process (functools.cache).
- explorer/experiments/training.py:step_seconds -- one training step's measured time, per task and device
  (functools.cache: three tasks, on the server's one device).
- explorer/experiments/training.py:adam_settings -- the optimiser's (betas, eps), one value (functools.cache).
- models/tokenize.py:_gpt2_bytes -- GPT-2's 256-entry byte table, one value (functools.cache).
- models/gguf.py:dequantizable -- the GGUF storage types gguf can read, one tuple (functools.cache).
- attention_explorer/api.py:_loaded -- the notebook API's models, one per registry key or path, for the process's
  life (functools.cache, unbounded: a notebook opens a few); the app never calls it.
- attention_explorer/api.py:_loaded_on -- the same, moved to a device other than the CPU, one per (key, device)
  (functools.cache, unbounded as _loaded).
- explorer/run/forward.py:FLOOR_GRID -- a constant (80,001 floats, 320 KB), not a cache.
- models/cache.py -- on disk, not in memory: dequantized GGUF weights between processes ($EXPLORER_CACHE).

One session's own (st.session_state, state.py's keys): state.TRAINED (models trained on the Train page), state.TRAIN_RUN
(the training run), state.FIRST_RUNS (which long first runs the visitor asked for).
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import reduced, shelf, state, store, waiting
from attention_explorer.explorer.app.shelf import (  # noqa: F401 -- the pages' names for the models
    catalogued,
    described,
    get_model,
    get_reference,
    model,
    model_keys,
    prepare_reference,
)
from attention_explorer.explorer.experiments import induction
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.run import (
    admission,
    analysis,
    blocks,
    compare,
    cost,
    device_reducers,
    forward,
    memo,
    positions,
    reducers,
    rows,
    starting,
    trace,
    walkthrough,
)
from attention_explorer.models import registry

Choice = state.Choice

SHARED_RUN = "Another visitor is running the model on this same text: its run is shared, and this page waits for it..."


def get_trace(choice: Choice) -> trace.Trace:
    """The text's run, as every page reads it (asked for first when long; shared with whoever runs it meanwhile)."""
    store.asked_first(choice)
    key = store.key("trace", choice)
    with st.spinner(SHARED_RUN) if store.shared().computing(key) else contextlib.nullcontext():
        return store.shared().get(key, lambda: store.first_run("Running the model...", choice))


def get_encoder_trace(choice: Choice) -> trace.Trace:
    """The encoder's part of a trace (for an encoder-decoder: no decoding, decoder fields None), for views that draw
    only encoder self-attention (get_trace_for): paper-random's greedy decoding and decoder internals are seconds and
    tens of MB they would not show. The whole trace when the store already holds it (its encoder is the same)."""
    loaded = shelf.model(choice.model)
    whole = store.key("trace", choice)
    if not loaded.is_encoder_decoder:
        return get_trace(choice)  # the same run: share its entry
    if (kept := store.shared().peek(whole)) is not None:
        return kept  # type: ignore[return-value]
    if store.shared().peek(store.key("encoder_trace", choice)) is None:
        store.asked_first(choice, "encoder's first run")
    return store.shared().get(
        store.key("encoder_trace", choice),
        lambda: store.first_run("Running the encoder...", choice, encoder_only=True),
    )


@st.cache_data(max_entries=4, show_spinner=False)
def _positions(key: tuple, _loaded: registry.LoadedModel) -> dict:
    return positions.tables(_loaded)


def get_positions(model_name: str) -> dict:
    """The model's position tables (positions.tables), per model and revision."""
    return _positions(store.key("positions", model_name), shelf.model(model_name))


@st.cache_data(max_entries=8, show_spinner=False)
def _head_patterns(key: tuple, _loaded: registry.LoadedModel) -> str:
    config = _loaded.model.config
    learned = _loaded.family.block.positions.kind == "learned"
    smooth = not learned or positions.neighbour_cosine(positions.tables(_loaded)["learned"]) > 0.5
    if _loaded.family.origin != "random":  # only random weights' sentence is measured on the embeddings
        return wording.head_patterns(_loaded.family, {}, 0.0, smooth, config.scale_embeddings)
    parts, cosine = positions.input_parts(_loaded), positions.input_cosine(_loaded)
    formula = wording.embedding_sum(config)
    return wording.head_patterns(_loaded.family, parts, cosine, smooth, config.scale_embeddings, formula)


def get_head_patterns(model_name: str) -> str:
    """What this model's heads can be expected to show, measured on its own embeddings (wording.head_patterns)."""
    return _head_patterns(store.key("head_patterns", model_name), shelf.model(model_name))


def get_trace_for(choice: Choice, kind: str) -> trace.Trace:
    """The run a view of one attention kind needs: encoder self-attention needs no decoding (get_encoder_trace: the
    same encoder numbers, bit for bit), the decoder's kinds the whole trace."""
    if kind == "encoder_self":
        return get_encoder_trace(choice)
    return get_trace(choice)


def get_thumbnails(choice: Choice, kind: str):
    """Every head's thumbnail for the model view, (L, H, tq, tk): at most blocks.THUMBNAIL x blocks.THUMBNAIL block
    means each (blocks.thumbnails), reduced one layer at a time and kept across reruns."""
    result = get_trace_for(choice, kind)
    if (kept := reduced.of(result, "thumbnails", kind)) is not None:
        return kept
    attention = result.attention(kind)  # on a GPU, each layer reduced there (device_reducers.thumbnails)
    return store.shared().get(
        store.key("thumbnails", choice, kind),
        lambda: np.stack(attention.reduced(blocks.thumbnails, device_reducers.thumbnails)),
    )


def get_statistics(choice: Choice, kind: str, words: bool = False) -> tuple[dict, object]:
    """Per-head statistics and labels of one attention kind, over tokens or over words (a pass over every weight:
    kept across reruns)."""
    result = get_trace_for(choice, kind)

    if words:
        weights, queries, keys = get_word_level(choice, kind)
    else:
        weights, (queries, keys) = result.attention(kind).weights, result.tokens_for(kind)
    self_attention = kind != "cross"  # the induction score needs the queries to be the keys
    found = None if words else reduced.of(result, "statistics", kind)

    def compute() -> tuple[dict, object]:
        if found is not None:  # reduced by the run (reducers.Analysis): no layer read
            stats = reducers.as_statistics(found)
        elif not words and (on_device := reduced.statistics_on_device(result, kind)) is not None:
            stats = on_device  # a run on a GPU: each layer reduced there
        else:
            stats = analysis.head_statistics(weights, keys, queries if self_attention else None)
        first = analysis.marker_names(keys)["cls"] == analysis.FIRST_TOKEN  # no start marker: the text's first token
        return stats, analysis.head_labels(stats, len(keys), analysis.FIRST_SINK if first else analysis.SINK)

    return store.shared().get(store.key("statistics", choice, kind, words), compute)


def get_rollout_overview(choice: Choice, kind: str, layer: int):
    """The rollout through layers 1..layer+1 as a long map's overview draws it: (t, t) block means (zoom.beside),
    reduced by the run (reducers.Analysis); None where it was not (a text drawn whole, cross-attention, a run without
    it)."""
    found = reduced.of(get_trace_for(choice, kind), "rollout", kind)
    return found[layer] if found is not None and found[layer].size else None


def get_query_rows(choice: Choice, kind: str, query: int):
    """(L, H, Tk): what query `query` puts on every key in every layer and head (rows.query_rows: one row of each
    layer, not the layers; kept across reruns)."""
    attention = get_trace_for(choice, kind).attention(kind)
    return store.shared().get(
        store.key("query_rows", choice, kind, query),
        lambda: store.compute(
            "Reading that query's row of every layer...",
            lambda: rows.query_rows(attention, query),
            store.choice_cost(choice),
        ),
    )


# One query's rows of a layer, every head (walkthrough.QueryRows), on a shelf of their own: 17 MB for SmolLM2 at 2,421
# tokens, which in the store would push out the text's own run (a full run again); a few kept, so that going back to
# a layer just seen waits for nothing.
WALKTHROUGH_BYTES = 64 * 2**20


@st.cache_resource(show_spinner=False)
def walkthroughs() -> memo.BoundedCache:
    return memo.BoundedCache(WALKTHROUGH_BYTES)


def layer_wait(choice: Choice, kind: str, layer: int) -> float:
    """About how long reading one layer of one attention kind takes: 0 when the run kept it (a short text) or it was
    recomputed a moment ago, else one layer run again over the whole text (a long text keeps no layer)."""
    attention = get_trace_for(choice, kind).attention(kind)
    if attention.ready(layer):
        return 0.0
    queries, keys = attention.mask.shape
    loaded = shelf.model(choice.model)
    return cost.layer_seconds(
        loaded.model.config, queries, keys, cross=loaded.is_encoder_decoder and kind != "encoder_self"
    )


def get_query_walkthrough(choice: Choice, kind: str, layer: int, query: int) -> walkthrough.QueryRows:
    """What query `query` reads in layer `layer`, every head (walkthrough.query_rows: the layer read once), kept
    across reruns: another head of the same layer and query costs nothing, a new layer recomputes that layer only.
    Where a long text's layer must be run again, a spinner says so, with about how long it takes."""
    result = get_trace_for(choice, kind)
    key = store.key("query_walkthrough", choice, kind, layer, query)
    seconds = layer_wait(choice, kind, layer)

    def work() -> walkthrough.QueryRows:
        keys = result.attention(kind).mask.shape[1]
        if not seconds:  # the layer is kept: a small read-out, in its own lane (issue 52)
            with waiting.admitted(waiting.readout_cost(shelf.model(choice.model).model.config, keys)):
                return walkthrough.query_rows(result, kind, layer, query)
        message = (
            f"Running layer {layer + 1} again over the {keys:,} tokens for this head's numbers, {cost.about(seconds)} "
            "(a text this long keeps no layer's attention: each is recomputed when it is shown)..."
        )
        needs = admission.Cost(seconds, cost.layer_bytes(shelf.model(choice.model).model.config, keys))
        return store.compute(message, lambda: walkthrough.query_rows(result, kind, layer, query), needs)

    return walkthroughs().get(key, work)


def get_random_repeat(model_name: str):
    """Every head's induction and previous-token scores on a repeated random sequence of the model's own tokens
    (explorer.experiments.induction: one forward; kept across reruns)."""
    loaded = shelf.model(model_name)
    return store.shared().get(
        store.key("random_repeat", model_name),
        lambda: store.compute(
            "Running a repeated random sequence...",
            lambda: induction.random_repeat(loaded),
            store.text_cost(model_name, min(loaded.max_tokens, 2 * induction.REPEAT_LENGTH + 2)),
        ),
    )


def get_word_level(choice: Choice, kind: str, result: trace.Trace | None = None):
    """(L, H, Wq, Wk) weights of one attention kind merged into words, and the query and key words (a pass over
    every weight, 0.6 s at 512 tokens: kept across reruns); `result`: the text's run where the caller has it."""
    result = result or get_trace_for(choice, kind)
    return store.shared().get(
        store.key("words", choice, kind),
        lambda: analysis.at_word_level(result, kind, shelf.model(choice.model).family.word_start),
    )


def get_flow(choice: Choice, kind: str, layer: int):
    """Attention flow through layers 1..layer+1 of the sidebar's trace (slow: seconds for 16 tokens). Each layer is
    first reduced to its residual-mixed (T, T), on a GPU there (device_reducers.residual_mixed): only those come
    back for the max-flow, which runs on the CPU."""
    attention = get_trace_for(choice, kind).attention(kind)
    weights = attention.weights

    def work():
        mixed = attention.reduced(analysis.residual_mixed, device_reducers.residual_mixed, range(layer + 1))
        return analysis.flow_of(mixed)

    return store.shared().get(
        store.key("flow", choice, kind, layer),
        lambda: store.compute(
            "Computing attention flow (a max-flow per token pair)...",
            work,
            # a max-flow per pair: never a short run; one layer's weights, sized from the shape (no layer read)
            admission.Cost(admission.SHORT_SECONDS, cost.FLOAT * math.prod(weights.shape[1:])),
        ),
    )


def get_scored(choice: Choice, target: str):
    """(teacher-forced run on the target, where the target comes from): a forward pass, kept across reruns."""
    from attention_explorer.explorer.run import output

    result, loaded = get_trace(choice), shelf.model(choice.model)

    def work():
        ids, where = output.target_for(loaded, result, target)
        if result.decoder_only:  # its target is its text: the trace's own last states, no forward
            return output.score_text(loaded, result), where
        stack = forward.stack_of(loaded.family.kinds[0])  # the stack that reads the text
        return output.score(loaded, forward.token_ids(loaded, result, stack), ids), where

    return store.shared().get(
        store.key("scored", choice, target),
        lambda: store.compute("Scoring the target...", work, store.stand_in(store.choice_cost(choice))),
    )


def get_sampled(choice: Choice, method: str, temperature: float, top_k: int, top_p: float, seed: int):
    """An output written by a seeded sampler (one decoder pass per token, kept across reruns)."""
    from attention_explorer.explorer.run import output

    result, loaded = get_trace(choice), shelf.model(choice.model)
    if method == "greedy" and temperature == 1.0 and not result.decoder_only:
        return output.greedy_from_trace(result)
    if method == "greedy":  # k, p and the seed choose nothing: one entry for every greedy run at this temperature
        top_k, top_p, seed = 1, 1.0, 0
    ids = forward.token_ids(loaded, result, forward.stack_of(loaded.family.kinds[0]))
    # an encoder-decoder writes about as many tokens as it read; a decoder-only model continues its text
    budget = output.CONTINUATION if result.decoder_only else min(len(ids) + 2, trace.MAX_TARGET)
    return store.shared().get(
        store.key("sampled", choice, method, temperature, top_k, top_p, seed),
        lambda: store.compute(
            "Sampling...",
            lambda: output.sample(
                loaded, ids, method, temperature, top_k, top_p, seed, budget, result if result.decoder_only else None
            ),
            store.choice_cost(choice),
        ),
    )


def get_start(choice: Choice, kind: str):
    """Where the pages open on this sentence: the head with the strongest long-range content link and that link
    (starting.best_link), or in a trained model's cross-attention the head showing its alignment
    (starting.aligned_link; random weights align nothing). A pass over every weight: kept across reruns."""
    result = get_trace_for(choice, kind)
    queries, keys = result.tokens_for(kind)
    weights = result.attention(kind).weights
    loaded = shelf.model(choice.model)
    sink = reduced.sink(loaded, kind)
    if wording.opens_on_alignment(loaded.family, kind):
        find = functools.partial(starting.aligned_link, weights, queries, keys)
    elif (links := reduced.of(result, "start", kind)) is not None:
        return starting.best_of(links, queries, keys, self_attention=kind != "cross", sink=sink)
    else:
        find = functools.partial(starting.best_link, weights, queries, keys, self_attention=kind != "cross", sink=sink)
    return store.shared().get(store.key("start", choice, kind), find)


def get_variant(choice: Choice) -> str:
    """Sentence B's start: one word away from A inside what the model reads (compare.first_variant tokenizes up to
    64 candidates: kept across reruns, which ask again while B follows A)."""
    loaded = shelf.model(choice.model)
    return store.shared().get(
        store.key("variant", choice), lambda: compare.first_variant(loaded, choice.text, choice.max_tokens)
    )
