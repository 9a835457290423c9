"""A per-head statistic as a layer x head grid, each cell labelled with what the head mostly does."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.heatmap import titled


def statistic_grid(
    values: np.ndarray,
    labels: np.ndarray,
    name: str,
    zrange: tuple[float, float] | None = None,
    percent: bool = False,
    title: str = "",
) -> go.Figure:
    """values (L, H) of one statistic; labels (L, H) strings shown on hover; zrange fixes the colour scale;
    `percent` reads values (shares of 1) as percentages, else 3 significant digits. Each cell is a click target
    naming (layer, head). `title` (plain text, escaped here) names what the grid shows, in exports too."""
    scale = style.sequential(None, None) if zrange is None else style.sequential(*zrange)
    name = html.escape(name, quote=False)  # "[CLS] / <bos>" is text, not a tag
    number = "%{customdata[2]:.1%}" if percent else "%{customdata[2]:.3g}"
    n_layers, n_heads = values.shape
    heads = [f"head {h + 1}" for h in range(n_heads)]
    layers = [f"layer {layer + 1}" for layer in range(n_layers)]
    cells = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    clicks = targets(
        [heads[h] for _, h in cells],
        [layers[i] for i, _ in cells],
        [(i, h, float(values[i, h]), str(labels[i, h])) for i, h in cells],
        f"%{{y}}, %{{x}}<br>{name} {number}<br>%{{customdata[3]}}<extra>click to open</extra>",
    )
    return go.Figure(
        data=[
            go.Heatmap(
                z=values,
                x=heads,
                y=layers,
                customdata=labels,
                **scale,
                colorbar={"title": {"text": name}, **({"tickformat": ".0%"} if percent else {})},
                hoverinfo="skip",  # the click targets above carry the hover
            ),
            clicks,
        ],
        layout={
            **CLICK_LAYOUT,
            "height": max(260, 34 * n_layers + 110),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            **({"title": titled(html.escape(title, quote=False))} if title else {}),
            "xaxis": {"automargin": True},
            "yaxis": {"autorange": "reversed", "automargin": True},
        },
    )
