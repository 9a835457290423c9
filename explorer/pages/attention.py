"""Attention heatmap: one layer and head (or their mean) of the chosen model on the sidebar's sentence."""

from __future__ import annotations

import streamlit as st

from explorer import state
from explorer.figures.heatmap import head_heatmap
from explorer.figures.model_view import LAYER_CELLS, layer_heads
from explorer.pages._shared import chart, pick_attention, pick_head, pick_layer
from explorer.wording import head_patterns

MEAN = -1

st.header("Attention heatmap")
st.markdown(
    r"Each head computes $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)V$ (Vaswani et al. 2017, eq. 1); the "
    r"heatmap draws the attention weights $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)$, before they "
    "multiply V. Row *i* shows how query token *i* (attending) spreads one unit of attention over the key tokens "
    "(attended to); every row sums to 1."
)
st.caption(head_patterns(st.session_state[state.MODEL]))

chosen = pick_attention("attention")
attention = chosen.attention
left, right = st.columns(2)
layer = pick_layer(attention.n_layers, "attention_layer", left)
head = pick_head(attention.n_heads, "attention_head", right, extra=(MEAN,), extra_name="mean over heads")
if head == MEAN:
    weights, title = (
        chosen.weights[layer].mean(axis=0),
        f"Layer {layer + 1}, mean over {attention.n_heads} heads",
    )
else:
    weights, title = chosen.weights[layer, head], f"Layer {layer + 1}, head {head + 1}"
chart(head_heatmap(weights, chosen.queries, chosen.keys, title), "attention_heatmap")

st.subheader(f"All heads of layer {layer + 1}")
st.caption(
    f"Small multiples, each scaled to its own maximum; long inputs are averaged into at most "
    f"{LAYER_CELLS} x {LAYER_CELLS} cells."
)
chart(layer_heads(chosen.weights[layer]), "attention_layer_heads")
