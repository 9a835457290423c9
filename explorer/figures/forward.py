"""Figures for the forward pass: named vectors as strips, and how far each sub-layer moves the tokens."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.labels import escape_tokens, strip_colorbar

MAX_TICKS = 40  # token ticks past this are thinned
MAX_PATH_TICKS = 25  # a token's path through more steps than this names layers, not each sub-layer


def preview(vector: np.ndarray, shown: int = 8) -> str:
    """The first values of a vector and how many there are, for inline text."""
    values = ", ".join(f"{x:.4f}" for x in np.asarray(vector).ravel()[:shown])
    return f"[{values}{', ...' if vector.size > shown else ''}]  ({vector.size} values)"


def named_strips(rows: Sequence[np.ndarray], names: Sequence[str], title: str) -> go.Figure:
    """Several vectors of one length as labelled strips (rows x dimensions), diverging around zero, one colour scale
    for all rows so sizes compare (hover shows every exact value)."""
    z = np.stack([np.asarray(r, np.float32) for r in rows])
    # colours saturate at the 99th percentile: one outlier dimension (MiniLM has some) would wash out the rest
    limit = float(np.percentile(np.abs(z), 99)) or float(np.abs(z).max()) or 1.0
    labels = escape_tokens(names)
    y = list(range(len(labels)))
    height = max(160, 26 * len(labels) + 90)
    figure = go.Figure(
        go.Heatmap(
            z=z,
            y=y,
            **style.diverging(limit),
            colorbar=strip_colorbar(limit, height, 50),
            customdata=np.array([[name] * z.shape[1] for name in labels]),
            hovertemplate="%{customdata}<br>dim %{x}<br>%{z:.5f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": escape_tokens([title])[0]},
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        yaxis={"tickmode": "array", "tickvals": y, "ticktext": labels, "autorange": "reversed", "automargin": True},
        xaxis={"title": {"text": "dimension"}},
    )
    return figure


def sublayer_names(names: Sequence[str], n_layers: int) -> list[str]:
    """'L1 self-attention', ... : one label per (layer, sub-layer), layer by layer."""
    return [f"L{layer + 1} {name}" for layer in range(n_layers) for name in names]


def token_path(norms: np.ndarray, cosine: np.ndarray, input_norm: float, names: Sequence[str], token: str) -> go.Figure:
    """One token through the stack: its norm after every sub-layer, and its cosine to the layer's input."""
    labels = ["input", *sublayer_names(names, norms.shape[0])]
    x = list(range(len(labels)))
    ticks = x
    if len(labels) > MAX_PATH_TICKS:  # a deep stack: name every k-th layer at its first sub-layer, not every step
        n_sub = norms.shape[1]
        every = -(-norms.shape[0] // (MAX_PATH_TICKS // 2))
        ticks = [0, *range(1, len(labels), n_sub * every)]
        labels = ["input", *(f"layer {(i - 1) // n_sub + 1}" for i in ticks[1:])]
    figure = go.Figure(
        [
            go.Scatter(x=x, y=[input_norm, *norms.ravel()], name="norm |x|", mode="lines+markers"),
            go.Scatter(x=x[1:], y=cosine.ravel(), name="cosine to the layer's input", mode="lines+markers", yaxis="y2"),
        ]
    )
    figure.update_layout(
        title={"text": f"Token {escape_tokens([repr(token)])[0]} through the stack"},
        height=400,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"tickmode": "array", "tickvals": ticks, "ticktext": labels, "tickangle": -45, "automargin": True},
        yaxis={"title": {"text": "norm"}, "showgrid": False},
        yaxis2={"title": {"text": "cosine"}, "overlaying": "y", "side": "right", "range": [-1, 1.05], "dtick": 0.5},
        legend={"orientation": "h", "y": -0.45},
    )
    return figure


def movement_heatmap(values: np.ndarray, names: Sequence[str], tokens: Sequence[str], title: str) -> go.Figure:
    """(L, S, T) -> one heatmap: rows are sub-layers layer by layer, columns are tokens (ticks thinned when long)."""
    n_layers, n_sub, n_tokens = values.shape
    rows = sublayer_names(names, n_layers)
    labels = escape_tokens(tokens)
    every = max(1, -(-n_tokens // MAX_TICKS))
    ticks = list(range(0, n_tokens, every))
    z = values.reshape(n_layers * n_sub, n_tokens)
    # a real model moves a few cells (the first token's, in a middle layer) hundreds of times more than the rest: past
    # 3x the 99th percentile, the colours stop there so the rest can be told apart (hover still gives every number)
    top, high = float(np.nanmax(z)), float(np.nanpercentile(z, 99))
    clipped = high > 0 and top > 3 * high
    if clipped:
        title += f" (colours stop at the 99th percentile, {high:.3g}; the largest is {top:.3g})"
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n_tokens)),
            y=list(range(len(rows))),
            **style.sequential(0 if clipped else None, high if clipped else None),
            customdata=np.array([labels] * len(rows)),
            hovertemplate="%{customdata} (%{x})<br>row %{y}<br>%{z:.4f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": title},
        height=max(220, (22 if len(rows) <= 30 else 14) * len(rows) + 140),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"tickmode": "array", "tickvals": ticks, "ticktext": [labels[i] for i in ticks], "tickangle": -60},
        yaxis={"tickmode": "array", "tickvals": list(range(len(rows))), "ticktext": rows, "autorange": "reversed"},
    )
    return figure
