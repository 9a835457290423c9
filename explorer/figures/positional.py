"""Positional encodings: sinusoid curves, the positions x dimensions map, and position-to-position similarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style


def curves(
    table: np.ndarray,
    dims: Sequence[int],
    smooth: tuple[np.ndarray, np.ndarray] | None = None,
    name: str = "dim",
    y_title: str = "value",
) -> go.Figure:
    """PE(pos, dim) over positions for the chosen dimensions (section 3.5): each pair of dims is one frequency.
    With `smooth` (x (N,), y (N, dims)), the formula between positions is drawn as the line and the table's own
    values as dots on it; the first len(dims) traces are always the table's."""
    positions = list(range(table.shape[0]))
    mode = "markers" if smooth is not None else "lines"
    data = [
        go.Scatter(x=positions, y=table[:, d], mode=mode, name=f"{name} {d}", legendgroup=str(d), marker={"size": 5})
        for d in dims
    ]
    if smooth is not None:
        x, y = smooth
        data += [
            go.Scatter(x=x, y=y[:, j], mode="lines", name=f"{name} {d}", legendgroup=str(d), showlegend=False)
            for j, d in enumerate(dims)
        ]
    figure = go.Figure(
        data=data,
        layout={
            "height": 300,  # under the step's formula, text and pickers on the first screen
            "margin": {"l": 10, "r": 10, "t": 10, "b": 10},  # no title: the page's heading names it
            "xaxis": {"title": {"text": "position"}},
            "yaxis": {"title": {"text": y_title}},
        },
    )
    if smooth is not None:  # a dim's dots and its line share a colour
        for j, trace in enumerate(figure.data):
            trace.marker.color = trace.line.color = style.head_colour(j % len(dims))
    return figure


def _diverging(z: np.ndarray, limit: float, title: str, hover: str, x_title: str, **yaxis: object) -> go.Figure:
    """A heatmap centred on zero (style.diverging: negative blue, positive red) with positions down the side."""
    return go.Figure(
        data=[go.Heatmap(z=z, **style.diverging(limit), hovertemplate=hover)],
        layout={
            "title": {"text": title},
            "height": 360,
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            # a square map (scaleanchor) shrinks its plot area, not widens its x range past the positions it has
            "xaxis": {"title": {"text": x_title}, "constrain": "domain", "automargin": True},
            "yaxis": {"title": {"text": "position"}, "autorange": "reversed", "automargin": True, **yaxis},
        },
    )


def table_heatmap(table: np.ndarray, title: str) -> go.Figure:
    """Positions down, dimensions across; colours clipped at the 99th percentile so a few outliers don't wash out."""
    limit = float(np.percentile(np.abs(table), 99)) or 1.0
    return _diverging(table, limit, title, "position %{y}<br>dim %{x}<br>value %{z:.4f}<extra></extra>", "dimension")


def similarity(table: np.ndarray) -> np.ndarray:
    """Cosine similarity PE_i . PE_j / (|PE_i| |PE_j|) between every pair of positions."""
    unit = table / np.linalg.norm(table, axis=1, keepdims=True).clip(min=1e-12)
    return unit @ unit.T


def similarity_heatmap(table: np.ndarray, title: str) -> go.Figure:
    hover = "position %{y} . position %{x}<br>cosine %{z:.3f}<extra></extra>"
    return _diverging(similarity(table), 1.0, title, hover, "position", scaleanchor="x")


def distance_scores(distances: np.ndarray, scores: np.ndarray, actual: int, own: float, title: str) -> go.Figure:
    """One query/key pair's scaled score as the distance between them grows (rotary positions), with the pair's
    own distance in the text marked by the score the model computed there."""
    return go.Figure(
        data=[
            go.Scatter(
                x=distances,
                y=scores,
                mode="lines",
                name="q . k / sqrt(d_k) at this distance",
                hovertemplate="distance %{x}<br>score %{y:.4f}<extra></extra>",
            ),
            go.Scatter(
                x=[actual],
                y=[own],
                mode="markers",
                marker={"size": 11, "color": "crimson"},
                name=f"in the text: {actual} apart",
                hovertemplate="distance %{x}<br>the model's score %{y:.4f}<extra></extra>",
            ),
        ],
        layout={
            "title": {"text": title},
            "height": 340,
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            "xaxis": {"title": {"text": "distance: query position - key position"}},
            "yaxis": {"title": {"text": "scaled score"}, "automargin": True},
            "legend": {"orientation": "h", "y": -0.25},
        },
    )
