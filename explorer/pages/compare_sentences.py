"""Compare sentences: sentence A (the sidebar's) beside sentence B through the same model, and their difference."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, compare_runs, state
from attention_explorer.explorer.app.callbacks import pair_label, set_pair
from attention_explorer.explorer.app.waiting import ask_first
from attention_explorer.explorer.figures.heatmap import fits_half_width, head_heatmap
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import compare, starting
from attention_explorer.explorer.run.compare import MINIMAL_PAIRS
from attention_explorer.explorer.run.heads import head_or_mean, head_title
from attention_explorer.explorer.views.chart import chart, drill_to_pickers
from attention_explorer.explorer.views.current import current_trace, token_legend
from attention_explorer.explorer.views.frame import stop
from attention_explorer.explorer.views.pickers import kind_name, pick_layer_head
from attention_explorer.explorer.views.zoom import drawn_window, head_map, largest_cell, window_caption
from attention_explorer.models.tokenize import TokenizeError

OVERVIEW = 256  # A and B side by side past this many tokens: block means (the difference stays per token)

st.header("Compare: sentence A vs sentence B")


st.markdown(
    "Sentence A is the sidebar's; type sentence B below, or pick a minimal pair. Both go through the "
    "sidebar's model; the difference A - B is drawn on a red-blue scale centred at zero (red: A attends "
    "more)."
)
sidebar = state.sidebar(st.session_state)
kind = cached.model(sidebar.model).family.kinds[0]  # the attention that reads the text: no decoding needed
st.caption(f"Drawn: {kind_name(kind)}.")
# B starts one word away from A (its minimal pair, or one swapped word), and follows A until someone types in it
if state.COMPARE_B not in st.session_state or state.at_start(st.session_state, state.COMPARE_B):
    state.start(st.session_state, state.COMPARE_B, cached.get_variant(sidebar))
st.selectbox(
    "Minimal pairs",
    [None, *range(len(MINIMAL_PAIRS))],
    format_func=pair_label,
    placeholder="choose a pair...",
    key=state.COMPARE_PAIR,
    on_change=set_pair,
)
other = st.text_input("Sentence B", max_chars=state.MAX_TEXT, key=state.COMPARE_B)
result_a = current_trace(kind)
by_word = st.radio("Line up", ["position", "word"], horizontal=True, key="compare_align") == "word"
try:
    run_b, every_head = compare_runs.comparison_seconds(sidebar, other, kind, by_word)
except TokenizeError as e:
    st.info("Sentence B: " + markdown_literal(str(e)))
    st.stop()
asked = st.container()
n_layers, n_heads = result_a.attention(kind).weights.shape[:2]
labels_a = result_a.readable(result_a.source_tokens)
what = " ".join(
    part
    for part, seconds in (
        ("Sentence B is one more run of the model over the whole text.", run_b),
        (f"Finding the heads that changed most reads all {n_layers} layers of A and of B.", every_head),
    )
    if seconds
)
if not ask_first(what, run_b + every_head, "Run sentence B and compare every head", "compare_run", asked):
    # meanwhile sentence A, from its own run: the head it opens on, or any other
    start = cached.get_start(sidebar, kind)
    layer, head = pick_layer_head(n_layers, n_heads, "compare", mean=True, layer=start.layer, head=start.head)
    which = head_title(layer, head, n_heads)
    a, window = result_a.attention(kind).weights, drawn_window(result_a.attention(kind).windows, kind, layer)
    a_map = head_heatmap(head_or_mean(a, layer, head), labels_a, labels_a, f"A: {which}", overview=OVERVIEW, **window)
    chart(a_map, "compare_a")
    window_caption(result_a.attention(kind).windows, layer, len(result_a.source_tokens))
    stop()
sentence_b = sidebar.with_text(other)
result_b = compare_runs.get_second_trace(sentence_b, kind)
a, b = result_a.attention(kind).weights, result_b.attention(kind).weights
labels_b = result_b.readable(result_b.source_tokens)
if by_word:
    a, labels_a, _ = cached.get_word_level(sidebar, kind)
    b, labels_b, _ = cached.get_word_level(sentence_b, kind, result_b)
    alignment = compare.by_word(labels_a, labels_b)
else:
    alignment = compare.by_position(labels_a, labels_b)
if compare.left_out(alignment):
    st.caption("Not lined up (left out of the difference): " + markdown_literal(compare.left_out(alignment)))
if not alignment.a:
    st.info("Nothing in A lines up with B.")
    st.stop()
st.subheader("Which heads changed most")
worst = compare_runs.get_changed(sidebar, other, kind, by_word, a, b, alignment)
chart(
    statistic_grid(worst, compare.cell_text(worst), "max |A - B|", title="Largest |A - B| weight per head"),
    "compare_changed",
    on_click=drill_to_pickers("compare_layer", "compare_head"),
)
st.caption("Click a cell to compare that head below; it opens on the head that changed most.")
most = starting.largest(worst)
layer, head = pick_layer_head(n_layers, n_heads, "compare", mean=True, layer=most[0], head=most[1])
which = head_title(layer, head, n_heads)
windows = result_a.attention(kind).windows
window_caption(windows, layer, len(result_a.source_tokens), words=by_word)  # by word: groups, not drawn
window = drawn_window(windows, kind, layer, words=by_word)  # A, B and A - B by position: the same positions
# side by side while every key's label fits half the page; past that one under the other, each key still named
narrow = fits_half_width(max(len(labels_a), len(labels_b)))
columns = st.columns(2) if narrow else (st.container(), st.container())
chart(
    head_heatmap(
        head_or_mean(a, layer, head), labels_a, labels_a, f"A: {which}", narrow=narrow, overview=OVERVIEW, **window
    ),
    "compare_a",
    columns[0],
)
chart(
    head_heatmap(
        head_or_mean(b, layer, head), labels_b, labels_b, f"B: {which}", narrow=narrow, overview=OVERVIEW, **window
    ),
    "compare_b_map",
    columns[1],
)
labels = alignment.labels
title = f"A - B: {which}, lined up by {'word' if by_word else 'position'}"
changes = compare.head_difference(a, b, alignment, layer, head)  # (N, N) float64, from one layer of each
head_map(changes, labels, labels, title, "compare_difference", largest_cell(changes), diverging=True, **window)
token_legend()  # the marks its token labels use
