"""Token-to-token lines for one layer: queries on the left, keys on the right, opacity = attention weight."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.figures.labels import escape_tokens

PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
)
LEVELS = (0.05, 0.15, 0.3, 0.5, 0.75)  # weights are drawn in these opacity bands; below the first, not at all


def head_view(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    heads: Sequence[int],
    focus: int | None = None,
    max_lines_per_query: int = 8,
) -> go.Figure:
    """weights: (H, Tq, Tk) for one layer. One legend entry per head; focus keeps only that query's lines."""
    n_q, n_k = len(queries), len(keys)
    figure = go.Figure()
    for head in heads:
        w = weights[head]
        for band, low in enumerate(LEVELS):
            high = LEVELS[band + 1] if band + 1 < len(LEVELS) else 1.01
            xs: list[float | None] = []
            ys: list[float | None] = []
            rows = range(n_q) if focus is None else [focus]
            for qi in rows:
                top = np.argsort(w[qi])[::-1][:max_lines_per_query]  # the strongest keys only: lines stay readable
                for kj in top:
                    if low <= w[qi, kj] < high:
                        xs += [0.0, 1.0, None]
                        ys += [float(qi), float(kj), None]
            if not xs:
                continue
            figure.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line={"color": PALETTE[head % len(PALETTE)], "width": 2},
                    opacity=min(1.0, 0.15 + high * 0.85),
                    name=f"head {head + 1}",
                    legendgroup=f"h{head}",
                    showlegend=band == 0 or not figure.data or figure.data[-1].legendgroup != f"h{head}",
                    hoverinfo="skip",
                )
            )
    q_labels, k_labels = escape_tokens(queries), escape_tokens(keys)
    focus_color = ["#d62728" if focus == i else "#222" for i in range(n_q)]
    figure.add_trace(
        go.Scatter(
            x=[0] * n_q,
            y=list(range(n_q)),
            mode="text",
            text=q_labels,
            textposition="middle left",
            textfont={"color": focus_color},
            showlegend=False,
            hoverinfo="skip",
            name="queries",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=[1] * n_k,
            y=list(range(n_k)),
            mode="text",
            text=k_labels,
            textposition="middle right",
            showlegend=False,
            hoverinfo="skip",
            name="keys",
        )
    )
    figure.update_layout(
        height=max(360, 30 * max(n_q, n_k) + 100),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"range": [-0.9, 1.9], "visible": False},
        yaxis={"autorange": "reversed", "visible": False},
        plot_bgcolor="white",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "title": {"text": "click a head to hide it"}},
    )
    return figure
