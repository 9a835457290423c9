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
