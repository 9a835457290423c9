"""What every page does first: fetch the trace for the sidebar's model and sentence, and pick an attention kind."""

from __future__ import annotations

import streamlit as st

from explorer import cached, state
from explorer.trace import Trace
from models.tokenize import TokenizeError

KIND_NAMES = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder masked self-attention",
    "cross": "Encoder-decoder (cross) attention",
}


def current_trace() -> Trace:
    """The trace for the sidebar's choices; a friendly message and a stop when the text cannot be used."""
    try:
        result = cached.get_trace(
            st.session_state[state.MODEL], st.session_state[state.TEXT], int(st.session_state[state.MAX_TOKENS])
        )
    except TokenizeError as e:
        st.info(str(e))
        st.stop()
    if result.truncated:
        st.warning(f"The input was cut to {len(result.source_tokens)} tokens ({result.truncated} tokens dropped).")
    return result


def pick_kind(result: Trace, key: str) -> str:
    """Encoder self-attention for an encoder-only model; otherwise a choice of the three kinds."""
    if len(result.kinds) == 1:
        return result.kinds[0]
    return st.radio("Attention", result.kinds, format_func=KIND_NAMES.get, horizontal=True, key=key)


def pick_layer(n_layers: int, key: str, container=st) -> int:
    return container.selectbox("Layer", range(n_layers), format_func=lambda i: f"layer {i + 1}", key=key)


def token_label(tokens: tuple[str, ...], i: int) -> str:
    """'3: the' -- position first, so repeated tokens stay distinct in a selectbox (streamlit shows text, no HTML)."""
    return f"{i}: {tokens[i]}"
