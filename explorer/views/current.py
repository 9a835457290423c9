"""The current run: the sidebar's model and the trace for its model and sentence, and where the lesson's focus opens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.run import analysis, starting
from attention_explorer.explorer.run.trace import UNKNOWN, AttentionTrace, Trace, unknown_pieces
from attention_explorer.explorer.views.frame import stop
from attention_explorer.explorer.views.unreadable import cannot_read
from attention_explorer.models.families.descriptor import Family
from attention_explorer.models.tokenize import TokenizeError


@dataclass(frozen=True)
class Chosen:
    """The trace, the attention kind picked on this page, and that kind's query and key labels (words when the
    page's word-level toggle is on; `view` merges weights to match)."""

    trace: Trace
    kind: str
    attention: AttentionTrace
    queries: tuple[str, ...]
    keys: tuple[str, ...]
    weights: np.ndarray  # (L, H, Tq, Tk) as drawn: the model's weights, or merged into words (cached)
    groups: tuple[list[list[int]], list[list[int]]] | None = None  # (query groups, key groups) at word level

    def view(self, weights: np.ndarray) -> np.ndarray:
        """Something derived from the token-level weights (a rollout, a flow), (..., Tq, Tk), at this page's level."""
        return weights if self.groups is None else analysis.merge_words(weights, *self.groups)


def sidebar_family() -> Family:
    """What the sidebar's model is (models.families.descriptor): pages decide by this, never by the model's key."""
    return cached.model(st.session_state[state.MODEL]).family


def token_legend(container=st) -> None:
    """One line under a chart whose labels are tokens: the marks readable tokens use (models.tokenize.Spelling;
    nothing for a tokenizer whose tokens show none)."""
    legend = sidebar_family().spelling.legend()
    if legend:
        container.caption(markdown_literal(legend))


def sidebar_loaded():
    """The sidebar's model (shared, read-only)."""
    return cached.model(st.session_state[state.MODEL])


def focus_start(kind: str) -> tuple[int, int, int]:
    """Where the lesson's focus opens for an attention kind on this sentence: (layer, head, query token), the
    strongest content link's (cached.get_start); every step that shows a layer, head or token starts there. Under a
    causal mask, never on the last token, which sees every key: step 5's mask would hide nothing there."""
    sidebar = state.sidebar(st.session_state)
    start = cached.get_start(sidebar, kind)
    queries = cached.get_trace_for(sidebar, kind).tokens_for(kind)[0]
    query = starting.content_query(queries, start.query)
    return start.layer, start.head, starting.masked_query(queries, query) if kind == "decoder_self" else query


def current_trace(kind: str | None = None) -> Trace:
    """The trace for the sidebar's choices (with a `kind`, the run that kind needs: cached.get_trace_for); a friendly
    message and a stop when the text cannot be used."""
    try:
        sidebar = state.sidebar(st.session_state)
        result = cached.get_trace(sidebar) if kind is None else cached.get_trace_for(sidebar, kind)
    except TokenizeError as e:
        cannot_read(e)
        stop()
    unknown = unknown_pieces(result)
    if unknown:
        pieces = f"{len(unknown)} piece{'s' if len(unknown) > 1 else ''} of the text"
        notice = f"{pieces} became {UNKNOWN}, which the model cannot tell apart: {', '.join(map(repr, unknown))}."
        st.warning(markdown_literal(notice), icon=":material/help:")
    if result.truncated:
        st.warning(f"The input was cut to {len(result.source_tokens)} tokens ({result.truncated} tokens dropped).")
    return result
