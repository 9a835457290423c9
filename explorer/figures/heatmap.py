"""One attention head as a heatmap: rows are queries (attending), columns are keys (attended to)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.figures.labels import escape_tokens

HOVER_TOKENS = 160
HOVER_INDICES = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"
HOVER = "query %{y}: %{customdata[0]}<br>key %{x}: %{customdata[1]}<br>weight %{z:.4f}<extra></extra>"


def token_axis(labels: list[str], title: str, **extra: object) -> dict:
    """A numeric axis labelled with (already escaped) tokens, one tick per position."""
    return {
        "tickmode": "array",
        "tickvals": list(range(len(labels))),
        "ticktext": labels,
        "title": {"text": title},
        **extra,
    }


def head_heatmap(weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], title: str = "") -> go.Figure:
    """softmax(QK^T/sqrt(d_k)) for one head (eq. 1) with query tokens down the side and key tokens across."""
    if weights.shape != (len(queries), len(keys)):
        raise ValueError(f"weights {weights.shape} do not match {len(queries)} queries x {len(keys)} keys")
    q_labels, k_labels = escape_tokens(queries), escape_tokens(keys)
    # numeric axes + ticktext: a category axis would merge the two "the" tokens into one row
    trace = go.Heatmap(
        z=weights,
        x=list(range(len(keys))),
        y=list(range(len(queries))),
        zmin=0,
        zmax=1,
        colorscale="Blues",
        colorbar={"title": {"text": "weight"}},
        hovertemplate=HOVER_INDICES,
    )
    if max(len(queries), len(keys)) <= HOVER_TOKENS:
        # per-cell token pairs grow as T^2: past HOVER_TOKENS the ticks name the tokens and hover gives positions
        hover = np.empty(weights.shape + (2,), dtype=object)
        hover[..., 0] = np.array(q_labels, dtype=object)[:, None]
        hover[..., 1] = np.array(k_labels, dtype=object)[None, :]
        trace.update(customdata=hover, hovertemplate=HOVER)
    figure = go.Figure(trace)
    size = max(320, min(900, 24 * max(len(queries), len(keys)) + 160))
    figure.update_layout(
        title={"text": title},
        height=size,
        margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        xaxis=token_axis(k_labels, "key (attended to)", side="top", tickangle=-60),
        yaxis=token_axis(q_labels, "query (attending)", autorange="reversed"),
    )
    return figure
