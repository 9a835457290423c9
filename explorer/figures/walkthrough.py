"""Figures for the Q/K/V walkthrough: a vector as a strip, and one score per key as bars."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.figures.labels import escape_tokens


def per_key_bars(
    values: np.ndarray,
    keys: Sequence[str],
    title: str,
    mask: np.ndarray | None = None,
    compare: np.ndarray | None = None,
    compare_name: str = "",
) -> go.Figure:
    """One bar per key token (numeric x with token tick labels, so repeated tokens stay apart)."""
    labels = escape_tokens(keys)
    x = list(range(len(keys)))
    colors = ["#1f77b4" if mask is None or mask[i] else "#cccccc" for i in x]
    hover = {"customdata": labels, "hovertemplate": "key %{x}: %{customdata}<br>%{y:.5f}<extra></extra>"}
    figure = go.Figure(go.Bar(x=x, y=values, marker={"color": colors}, name=title, **hover))
    if compare is not None:
        figure.add_trace(go.Bar(x=x, y=compare, name=compare_name, marker={"color": "#ff7f0e"}, **hover))
    hidden = [i for i in x if mask is not None and not mask[i]]
    # masked keys get weight 0, so their bars vanish: shade where they are
    shades = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": i - 0.5,
            "x1": i + 0.5,
            "y0": 0,
            "y1": 1,
            "fillcolor": "#e0e0e0",
            "opacity": 0.5,
            "line": {"width": 0},
            "layer": "below",
        }
        for i in hidden
    ]
    figure.update_layout(
        shapes=shades,
        title={"text": title},
        height=300,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        barmode="group",
        showlegend=compare is not None,
        xaxis={"tickmode": "array", "tickvals": x, "ticktext": labels, "tickangle": -60},
    )
    return figure


def vector_strip(rows: np.ndarray, row_labels: Sequence[str], title: str) -> go.Figure:
    """Vectors as coloured strips (rows x dimensions), diverging around zero."""
    rows = np.atleast_2d(rows)
    labels = escape_tokens(row_labels)
    limit = float(np.abs(rows).max()) or 1.0
    figure = go.Figure(
        go.Heatmap(
            z=rows,
            zmin=-limit,
            zmax=limit,
            zmid=0,
            colorscale="RdBu",
            y=list(range(len(labels))),
            hovertemplate="%{y}<br>dim %{x}<br>%{z:.5f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": title},
        height=max(140, 18 * len(labels) + 70),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        yaxis={"tickmode": "array", "tickvals": list(range(len(labels))), "ticktext": labels, "autorange": "reversed"},
        xaxis={"title": {"text": "dimension"}},
    )
    return figure


MINUS_INFINITY = "−∞"
MARKED = 40  # masked keys written "−∞" beside their marker; past this many, the markers and hover say it


def masked_scores(masked_scores: np.ndarray, mask: np.ndarray, keys: Sequence[str], title: str) -> go.Figure:
    """What the softmax sees (eq. 1 with the decoder's mask, section 3.2.3): visible keys keep their scaled score
    as a bar; a hidden key's score is the value the model wrote over it (finfo.min), drawn as a "−∞" marker below
    the bars, since a bar 3.4e38 long would flatten every other one."""
    labels = escape_tokens(keys)
    x = np.arange(len(keys))
    visible = masked_scores[mask]
    figure = go.Figure(
        go.Bar(
            x=x[mask],
            y=visible,
            name="scaled score (visible key)",
            marker={"color": "#1f77b4"},
            customdata=[labels[i] for i in x[mask]],
            hovertemplate="key %{x}: %{customdata}<br>%{y:.5f}<extra></extra>",
        )
    )
    hidden = x[~mask]
    if hidden.size:
        floor = min(0.0, float(visible.min()) if visible.size else 0.0)
        figure.add_trace(
            go.Scatter(
                x=hidden,
                y=np.full(hidden.size, floor),
                mode="markers+text" if hidden.size <= MARKED else "markers",
                text=[MINUS_INFINITY] * hidden.size,
                textposition="bottom center",
                marker={"symbol": "triangle-down", "size": 9, "color": "#888888"},
                name=f"masked: {MINUS_INFINITY} (the model writes {masked_scores[~mask][0]:.4g}, float32's minimum)",
                customdata=np.stack([masked_scores[~mask], np.array([labels[i] for i in hidden], dtype=object)], -1),
                hovertemplate="key %{x}: %{customdata[1]}<br>masked: the softmax sees %{customdata[0]:.4g}"
                "<extra></extra>",
            )
        )
    ticks = ticks_for(len(keys))
    figure.update_layout(
        title={"text": title},
        height=320,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        showlegend=True,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 1, "xanchor": "right"},
        xaxis={"tickmode": "array", "tickvals": ticks, "ticktext": [labels[i] for i in ticks], "tickangle": -60},
    )
    return figure


def ticks_for(n: int, most: int = 40) -> list[int]:
    """Every position up to `most`, else every k-th: a figure never draws more labels than fit."""
    return list(range(0, n, max(1, -(-n // most))))
