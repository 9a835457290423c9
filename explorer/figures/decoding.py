"""Figures for decoding step by step: the next-token distribution, and where the current step sits."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.labels import escape_tokens

CHOSEN, OTHER = "#d62728", style.head_colour(0)
SMALL = 0.05  # below this top probability the bars are drawn on a log scale


def probability_text(p: float) -> str:
    """Three decimals, or scientific notation where three decimals would read 0.000."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def top_k_bars(tokens: Sequence[str], probabilities: np.ndarray, chosen: str, title: str) -> go.Figure:
    """Final linear + softmax: the k most probable next tokens, most probable on top, greedy's pick in red."""
    labels = escape_tokens(tokens)
    y = list(range(len(labels)))
    colors = [CHOSEN if t == chosen else OTHER for t in tokens]
    # an untrained model spreads its probability over the whole vocabulary (1/37,000 each): on a 0..1 line those
    # bars are under a pixel wide, so such a distribution is drawn on a log scale that reaches below its smallest
    xaxis: dict = {"title": {"text": "probability"}, "range": [0, 1], "automargin": True}
    if len(probabilities) and float(np.max(probabilities)) < SMALL:
        low = math.log10(max(float(np.min(probabilities)), 1e-30)) - 0.5
        top = math.log10(float(np.max(probabilities))) + 0.2
        xaxis |= {"type": "log", "range": [low, top], "title": {"text": "probability (log scale)"}}
    return go.Figure(
        data=[
            go.Bar(
                x=probabilities,
                y=y,
                orientation="h",
                marker={"color": colors},
                customdata=labels,
                text=[probability_text(p) for p in probabilities],
                textposition="auto",
                hovertemplate="%{customdata}<br>p = %{x:.3g}<extra></extra>",
            )
        ],
        layout={
            "title": {"text": title},
            "height": max(240, 26 * len(labels) + 80),
            # automargin grows these margins to fit the token labels and the axis title: an export keeps them whole
            "margin": {"l": 10, "r": 20, "t": 40, "b": 10, "pad": 4},
            "xaxis": xaxis,
            "yaxis": {
                "tickmode": "array",
                "tickvals": y,
                "ticktext": labels,
                "autorange": "reversed",
                "automargin": True,
            },
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
