"""The comparisons' cached runs (no page here): our attention beside transformers' own on the same text (Ours vs
transformers), and sentence A beside sentence B (Compare sentences), each kept in the run store
(explorer/app/store.py)."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import shelf, store
from attention_explorer.explorer.app.cached import get_trace, get_trace_for
from attention_explorer.explorer.app.state import Choice
from attention_explorer.explorer.run import admission, compare, cost, memo, reference_view, trace
from attention_explorer.explorer.run.layers import LayerArray


def _layers_kept(weights) -> bool:
    """Whether a run kept every layer's weights (a short text) rather than recomputing a layer when read."""
    return not isinstance(weights, LayerArray)


def reference_grid_kept(choice: Choice) -> bool:
    """Whether every head's max |ours - reference| on this text is kept (then another head needs only its map)."""
    return store.shared().peek(store.key("difference", choice)) is not None


def reference_seconds(choice: Choice, layer: int, head: int) -> float:
    """About how long get_reference_difference takes now: 0 when both its results are kept; the reference up to
    `layer` for another head; otherwise the reference's whole forward beside ours read a layer at a time."""
    loaded = shelf.get_model(choice.model)
    result = get_trace(choice)
    config, tokens = loaded.model.config, len(result.source_tokens)
    has = reference_grid_kept(choice)
    if has and store.shared().peek(store.key("reference_head", choice, layer, head)) is not None:
        return 0.0
    n_layers = config.n_encoder_layers + config.n_decoder_layers
    one = cost.forward_seconds(config, tokens) / n_layers  # a layer of the reference's or a layer of ours recomputed
    if has:
        return (layer + 1) * one + one
    ours = 0 if _layers_kept(result.attention(loaded.family.kinds[0]).weights) else n_layers
    return (n_layers + ours) * one


def reference_load(choice: Choice) -> tuple[float, int]:
    """(about how long loading transformers' copy of the model takes, and the memory it adds): (0, 0) once loaded."""
    folder = reference_view.folder_of(choice.model)
    if folder is None or shelf.has_reference(folder):
        return 0.0, 0
    parameters = sum(p.numel() for p in shelf.model(choice.model).model.parameters())
    gguf = folder.endswith(".gguf")
    return cost.reference_load_seconds(parameters, gguf), cost.reference_load_bytes(parameters)


def reference_cost(choice: Choice, layer: int, head: int) -> admission.Cost:
    """The reference run's estimate: transformers keeps every layer's attention (L, H, T, T) beside one forward."""
    config, tokens = shelf.get_model(choice.model).model.config, store.tokens_of(choice)
    layers = config.n_encoder_layers + config.n_decoder_layers
    every = cost.FLOAT * layers * config.n_heads * tokens * tokens
    seconds = reference_seconds(choice, layer, head)
    return admission.Cost(seconds, every + store.text_cost(choice.model, tokens).bytes)


def get_reference_difference(choice: Choice, layer: int, head: int):
    """(per head max |ours - reference| (L, H), the reference's weights of one head (T, T)) on the sidebar's text,
    for the registry model `choice.model` read from a folder, in its own attention (the first kind its family has:
    BERT's encoder self-attention, GPT-2's masked decoder self-attention). One reference run, set against ours a layer
    at a time (reference_view.compare), of which only these are kept. Another head once the grid is kept runs the
    reference only up to its layer (0.1 s at 512 tokens; at 2,048 on SmolLM2 up to 10 s, with a progress bar)."""
    folder = reference_view.folder_of(choice.model)
    if folder is None:
        raise ValueError(f"model {choice.model!r} is not read from a folder: transformers has no reference for it")
    loaded = shelf.get_model(choice.model)
    reference = shelf.get_reference(folder)
    ours = get_trace(choice).attention(loaded.family.kinds[0]).weights
    grid, one = store.key("difference", choice), store.key("reference_head", choice)
    ran: list = []

    def run(every: bool) -> tuple:  # at most once per call: every layer for the grid, or up to `layer` for the head
        if not ran:
            ran.append(
                store.progressing(
                    "Running the transformers reference, a layer at a time...",
                    lambda step: reference_view.compare(
                        reference, loaded, choice.text, choice.max_tokens, ours, layer, head, every=every, step=step
                    ),
                    reference_cost(choice, layer, head),
                )
            )
        return ran[0]

    differences = store.shared().get(grid, lambda: run(True)[0])
    theirs = store.shared().get((*one, layer, head), lambda: run(False)[1])
    return differences, theirs


# Sentence B on Compare sentences: a long B's run does not fit the store beside A's (two 2,048-token SmolLM2 runs,
# 150 MB each), and each pushed the other out at every rerun: a full run each time (69 s on a busy machine). A long B
# is kept on a shelf of its own, one run at most; a short one in the store, as before.
SECOND_BYTES = 192 * 2**20


@st.cache_resource(show_spinner=False)
def second() -> memo.BoundedCache:
    return memo.BoundedCache(SECOND_BYTES)


def _second_key(choice: Choice, kind: str) -> tuple:
    encoder_only = kind == "encoder_self" and shelf.model(choice.model).is_encoder_decoder
    return store.key("second_trace", choice, encoder_only)


def _trace_kept(choice: Choice, kind: str) -> bool:
    """Whether the store or B's shelf holds the run get_second_trace would return (nothing is run)."""
    kept = store.shared().peek(store.key("trace", choice)) is not None
    encoder = kind == "encoder_self" and store.shared().peek(store.key("encoder_trace", choice)) is not None
    return kept or encoder or second().peek(_second_key(choice, kind)) is not None


def get_second_trace(choice: Choice, kind: str) -> trace.Trace:
    """Sentence B's run (get_trace_for's, the same numbers; `choice.text` is B): from the store when it holds it or
    the text is short, else from B's own shelf."""
    loaded = shelf.model(choice.model)
    key = _second_key(choice, kind)
    if (kept := second().peek(key)) is not None:
        return kept  # type: ignore[return-value]
    if store.shared().peek(store.key("trace", choice)) is not None or trace.short(loaded, store.tokens_of(choice)):
        return get_trace_for(choice, kind)
    message = "Running the model on sentence B..."
    return second().get(key, lambda: store.first_run(message, choice, encoder_only=key[-1]))


def comparison_seconds(choice: Choice, other: str, kind: str, by_word: bool) -> tuple[float, float]:
    """(about how long sentence B's own run takes, and comparing every head of A and B): 0 for what is kept.
    `choice`: sentence A's; `other`: sentence B. TokenizeError when the model cannot read B."""
    loaded = shelf.model(choice.model)
    config = loaded.model.config
    b = choice.with_text(other)
    tokens_b = store.tokens_of(b)
    logits = loaded.family.next_token_head  # a decoder's run reads its next-token logits too
    band = not trace.short(loaded, tokens_b)  # B's first run: a long text's keeps no raw scores
    run = 0.0 if _trace_kept(b, kind) else cost.forward_seconds(config, tokens_b, 1, logits, band)
    if store.shared().peek(_changed_key(choice, other, kind, by_word)) is not None:
        return run, 0.0
    tokens_a = len(get_trace_for(choice, kind).source_tokens)
    n_layers = config.n_encoder_layers if kind == "encoder_self" else config.n_decoder_layers
    cross = kind != "encoder_self" and config.is_encoder_decoder

    def recomputed(tokens: int) -> float:  # a long text's every layer is run again to be read
        return 0.0 if trace.short(loaded, tokens) else n_layers * cost.layer_seconds(config, tokens, cross=cross)

    return run, recomputed(tokens_a) + recomputed(tokens_b)


def _changed_key(choice: Choice, other: str, kind: str, by_word: bool) -> tuple:
    return store.key("changed", choice.model, choice.text, other, choice.max_tokens, kind, by_word)


def get_changed(choice: Choice, other: str, kind: str, by_word: bool, weights_a, weights_b, alignment):
    """Per head, the largest |A - B| of the lined-up cells (L, H) (compare.largest_changes: every layer of A and B
    read once), with a progress bar; kept per pair of sentences (`choice`: A's, `other`: B). The arrays are those
    the key's plain values name."""
    return store.shared().get(
        _changed_key(choice, other, kind, by_word),
        lambda: store.progressing(
            "Comparing every head of A and B, a layer at a time...",
            lambda step: compare.largest_changes(weights_a, weights_b, alignment, step),
            _changed_cost(choice, other, kind, by_word, weights_a, weights_b),
        ),
    )


def _changed_cost(choice: Choice, other: str, kind: str, by_word: bool, weights_a, weights_b) -> admission.Cost:
    """Comparing every head: a layer of A and of B at a time, each recomputed for a long text."""
    seconds = comparison_seconds(choice, other, kind, by_word)[1]
    config, tokens = shelf.model(choice.model).model.config, max(weights_a.shape[-1], weights_b.shape[-1])
    return admission.Cost(seconds, 2 * cost.layer_bytes(config, tokens))
