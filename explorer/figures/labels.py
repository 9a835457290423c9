"""Token labels made safe for Plotly, which renders <b>, <br> and <a> inside text."""

from __future__ import annotations

import html
from collections.abc import Sequence


def escape_tokens(tokens: Sequence[str]) -> list[str]:
    """html.escape every token so '<b>' is drawn as the five characters, never as bold."""
    return [html.escape(t, quote=False) for t in tokens]


def position_label(i: int, token: str) -> str:
    """'3: the': position first, so repeated tokens stay distinct wherever a token names a choice or a cell."""
    return f"{i}: {token}"


def position_labels(labels: Sequence[str]) -> list[str]:
    return [position_label(i, label) for i, label in enumerate(labels)]
