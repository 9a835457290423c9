"""Attention heatmap: one layer and head (or their mean) of the chosen model on the sidebar's sentence."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from explorer import cached, drill, state
from explorer.figures.heatmap import head_heatmap
from explorer.figures.model_view import LAYER_CELLS, layer_heads
from explorer.heads import MEAN, head_or_mean, head_title
from explorer.pages._shared import QKV_PAGE, chart, drill_to_pickers, pick_attention, pick_layer_head
from explorer.wording import head_patterns

st.header("Attention heatmap")
st.markdown(
    r"Each head computes $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)V$ (Vaswani et al. 2017, eq. 1); the "
    r"heatmap draws the attention weights $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)$, before they "
    "multiply V. Row *i* shows how query token *i* (attending) spreads one unit of attention over the key tokens "
    "(attended to); every row sums to 1."
)
st.caption(head_patterns(st.session_state[state.MODEL]))

chosen = pick_attention(state.ATTENTION)
attention = chosen.attention
start = cached.get_start(*state.sidebar(st.session_state), chosen.kind)
layer, head = pick_layer_head(
    attention.n_layers, attention.n_heads, state.ATTENTION, mean=True, layer=start.layer, head=start.head
)
weights, title = head_or_mean(chosen.weights, layer, head), head_title(layer, head, attention.n_heads).capitalize()


def step_through(point: Mapping) -> None:
    """A clicked row: that query token, this layer and head (the first head for the mean) on the Q/K/V page."""
    row = drill.token_of(point)
    if row is None:
        return
    token = row if chosen.groups is None else chosen.groups[0][row][0]  # a word: its first piece
    st.session_state["qkv_kind"] = chosen.kind
    state.choose(st.session_state, "qkv_layer", layer)
    state.choose(st.session_state, "qkv_head", 0 if head == MEAN else head)
    state.choose(st.session_state, state.QKV_QUERY, token)
    st.session_state[state.DRILL_TO] = QKV_PAGE


st.caption("Click a row to follow that query token through Q, K and V step by step.")
figure = head_heatmap(weights, chosen.queries, chosen.keys, title, clickable=True)
chart(figure, "attention_heatmap", on_click=step_through)

st.subheader(f"All heads of layer {layer + 1}")
st.caption(
    f"Small multiples, each scaled to its own maximum; long inputs are averaged into at most "
    f"{LAYER_CELLS} x {LAYER_CELLS} cells. Click one to show it above."
)
chart(
    layer_heads(chosen.weights[layer], layer),
    "attention_layer_heads",
    on_click=drill_to_pickers(state.ATTENTION_LAYER, state.ATTENTION_HEAD),
)
