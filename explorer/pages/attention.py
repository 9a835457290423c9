"""Attention heatmap: one layer and head of the chosen model on the sidebar's sentence."""

from __future__ import annotations

import streamlit as st

from explorer import cached, state
from explorer.figures.heatmap import head_heatmap
from models.tokenize import TokenizeError

st.header("Attention heatmap")
st.markdown(
    r"Each head computes $\mathrm{softmax}\left(QK^\top / \sqrt{d_k}\right)V$ (Vaswani et al. 2017, eq. 1). "
    "Row *i* shows how query token *i* spreads one unit of attention over the key tokens; every row sums to 1."
)

try:
    result = cached.get_trace(
        st.session_state[state.MODEL], st.session_state[state.TEXT], st.session_state[state.MAX_TOKENS]
    )
except TokenizeError as e:
    st.info(str(e))
    st.stop()

if result.truncated:
    st.warning(f"The input was cut to {len(result.source_tokens)} tokens ({result.truncated} tokens dropped).")

kind = "encoder_self"
if len(result.kinds) > 1:
    names = {
        "encoder_self": "Encoder self-attention",
        "decoder_self": "Decoder masked self-attention",
        "cross": "Encoder-decoder (cross) attention",
    }
    kind = st.radio("Attention", result.kinds, format_func=names.get, horizontal=True, key="attention_kind")
attention = result.attention(kind)
left, right = st.columns(2)
layer = left.selectbox(
    "Layer", range(attention.n_layers), format_func=lambda i: f"layer {i + 1}", key="attention_layer"
)
head = right.selectbox("Head", range(attention.n_heads), format_func=lambda i: f"head {i + 1}", key="attention_head")
queries, keys = result.tokens_for(kind)
st.plotly_chart(
    head_heatmap(attention.weights[layer, head], queries, keys, f"Layer {layer + 1}, head {head + 1}"),
    key="attention_heatmap",
)
