"""Q/K/V step by step on one page: one head's computation for one query token, with the model's own numbers."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.pages import _qkv
from attention_explorer.explorer.pages._shared import page_header, token_legend

page_header("Q, K, V step by step")
st.markdown(
    "One head, one query token, every number taken from the model's own forward pass: project the input to "
    "q, k and v, score the query against every key, scale, mask, softmax, and mix the values."
)
focus = _qkv.focus()
_qkv.projections(focus)
_qkv.scores(focus)
_qkv.heads(focus)
_qkv.download(focus)
token_legend()  # the marks its token labels use
