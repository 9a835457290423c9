"""Widget callbacks and format functions: the sidebar's, and the pages' that would otherwise hold a page's globals.

Streamlit keeps a session's widget callbacks and format functions until its next run, and a disconnected session
for `server.disconnectedSessionTTL`. A function defined in a script holds that script's globals (the model, the
trace) for as long, past the shelf and the store that bound them; functions defined here hold this module only.
"""

from __future__ import annotations

import functools

import streamlit as st

from explorer import cached, state
from explorer.compare import MINIMAL_PAIRS
from models import registry


def _keep_widget(key: str, widget_key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def bound(key: str) -> dict:
    """Widget arguments that keep its value under `key` too (widget state is dropped on page switches)."""
    widget_key = state.widget(key)
    return {"key": widget_key, "on_change": functools.partial(_keep_widget, key, widget_key)}


def use_example() -> None:
    if st.session_state[state.EXAMPLE]:
        state.keep(st.session_state, state.TEXT, st.session_state[state.EXAMPLE])


def example_label(example: str) -> str:
    return example or "choose..."


def loadable(key: str) -> tuple[registry.LoadedModel | None, str]:
    """(the model, "") or (None, what is wrong with its files)."""
    try:
        return cached.model(key), ""
    except registry.ModelLoadError as e:
        return None, str(e)


def change_model() -> None:
    """An example of the old model that the new one cannot read becomes the new one's; max tokens shrinks to fit."""
    old, _ = loadable(st.session_state[state.MODEL])
    st.session_state[state.MODEL] = st.session_state[state.widget(state.MODEL)]
    st.session_state[state.EXAMPLE] = ""
    new, _ = loadable(st.session_state[state.MODEL])
    if new is None:
        return
    examples = old.examples if old is not None else ()
    if st.session_state[state.TEXT] in examples and not new.can_read(st.session_state[state.TEXT]):
        state.keep(st.session_state, state.TEXT, new.example)
    if st.session_state[state.MAX_TOKENS] > new.max_tokens:
        state.keep(st.session_state, state.MAX_TOKENS, new.max_tokens)


def pair_label(pair: int | None) -> str:
    return "choose a pair..." if pair is None else " / ".join(MINIMAL_PAIRS[pair])


def set_pair() -> None:
    """Compare sentences: a minimal pair becomes sentences A (the sidebar's) and B; the picker resets."""
    pair = st.session_state.compare_pair
    if pair is not None:
        state.keep(st.session_state, state.TEXT, MINIMAL_PAIRS[pair][0])
        st.session_state.compare_b = MINIMAL_PAIRS[pair][1]
    st.session_state.compare_pair = None
