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


def abbreviated(token: str, chars: int) -> str:
    """`token` cut to `chars` characters, its last one an ellipsis, where it is longer (the whole token goes on the
    hover). Cut before escaping: an ellipsis never splits "&amp;"."""
    return token if len(token) <= chars else token[: max(chars - 1, 1)] + "\u2026"


def position_label(i: int, token: str) -> str:
    """'3: the': position first, so repeated tokens stay distinct wherever a token names a choice or a cell."""
    return f"{i}: {token}"


def row_reads(i: int, read: str, verb: str, written: str) -> str:
    """ "position 7: reads '7: ␣of', predicts '8: ␣the'": a row named by the position it reads, numbered as the
    heatmaps' ticks are (position_label), the one numbering every sentence and chart uses; what it writes is the
    next position's token."""
    return f"position {i}: reads {position_label(i, read)!r}, {verb} {position_label(i + 1, written)!r}"


def position_labels(labels: Sequence[str], start: int = 0) -> list[str]:
    """'3: the' for each label, counting from `start` (a region of a long map keeps the positions of the text)."""
    return [position_label(i, label) for i, label in enumerate(labels, start)]


COLORBAR_LABEL_PX = 24  # a colour bar's tick label at 16 px (presenter mode) and the gap to the next
X_AXIS_PX = 45  # a strip chart's x axis under the plot: tick labels and the "dimension" title


def strip_colorbar(limit: float, height: int, margins: int) -> dict:
    """A thin strip chart's colour bar: its ends and 0 where the plot is tall enough for three labels, else its two
    ends (Plotly's own ticks, every 0.5 or 1, overlap on a bar a few rows tall). `height` is the figure's, `margins`
    its top and bottom margins together."""
    plot = height - margins - X_AXIS_PX
    values = [-limit, 0.0, limit] if plot >= 3 * COLORBAR_LABEL_PX else [-limit, limit]
    return {"tickmode": "array", "tickvals": values, "ticktext": [f"{v:.2g}" for v in values]}
