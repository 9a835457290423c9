"""Forward pass step by step on one page: one token from its id to the stack's output, every number the model's own."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.lesson.model_words import forward_intro
from attention_explorer.explorer.views import forward as forward_view
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.frame import page_header

page_header("Forward pass step by step")
st.markdown(forward_intro(sidebar_family().block))  # true for this model (models.anatomy)
focus = forward_view.focus()
forward_view.embedding(focus)
forward_view.layer(focus)
forward_view.movement(focus)
token_legend()  # the marks its token labels use
