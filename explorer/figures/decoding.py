"""Figures for decoding step by step: the next-token distribution, and where the current step sits."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.figures.labels import escape_tokens

CHOSEN, OTHER = "#d62728", "#1f77b4"


def top_k_bars(tokens: Sequence[str], probabilities: np.ndarray, chosen: str, title: str) -> go.Figure:
    """Final linear + softmax: the k most probable next tokens, most probable on top, greedy's pick in red."""
    labels = escape_tokens(tokens)
    y = list(range(len(labels)))
    colors = [CHOSEN if t == chosen else OTHER for t in tokens]
    return go.Figure(
        data=[
            go.Bar(
                x=probabilities,
                y=y,
                orientation="h",
                marker={"color": colors},
                customdata=labels,
                text=[f"{p:.3f}" for p in probabilities],
                textposition="auto",
                hovertemplate="%{customdata}<br>p = %{x:.5f}<extra></extra>",
            )
        ],
        layout={
            "title": {"text": title},
            "height": max(240, 26 * len(labels) + 80),
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            "xaxis": {"title": {"text": "probability"}, "range": [0, 1]},
            "yaxis": {"tickmode": "array", "tickvals": y, "ticktext": labels, "autorange": "reversed"},
        },
    )


def mark_row(figure: go.Figure, row: int, n_columns: int) -> go.Figure:
    """A copy of a category heatmap with one query row outlined (the step being looked at); `figure` is unchanged."""
    return go.Figure(figure).add_shape(
        type="rect",
        xref="x",
        yref="y",
        x0=-0.5,
        x1=n_columns - 0.5,
        y0=row - 0.5,
        y1=row + 0.5,
        line={"color": CHOSEN, "width": 3},
        fillcolor="rgba(0,0,0,0)",
    )
