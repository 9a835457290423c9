"""A head over many texts: its queries and keys drawn in one plane (as AttentionViz does), and the texts where its
pattern is strongest as a bar chart. Pure: arrays and labels in, a Plotly figure out."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.heatmap import titled
from attention_explorer.explorer.figures.labels import abbreviated

# a query is drawn as a circle, a key as a cross: the two sets share one plane and one colour scale
MARKERS = {"query": "circle", "key": "x"}
POINT_PX = 6
LABEL_CHARS = 24  # a token shown on hover is cut to this many characters


def projection(
    points: np.ndarray,
    roles: Sequence[str],
    positions: np.ndarray,
    tokens: Sequence[str],
    texts: np.ndarray,
    colour: str = "position",
    explained: tuple[float, float] | None = None,
    title: str = "",
) -> go.Figure:
    """points (N, 2): each query and key of one head over the corpus, projected to two dimensions; roles[i] "query"
    or "key"; positions (N,) the token's position in its text; tokens (N,) its readable label (escaped here); texts
    (N,) the index of its text. `colour`: "position" (a sequential scale over the position) or "role" (queries one
    colour, keys another). `explained`: the share of the variance each axis keeps, named on the axes."""
    points = np.asarray(points, dtype=float)
    roles = np.asarray(roles)
    labels = np.array([html.escape(abbreviated(t, LABEL_CHARS), quote=False) for t in tokens], dtype=object)
    hover = "%{customdata[0]} %{customdata[1]}<br>text %{customdata[2]}, position %{customdata[3]}<extra></extra>"
    data = []
    top = max(int(np.max(positions)) if len(positions) else 0, 1)
    for i, role in enumerate(("query", "key")):
        where = roles == role
        if not where.any():
            continue
        marker = {"symbol": MARKERS[role], "size": POINT_PX, "opacity": 0.75}
        if colour == "position":
            marker |= {
                "color": positions[where],
                "cmin": 0,
                "cmax": top,
                "colorscale": style.POINTS,
                # one colour bar, beside the first set drawn, its ticks on whole positions
                **(
                    {"colorbar": {"title": {"text": "position"}, "dtick": max(1, -(-top // 8))}, "showscale": True}
                    if not data
                    else {}
                ),
            }
        else:
            marker |= {"color": style.head_colour(i)}
        custom = np.stack(
            [np.full(where.sum(), role, dtype=object), labels[where], texts[where] + 1, positions[where]], axis=1
        )
        data.append(
            go.Scattergl(
                x=points[where, 0],
                y=points[where, 1],
                mode="markers",
                name="queries" if role == "query" else "keys",
                marker=marker,
                customdata=custom,
                hovertemplate=hover,
            )
        )
    axis_names = [f"component {i + 1}" for i in range(2)]
    if explained is not None:
        shares = zip(axis_names, explained, strict=True)
        axis_names = [f"{name} ({share:.0%} of the variance)" for name, share in shares]
    return go.Figure(
        data=data,
        layout={
            "height": 560,
            "margin": {"l": 10, "r": 10, "t": 40 if title else 20, "b": 10},
            "xaxis": {"title": {"text": axis_names[0]}, "zeroline": False, "automargin": True},
            "yaxis": {"title": {"text": axis_names[1]}, "zeroline": False, "automargin": True},
            "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
            **({"title": titled(html.escape(title, quote=False))} if title else {}),
        },
    )


def top_texts(values: Sequence[float], names: Sequence[str], statistic: str, title: str = "") -> go.Figure:
    """The texts where a head's statistic is largest, one bar each, the largest on top; names (plain text, escaped
    here and cut) label the bars."""
    labels = [html.escape(abbreviated(name, 60), quote=False) for name in names]
    statistic = html.escape(statistic, quote=False)
    return go.Figure(
        data=[
            go.Bar(
                x=list(values),
                y=labels,
                orientation="h",
                marker={"color": style.head_colour(0)},
                hovertemplate=f"%{{y}}<br>{statistic} %{{x:.3g}}<extra></extra>",
            )
        ],
        layout={
            "height": max(220, 34 * len(labels) + 90),
            "margin": {"l": 10, "r": 10, "t": 40 if title else 20, "b": 10},
            "xaxis": {"title": {"text": statistic}, "automargin": True},
            "yaxis": {"autorange": "reversed", "automargin": True},
            **({"title": titled(html.escape(title, quote=False))} if title else {}),
        },
    )
