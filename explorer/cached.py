"""The only Streamlit cache wrappers: models shared read-only by every session, traces keyed by plain values."""

from __future__ import annotations

import streamlit as st

from explorer import positions, trace
from models import registry


@st.cache_resource(max_entries=4, show_spinner="Loading model...")
def get_model(name: str) -> registry.LoadedModel:
    return registry.load(name)


@st.cache_data(max_entries=16, show_spinner="Running the model...")
def get_trace(model_name: str, text: str, max_tokens: int) -> trace.Trace:
    return trace.run(get_model(model_name), text, max_tokens)


@st.cache_data(max_entries=4, show_spinner=False)
def get_positions(model_name: str) -> dict:
    return positions.tables(get_model(model_name))
