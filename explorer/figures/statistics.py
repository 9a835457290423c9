"""A per-head statistic as a layer x head grid, each cell labelled with what the head mostly does."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go


def statistic_grid(
    values: np.ndarray, labels: np.ndarray, name: str, zrange: tuple[float, float] | None = None
) -> go.Figure:
    """values (L, H) of one statistic; labels (L, H) strings shown on hover; zrange fixes the colour scale."""
    scale = {} if zrange is None else {"zmin": zrange[0], "zmax": zrange[1]}
    n_layers, n_heads = values.shape
    return go.Figure(
        data=[
            go.Heatmap(
                z=values,
                x=[f"head {h + 1}" for h in range(n_heads)],
                y=[f"layer {layer + 1}" for layer in range(n_layers)],
                customdata=labels,
                colorscale="Viridis",
                **scale,
                colorbar={"title": {"text": name}},
                hovertemplate="%{y}, %{x}<br>" + name + " %{z:.4f}<br>%{customdata}<extra></extra>",
            )
        ],
        layout={
            "height": max(260, 34 * n_layers + 110),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            "yaxis": {"autorange": "reversed"},
        },
    )
