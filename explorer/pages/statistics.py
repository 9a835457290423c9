"""Head statistics: what each head does on this sentence, as numbers, a layer x head grid and a label."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from explorer import analysis, cached, state
from explorer.figures.statistics import statistic_grid
from explorer.pages._shared import (
    chart,
    drill_to_attention,
    open_in_attention,
    pick_attention,
    pick_head,
    pick_layer,
)

st.header("Head statistics")
st.markdown(
    "For every head on your sentence: how spread out its attention is (entropy), how far it looks (mean "
    "distance), and how much of it goes to the previous, next or same position, to [CLS], [SEP] or punctuation. "
    "Each head gets a plain label from the first rule that holds (a share of at least 0.5, or an entropy of at "
    "least 75% of the maximum for *broad*). Attention is not explanation: these describe where weight goes, "
    "not why the model decides anything."
)

chosen = pick_attention("stats")
attention = chosen.attention
words = chosen.groups is not None  # previous / next then mean the previous and next word
stats, labels = cached.get_statistics(*state.sidebar(st.session_state), chosen.kind, words)

name = st.selectbox("Statistic", list(analysis.STATISTICS), key="stats_statistic")
st.caption(analysis.STATISTICS[name])
chart(statistic_grid(stats[name], labels, name), "stats_grid", on_click=drill_to_attention(chosen.kind, words))
st.caption("Click a cell of the grid to open that head in the attention heatmap.")

rows = [
    {"layer": layer + 1, "head": head + 1, "label": labels[layer, head]}
    | {k: float(v[layer, head]) for k, v in stats.items()}
    for layer in range(attention.n_layers)
    for head in range(attention.n_heads)
]
st.dataframe(pd.DataFrame(rows), hide_index=True, key="stats_table")
st.caption("Click a column header to sort.")

left, right, go_col = st.columns([2, 2, 2], vertical_alignment="bottom")
start = cached.get_start(*state.sidebar(st.session_state), chosen.kind)
layer = pick_layer(attention.n_layers, "stats_layer", left, start.layer)
head = pick_head(attention.n_heads, "stats_head", right, index=start.head)
if go_col.button(f"Open layer {layer + 1}, head {head + 1} in the attention heatmap", key="stats_open"):
    open_in_attention(chosen.kind, layer, head, words)
