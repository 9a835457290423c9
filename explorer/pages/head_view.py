"""Head view: lines from each query token to the key tokens it attends to, one colour per head."""

from __future__ import annotations

import streamlit as st

from explorer.figures.head_view import head_view
from explorer.pages._shared import current_trace, pick_kind, pick_layer, token_label

st.header("Head view")
st.latex(r"\mathrm{head}_i = \mathrm{softmax}\!\left(\frac{Q W^Q_i (K W^K_i)^\top}{\sqrt{d_k}}\right) V W^V_i")
st.markdown(
    "Queries on the left, keys on the right. A line's opacity is the attention weight, its colour the head; each "
    "query shows its strongest keys (weights under 0.05 are left out). Click a head in the legend to hide it, or "
    "pick a token to see only its lines."
)

result = current_trace()
kind = pick_kind(result, "head_kind")
attention = result.attention(kind)
queries, keys = result.tokens_for(kind)
left, middle = st.columns(2)
layer = pick_layer(attention.n_layers, "head_layer", left)
focus = middle.selectbox(
    "Highlight token",
    [None, *range(len(queries))],
    format_func=lambda i: "all tokens" if i is None else token_label(queries, i),
    key="head_focus",
)
heads = st.multiselect(
    "Heads",
    list(range(attention.n_heads)),
    default=list(range(min(4, attention.n_heads))),
    format_func=lambda h: f"head {h + 1}",
    key="head_heads",
)
if not heads:
    st.info("Pick at least one head.")
    st.stop()
st.plotly_chart(head_view(attention.weights[layer], queries, keys, heads, focus), key="head_lines")
