"""Text made safe to show literally: in Plotly, which renders <b>, <br> and <a> inside labels, and in Streamlit's
markdown (messages, captions), which renders **, $...$, :emoji:, :red[...] and links."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence


def escape_tokens(tokens: Sequence[str]) -> list[str]:
    """html.escape every token so '<b>' is drawn as the five characters, never as bold."""
    return [html.escape(t, quote=False) for t in tokens]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation mark: CommonMark lets each be escaped


def markdown_literal(text: str) -> str:
    """Text for st.info / st.caption / st.markdown that shows exactly as typed: each ASCII punctuation mark
    backslash-escaped, control characters written as \\xNN."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return _PUNCTUATION.sub(r"\\\1", text)


def position_label(i: int, token: str) -> str:
    """'3: the': position first, so repeated tokens stay distinct wherever a token names a choice or a cell."""
    return f"{i}: {token}"


def position_labels(labels: Sequence[str]) -> list[str]:
    return [position_label(i, label) for i, label in enumerate(labels)]
