"""Compare: the pretrained model beside its random-weight twin, or sentence A beside sentence B and their difference."""

from __future__ import annotations

import numpy as np
import streamlit as st

from explorer import cached, compare, state
from explorer.compare import MINIMAL_PAIRS
from explorer.figures.heatmap import head_heatmap
from explorer.figures.labels import markdown_literal
from explorer.figures.statistics import statistic_grid
from explorer.pages._shared import chart, current_trace, pick_attention, pick_head, pick_layer
from models.tokenize import TokenizeError

MEAN = -1
TWINS = ("minilm", "minilm-random")  # same shape and tokenizer: pretrained and untrained weights
MODES = {"weights": "Pretrained vs random weights", "sentences": "Sentence A vs sentence B"}

st.header("Compare")
mode = st.segmented_control("Compare", list(MODES), format_func=MODES.get, default="weights", key="compare_mode")


def heads(n_layers: int, n_heads: int) -> tuple[int, int]:
    left, right = st.columns(2)
    layer = pick_layer(n_layers, "compare_layer", left)
    head = pick_head(n_heads, "compare_head", right, extra=(MEAN,), extra_name="mean over heads")
    return layer, head


def one(weights: np.ndarray, layer: int, head: int) -> np.ndarray:
    """(L, H, T, T) -> the chosen head's (T, T), or the layer's mean over heads."""
    return weights[layer].mean(axis=0) if head == MEAN else weights[layer, head]


def head_name(layer: int, head: int) -> str:
    return f"layer {layer + 1}, " + ("mean of heads" if head == MEAN else f"head {head + 1}")


def weights_page() -> None:
    st.markdown(
        "The same sentence through all-MiniLM-L6-v2 with its pretrained weights and with random ones (same shape, "
        "same tokenizer). Untrained heads spread their attention almost evenly; training is what makes the "
        "patterns you see elsewhere: attention to the previous token, to [SEP], to related words."
    )
    if st.session_state[state.MODEL] not in TWINS:
        st.info("This comparison is for the MiniLM pair: pick all-MiniLM-L6-v2 (pretrained or random) in the sidebar.")
        st.stop()
    chosen = pick_attention("compare")
    _, text, max_tokens = state.sidebar(st.session_state)

    def drawn(key: str) -> np.ndarray:  # same tokenizer, so the sidebar model's labels fit both
        if chosen.groups is not None:
            return cached.get_word_level(key, text, max_tokens, chosen.kind)[0]
        return cached.get_trace(key, text, max_tokens).attention(chosen.kind).weights

    weights = {key: drawn(key) for key in TWINS}
    layer, head = heads(*weights["minilm"].shape[:2])
    columns = st.columns(2)
    for column, key in zip(columns, TWINS, strict=True):
        title = f"{cached.described(key).title}: {head_name(layer, head)}"
        figure = head_heatmap(one(weights[key], layer, head), chosen.queries, chosen.keys, title)
        chart(figure, f"compare_{key}", column)
    st.subheader("Entropy of every head")
    st.caption("How spread out each head's attention is (in nats): random heads sit near the maximum, log(tokens).")
    columns = st.columns(2)
    for column, key in zip(columns, TWINS, strict=True):
        stats, labels = cached.get_statistics(key, text, max_tokens, "encoder_self")
        top = float(np.log(len(chosen.trace.source_tokens)))
        grid = statistic_grid(stats["entropy"], labels, "entropy", zrange=(0.0, top))
        column.markdown(f"**{cached.described(key).title}**")
        chart(grid, f"compare_entropy_{key}", column)


def set_pair() -> None:
    pair = st.session_state.compare_pair
    if pair is not None:
        state.keep(st.session_state, state.TEXT, MINIMAL_PAIRS[pair][0])
        st.session_state.compare_b = MINIMAL_PAIRS[pair][1]
    st.session_state.compare_pair = None


def sentences_page() -> None:
    st.markdown(
        "Sentence A is the sidebar's; type sentence B below, or pick a minimal pair. Both go through the "
        "sidebar's model; the difference A - B is drawn on a red-blue scale centred at zero (red: A attends "
        "more). Encoder self-attention."
    )
    model, text, max_tokens = state.sidebar(st.session_state)
    pairs = dict(MINIMAL_PAIRS)
    st.session_state.setdefault("compare_b", pairs.get(text, text))
    st.selectbox(
        "Minimal pairs",
        [None, *range(len(MINIMAL_PAIRS))],
        format_func=lambda i: "choose a pair..." if i is None else " / ".join(MINIMAL_PAIRS[i]),
        placeholder="choose a pair...",
        key="compare_pair",
        on_change=set_pair,
    )
    other = st.text_input("Sentence B", max_chars=state.MAX_TEXT, key="compare_b")
    result_a = current_trace()
    try:
        result_b = cached.get_trace(model, other, max_tokens)
    except TokenizeError as e:
        st.info("Sentence B: " + markdown_literal(str(e)))
        st.stop()
    by_word = st.radio("Line up", ["position", "word"], horizontal=True, key="compare_align") == "word"
    a, b = result_a.encoder_self.weights, result_b.encoder_self.weights
    labels_a, labels_b = result_a.source_tokens, result_b.source_tokens
    if by_word:
        a, labels_a, _ = cached.get_word_level(model, text, max_tokens, "encoder_self")
        b, labels_b, _ = cached.get_word_level(model, other, max_tokens, "encoder_self")
        alignment = compare.by_word(labels_a, labels_b)
    else:
        alignment = compare.by_position(labels_a, labels_b)
    if alignment.unmatched_a or alignment.unmatched_b:
        st.caption(
            "Not lined up (left out of the difference): "
            + markdown_literal(
                f"A: {', '.join(alignment.unmatched_a) or 'nothing'}; "
                f"B: {', '.join(alignment.unmatched_b) or 'nothing'}."
            )
        )
    if not alignment.a:
        st.info("Nothing in A lines up with B.")
        st.stop()
    difference = compare.difference(a, b, alignment)  # (L, H, N, N)
    worst = np.abs(difference).max(axis=(-2, -1))
    st.subheader("Which heads changed most")
    cells = np.array([[f"{d:.3g}" for d in row] for row in worst], dtype=object)
    chart(statistic_grid(worst, cells, "max |A - B|"), "compare_changed")
    layer, head = heads(*a.shape[:2])
    columns = st.columns(2)
    chart(
        head_heatmap(one(a, layer, head), labels_a, labels_a, f"A: {head_name(layer, head)}"), "compare_a", columns[0]
    )
    chart(
        head_heatmap(one(b, layer, head), labels_b, labels_b, f"B: {head_name(layer, head)}"),
        "compare_b_map",
        columns[1],
    )
    labels = alignment.labels
    title = f"A - B: {head_name(layer, head)}, lined up by {'word' if by_word else 'position'}"
    chart(head_heatmap(one(difference, layer, head), labels, labels, title, diverging=True), "compare_difference")


if mode == "sentences":
    sentences_page()
else:
    weights_page()
