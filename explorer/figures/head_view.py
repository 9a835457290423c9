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


def _token_column(x: float, labels: list[str], side: str, colors: list[str] | str = "#222") -> go.Scatter:
    return go.Scatter(
        x=[x] * len(labels),
        y=list(range(len(labels))),
        mode="text",
        text=labels,
        textposition=f"middle {side}",
        textfont={"color": colors},
        showlegend=False,
        hoverinfo="skip",
    )


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
    rows = np.arange(n_q) if focus is None else np.array([focus])
    uppers = (*LEVELS[1:], 1.01)
    traces = []
    for head in heads:
        w = weights[head, rows]  # (R, Tk)
        # the strongest keys of each query only, so the lines stay readable
        top = np.argsort(w, axis=1)[:, ::-1][:, :max_lines_per_query]  # (R, k)
        q_idx = np.repeat(rows, top.shape[1])
        k_idx = top.reshape(-1)
        band = np.digitize(w[np.repeat(np.arange(len(rows)), top.shape[1]), k_idx], LEVELS) - 1  # -1: below 0.05
        first = True
        for b, high in enumerate(uppers):
            chosen = band == b
            if not chosen.any():
                continue
            pairs = list(zip(q_idx[chosen].tolist(), k_idx[chosen].tolist(), strict=True))
            traces.append(
                go.Scatter(
                    x=[0.0, 1.0, None] * len(pairs),  # one segment per (query, key), None breaks the line
                    y=[y for qi, kj in pairs for y in (float(qi), float(kj), None)],
                    mode="lines",
                    line={"color": PALETTE[head % len(PALETTE)], "width": 2},
                    opacity=min(1.0, 0.15 + high * 0.85),
                    name=f"head {head + 1}",
                    legendgroup=f"h{head}",
                    showlegend=first,
                    hoverinfo="skip",
                )
            )
            first = False
    q_labels, k_labels = escape_tokens(queries), escape_tokens(keys)
    focus_color = ["#d62728" if focus == i else "#222" for i in range(n_q)]
    traces += [_token_column(0, q_labels, "left", focus_color), _token_column(1, k_labels, "right")]
    return go.Figure(
        data=traces,
        layout={
            "height": max(360, 30 * max(n_q, n_k) + 100),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            "xaxis": {"range": [-0.9, 1.9], "visible": False},
            "yaxis": {"autorange": "reversed", "visible": False},
            "plot_bgcolor": "white",
            "legend": {
                "orientation": "h",
                "y": 1.02,
                "yanchor": "bottom",
                "title": {"text": "click a head to hide it"},
            },
        },
    )
