"""A per-head statistic as a layer x head grid, each cell labelled with what the head mostly does."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go


def statistic_grid(
    values: np.ndarray,
    labels: np.ndarray,
    name: str,
    zrange: tuple[float, float] | None = None,
    percent: bool = False,
) -> go.Figure:
    """values (L, H) of one statistic; labels (L, H) strings shown on hover; zrange fixes the colour scale;
    `percent` reads values (shares of 1) as percentages, else 3 significant digits."""
    scale = {} if zrange is None else {"zmin": zrange[0], "zmax": zrange[1]}
    name = html.escape(name, quote=False)  # "[CLS] / <bos>" is text, not a tag
    number = "%{z:.1%}" if percent else "%{z:.3g}"
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
                colorbar={"title": {"text": name}, **({"tickformat": ".0%"} if percent else {})},
                hovertemplate=f"%{{y}}, %{{x}}<br>{name} {number}<br>%{{customdata}}<extra></extra>",
            )
        ],
        layout={
            "height": max(260, 34 * n_layers + 110),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            "yaxis": {"autorange": "reversed"},
        },
    )
