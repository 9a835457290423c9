"""Attention heatmap: one layer and head (or their mean) of the chosen model on the sidebar's sentence."""

from __future__ import annotations

import numpy as np
import streamlit as st

from explorer.figures.heatmap import head_heatmap
from explorer.figures.model_view import model_view
from explorer.pages._shared import current_trace, pick_kind, pick_layer

MEAN = -1

st.header("Attention heatmap")
st.markdown(
    r"Each head computes $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)V$ (Vaswani et al. 2017, eq. 1). "
    "Row *i* shows how query token *i* (attending) spreads one unit of attention over the key tokens (attended "
    "to); every row sums to 1. Different heads learn different patterns: some look at the previous token, some "
    "at punctuation or [SEP], some spread broadly."
)

result = current_trace()
kind = pick_kind(result, "attention_kind")
attention = result.attention(kind)
left, right = st.columns(2)
layer = pick_layer(attention.n_layers, "attention_layer", left)
head = right.selectbox(
    "Head",
    [*range(attention.n_heads), MEAN],
    format_func=lambda i: "mean over heads" if i == MEAN else f"head {i + 1}",
    key="attention_head",
)
queries, keys = result.tokens_for(kind)
if head == MEAN:
    weights, title = attention.weights[layer].mean(axis=0), f"Layer {layer + 1}, mean over {attention.n_heads} heads"
else:
    weights, title = attention.weights[layer, head], f"Layer {layer + 1}, head {head + 1}"
st.plotly_chart(head_heatmap(weights, queries, keys, title), key="attention_heatmap")

st.subheader(f"All heads of layer {layer + 1}")
st.caption("Small multiples, each scaled to its own maximum; long inputs are averaged into at most 64 x 64 cells.")
size = int(np.clip(max(len(queries), len(keys)), 1, 64))
st.plotly_chart(model_view(attention.weights[layer : layer + 1], size=size), key="attention_layer_heads")
