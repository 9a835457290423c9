"""What every page does first: fetch the trace for the sidebar's model and sentence, and pick what to look at."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from explorer import cached, state
from explorer.figures.labels import position_label
from explorer.trace import AttentionTrace, Trace
from models.tasks import UnknownWordError
from models.tokenize import TokenizeError

KIND_NAMES = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder masked self-attention",
    "cross": "Encoder-decoder (cross) attention",
}


@dataclass(frozen=True)
class Chosen:
    """The trace, the attention kind picked on this page, and that kind's query and key tokens."""

    trace: Trace
    kind: str
    attention: AttentionTrace
    queries: tuple[str, ...]
    keys: tuple[str, ...]


def current_trace() -> Trace:
    """The trace for the sidebar's choices; a friendly message and a stop when the text cannot be used."""
    try:
        result = cached.get_trace(*state.sidebar(st.session_state))
    except TokenizeError as e:
        st.info(str(e))
        if isinstance(e, UnknownWordError):
            words = cached.model(st.session_state[state.MODEL]).tokenizer.known
            with st.expander(f"The {len(words)} words this model knows"):
                st.text(", ".join(words))
        st.stop()
    if result.truncated:
        st.warning(f"The input was cut to {len(result.source_tokens)} tokens ({result.truncated} tokens dropped).")
    return result


def pick_attention(prefix: str) -> Chosen:
    """The current trace and an attention kind (a radio `{prefix}_kind` when the model has more than one)."""
    result = current_trace()
    kind = result.kinds[0]
    if len(result.kinds) > 1:
        kind = st.radio("Attention", result.kinds, format_func=KIND_NAMES.get, horizontal=True, key=f"{prefix}_kind")
    queries, keys = result.tokens_for(kind)
    return Chosen(result, kind, result.attention(kind), queries, keys)


def pick_layer(n_layers: int, key: str, container=st, index: int = 0) -> int:
    return container.selectbox("Layer", range(n_layers), index=index, format_func=lambda i: f"layer {i + 1}", key=key)


def pick_head(
    n_heads: int, key: str, container=st, extra: tuple[int, ...] = (), extra_name: str = "", index: int = 0
) -> int:
    """A head, numbered from 1; `extra` adds non-head choices (such as the mean) named `extra_name`."""
    return container.selectbox(
        "Head",
        [*range(n_heads), *extra],
        index=index,
        format_func=lambda i: extra_name if i in extra else f"head {i + 1}",
        key=key,
    )


def pick_token(tokens: tuple[str, ...], label: str, key: str, container=st, allow_all: bool = False) -> int | None:
    """A token by position ('3: the'), so repeated tokens stay distinct (streamlit shows text, no HTML)."""
    options = [None, *range(len(tokens))] if allow_all else list(range(len(tokens)))
    return container.selectbox(
        label, options, format_func=lambda i: "all tokens" if i is None else position_label(i, tokens[i]), key=key
    )


def open_in_attention(kind: str, layer: int, head: int) -> None:
    """Switch to the attention heatmap showing this kind, layer and head (its own widget keys)."""
    st.session_state["attention_kind"] = kind
    st.session_state["attention_layer"] = layer
    st.session_state["attention_head"] = head
    st.switch_page("explorer/pages/attention.py")
