"""Q/K/V step by step on one page: one head's computation for one query token, with the model's own numbers."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.views import qkv as qkv_view
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import page_header

page_header("Q, K, V step by step")
st.markdown(
    "One head, one query token, every number taken from the model's own forward pass: project the input to "
    "q, k and v, score the query against every key, scale, mask, softmax, and mix the values."
)
focus = qkv_view.focus()
qkv_view.projections(focus)
qkv_view.scores(focus)
qkv_view.heads(focus)
qkv_view.download(focus)
token_legend()  # the marks its token labels use
