"""One attention head as a heatmap: rows are queries (attending), columns are keys (attended to)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.figures.clicks import CLICK_LAYOUT, targets
from explorer.figures.labels import escape_tokens, position_labels

HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"


def token_axis(labels: list[str], title: str, **extra: object) -> dict:
    """A category axis of position labels whose ticks show the (already escaped) tokens alone."""
    return {
        "type": "category",
        "tickmode": "array",
        "tickvals": position_labels(labels),
        "ticktext": labels,
        "title": {"text": title},
        **extra,
    }


WEIGHT_SCALE = {
    "zmin": 0,
    "zmax": 1,
    "colorscale": "Blues",
    "colorbar": {"title": {"text": "weight"}},
    "hovertemplate": HOVER,
}
CLICK_CELLS = 4096  # up to this many cells (64 x 64 tokens) a heatmap's rows are click targets: one marker a cell
CLICK_HOVER = "query %{y}<br>key %{x}<br>weight %{customdata[2]:.4f}<extra>click: this query step by step</extra>"
DIFFERENCE_HOVER = "query %{y}<br>key %{x}<br>difference %{z:.4g}<extra></extra>"


def _diverging_scale(z: np.ndarray) -> dict:
    limit = float(np.abs(z).max()) if z.size else 0.0
    limit = limit or 1e-12  # all zeros: still a valid, centred scale
    return {
        "zmin": -limit,
        "zmax": limit,
        "zmid": 0,
        "colorscale": "RdBu_r",
        "colorbar": {"title": {"text": "difference"}},
        "hovertemplate": DIFFERENCE_HOVER,
    }


def head_heatmap(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    title: str = "",
    diverging: bool = False,
    clickable: bool = False,
) -> go.Figure:
    """softmax(QK^T/sqrt(d_k)) for one head (eq. 1) with query tokens down the side and key tokens across.
    diverging: a difference of two such maps, on a red-blue scale centred at zero and symmetric about it.
    clickable: up to CLICK_CELLS cells, each cell is a click target naming its (query, key, weight)."""
    if weights.shape != (len(queries), len(keys)):
        raise ValueError(f"weights {weights.shape} do not match {len(queries)} queries x {len(keys)} keys")
    q_labels, k_labels = escape_tokens(queries), escape_tokens(keys)
    size = max(320, min(900, 24 * max(len(queries), len(keys)) + 160))
    # built in one call: every later update_layout re-validates and deep-copies the whole figure
    # per-position categories, not per-cell hover text: the hover data grows as T, not T^2 (click targets, which
    # carry the hover when there are any, are per cell and so only drawn up to CLICK_CELLS)
    x, y = position_labels(k_labels), position_labels(q_labels)
    scale = _diverging_scale(weights) if diverging else WEIGHT_SCALE
    data = [go.Heatmap(z=weights, x=x, y=y, **scale)]
    click_layout = {}
    if clickable and weights.size <= CLICK_CELLS:
        cells = np.ndindex(weights.shape)
        rows, cols = zip(*cells, strict=True) if weights.size else ((), ())
        custom = [(int(i), int(j), float(weights[i, j])) for i, j in zip(rows, cols, strict=True)]
        data = [
            go.Heatmap(z=weights, x=x, y=y, **{**scale, "hoverinfo": "skip", "hovertemplate": None}),
            targets([x[j] for j in cols], [y[i] for i in rows], custom, CLICK_HOVER),
        ]
        click_layout = CLICK_LAYOUT
    figure = go.Figure(
        data=data,
        layout={
            **click_layout,
            "title": {"text": title},
            "height": size,
            "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
            "xaxis": token_axis(k_labels, "key (attended to)", side="top", tickangle=-60),
            "yaxis": token_axis(q_labels, "query (attending)", autorange="reversed"),
        },
    )
    return figure
