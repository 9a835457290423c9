"""Attention explorer: Streamlit entry point (shared sidebar, then the chosen page)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from installed packages and local folders only

import streamlit as st  # noqa: E402

from explorer import cached, state  # noqa: E402
from models import registry  # noqa: E402

PAGES = Path(__file__).parent / "explorer" / "pages"

st.set_page_config(page_title="Attention explorer", layout="wide")

st.session_state.setdefault(state.MODEL, state.DEFAULT_MODEL)
st.session_state.setdefault(state.TEXT, state.DEFAULT_TEXT)
st.session_state.setdefault(state.MAX_TOKENS, state.DEFAULT_MAX_TOKENS)

with st.sidebar:
    st.title("Attention explorer")
    st.selectbox("Model", list(registry.MODELS), format_func=lambda k: registry.MODELS[k].title, key=state.MODEL)
    st.caption(registry.MODELS[st.session_state[state.MODEL]].description)
    st.text_input("Sentence", key=state.TEXT, max_chars=5000, help="Press Enter to run the model.")
    loaded = cached.get_model(st.session_state[state.MODEL])
    st.number_input("Max tokens", min_value=3, max_value=loaded.max_tokens, step=1, key=state.MAX_TOKENS)

st.navigation([st.Page(PAGES / "attention.py", title="Attention heatmap", icon=":material/grid_on:")]).run()
