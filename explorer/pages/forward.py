"""Forward pass step by step on one page: one token from its id to the stack's output, every number the model's own."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.views import forward as forward_view
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import page_header

page_header("Forward pass step by step")
st.markdown(
    "Follow one token through the model: its id, its embedding row, the position added, then every layer's "
    "sub-layers with their residual connection and LayerNorm. Each result is recomputed here from the model's "
    "state before it and the model's own weights, and checked against the state the model itself produced."
)
focus = forward_view.focus()
forward_view.embedding(focus)
forward_view.layer(focus)
forward_view.movement(focus)
token_legend()  # the marks its token labels use
