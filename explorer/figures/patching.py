"""Figures for activation patching: the residual stream's grid (layer x position) and one head position by position,
each cell the share of the logit difference that copying the clean run's activation there restores. Pure: arrays
and labels in. (The layer x head grid is experiments.head_grids.)"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.heatmap import titled, token_axis
from attention_explorer.explorer.figures.labels import escape_tokens, position_labels

SHARE = "share restored"
CELL_TEXT = 24  # positions up to which each cell writes its share
CHANGED = "▲"  # marks a changed token on the position axis


def marked_tokens(tokens: Sequence[str], changed: Sequence[int]) -> list[str]:
    """The tokens, escaped, each changed one marked."""
    shown = escape_tokens(tokens)
    return [f"{CHANGED}{t}" if i in set(changed) else t for i, t in enumerate(shown)]


def _scale(values: np.ndarray) -> dict:
    """Diverging, centred at 0, from -top to top: at least 1, so a share of 1 is the same red on every grid."""
    finite = values[np.isfinite(values)]
    return style.diverging(max(1.0, float(np.abs(finite).max()) if finite.size else 1.0))


def residual_grid(shares: np.ndarray, tokens: Sequence[str], changed: Sequence[int], title: str = "") -> go.Figure:
    """(L + 1, T) shares: row 0 the embedding, row l the state after layer l; a column per position, the changed
    tokens marked."""
    n_rows, n_tokens = shares.shape
    labels = marked_tokens(tokens, changed)
    x = position_labels(labels)
    y = ["embedding", *(f"after layer {i}" for i in range(1, n_rows))]
    text = [[f"{v:.2f}" for v in row] for row in shares] if n_tokens <= CELL_TEXT else None
    figure = go.Figure(
        go.Heatmap(
            z=shares,
            x=x,
            y=y,
            text=text,
            texttemplate="%{text}" if text else None,
            textfont={"size": 12},
            colorbar={"title": {"text": SHARE}},
            hovertemplate="%{y}, %{x}<br>share restored %{z:.3f}<extra></extra>",
            xgap=1,
            ygap=1,
            **_scale(shares),
        )
    )
    figure.update_layout(
        height=max(300, min(26 * n_rows, 900) + 170),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        xaxis=token_axis(labels, "position (▲: changed in the corrupted text)", names=x, tickangle=-45),
        yaxis={"autorange": "reversed", "automargin": True, "title": {"text": "residual stream"}},
        **({"title": titled(html.escape(title, quote=False))} if title else {}),
    )
    return figure


def position_bars(shares: np.ndarray, tokens: Sequence[str], changed: Sequence[int], title: str = "") -> go.Figure:
    """(T,) one head's output copied at one position at a time: a bar per position."""
    labels = marked_tokens(tokens, changed)
    x = position_labels(labels)
    figure = go.Figure(
        go.Bar(
            x=x,
            y=shares,
            marker_color=["#2166ac" if v >= 0 else "#b2182b" for v in shares],
            hovertemplate="%{x}<br>share restored %{y:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        height=340,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        xaxis=token_axis(labels, "position whose head output is copied (▲: changed)", names=x, tickangle=-45),
        yaxis={"title": {"text": SHARE}, "automargin": True, "zeroline": True},
        **({"title": titled(html.escape(title, quote=False))} if title else {}),
    )
    return figure
