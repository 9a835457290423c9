"""One head's map too long to draw cell by cell: an overview of block means with the region drawn at full resolution
outlined on it, and that region (heatmap.head_heatmap, naming the text's own positions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.heatmap import (
    MAX_TICKS,
    TICK_PX,
    cells_note,
    diverging_scale,
    head_heatmap,
    thinned,
    titled,
)
from attention_explorer.explorer.figures.labels import escape_tokens, position_labels
from attention_explorer.explorer.run.blocks import block_means, edges, factor

# A map with up to FULL queries and keys is drawn whole, cell by cell, as before (MiniLM's longest input: 512 x 512,
# 1.4 MB of base64 float32). Past it the figure would grow as T^2 (1,024 x 1,024: 5.6 MB; 2,048 x 2,048: 22 MB), so an
# overview of at most OVERVIEW_CELLS block means a side (0.35 MB) and a region of at most FULL positions a side.
FULL = 512
OVERVIEW_CELLS = 256
CLICK_TILES = 64  # the overview's click targets a side at most (4,096 markers, about 0.2 MB)
REGION_SIZES = (32, 64, 128, 256, 512)  # positions a side of the region drawn at full resolution
REGION = 64  # the region's default side: every other token named on its axes, each one on hover
OUTLINE = {"color": "#d62728", "width": 2}
ROW = {
    "color": style.head_colour(1),
    "width": 2,
}  # a query row a page points at (decoding's step, attribution's position)
HEIGHT = 720  # the overview: tall enough for MAX_TICKS labels down its side, short enough to leave the region in view


def needs_overview(n_queries: int, n_keys: int) -> bool:
    """Whether a map of this size is drawn as an overview and a region instead of cell by cell."""
    return max(n_queries, n_keys) > FULL


def beside(n_queries: int, n_keys: int) -> int | None:
    """head_heatmap's `overview` for a map drawn beside another, with no region of its own: whole up to FULL, past it
    at most OVERVIEW_CELLS block means a side (the difference under the pair is the one zoomed)."""
    return OVERVIEW_CELLS if needs_overview(n_queries, n_keys) else None


def overview_factors(n_queries: int, n_keys: int) -> tuple[int, int]:
    """Positions a cell of the overview averages: (queries, keys)."""
    return factor(n_queries, OVERVIEW_CELLS), factor(n_keys, OVERVIEW_CELLS)


def overview_note(n_queries: int, n_keys: int, masked: bool = False, diverging: bool = False) -> str:
    """What one cell of the overview is, in words with the true factors, and what is not a full block; `masked`: a
    causal map, whose hidden weights are zeros inside the blocks on and above the diagonal; `diverging`: a difference
    of two maps."""
    f_q, f_k = overview_factors(n_queries, n_keys)
    short = [name for name, n, f in (("row", n_queries, f_q), ("column", n_keys, f_k)) if n % f]
    last = f" (the last {' and '.join(short)} of cells average fewer)" if short else ""
    hidden = " (a weight the mask hides is 0, and counts)" if masked else ""
    values, of = (
        ("differences", "differences of the attention weights") if diverging else ("weights", "attention weights")
    )
    mean = f"the mean of the {of} of {f_q} queries x {f_k} keys"
    return f"{cells_note(f_q, f_k, values).capitalize()}: {mean}{hidden}{last}."


@dataclass(frozen=True)
class Region:
    """The part of a long map drawn at full resolution: query and key positions of the text."""

    queries: range
    keys: range

    @property
    def words(self) -> str:
        return f"queries {self.queries.start}-{self.queries.stop - 1}, keys {self.keys.start}-{self.keys.stop - 1}"


def window(n: int, centre: int, size: int) -> range:
    """`size` positions of n around `centre` (all n when they fit), moved in from the ends rather than cut."""
    size = min(size, n)
    first = min(max(0, centre - size // 2), n - size)
    return range(first, first + size)


def region_around(n_queries: int, n_keys: int, query: int, key: int, size: int = REGION) -> Region:
    """The region of at most size x size positions centred on (query, key)."""
    return Region(window(n_queries, query, size), window(n_keys, key, size))


def _position_axis(labels: list[str], n: int, title: str, most: int, **extra) -> dict:
    """A numeric axis of positions 0..n-1, every k-th named 'i: token' (escaped labels)."""
    shown = thinned(n, most)
    names = position_labels(labels)
    return {
        "tickmode": "array",
        "tickvals": shown,
        "ticktext": [names[i] for i in shown],
        "title": {"text": title},
        "automargin": True,
        "showgrid": False,
        "zeroline": False,
        **extra,
    }


def overview_heatmap(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    title: str = "",
    region: Region | None = None,
    diverging: bool = False,
    row: int | None = None,
    window: int | None = None,
) -> go.Figure:
    """One head's (Tq, Tk) map as block means (blocks.block_means, overview_factors a cell) on axes of the text's
    positions, `region` outlined (and query `row`, a step being looked at). A click target on each of at most
    CLICK_TILES x CLICK_TILES tiles names its positions and the mean of its weights (customdata: first query, last
    query, first key, last key, mean)."""
    n_q, n_k = weights.shape
    if (n_q, n_k) != (len(queries), len(keys)):
        raise ValueError(f"weights {weights.shape} do not match {len(queries)} queries x {len(keys)} keys")
    f_q, f_k = overview_factors(n_q, n_k)
    means = block_means(weights, f_q, f_k)
    values = "differences" if diverging else "weights"
    if diverging:
        scale = diverging_scale(means)
        what = "mean difference"
    else:  # to the largest mean, not 1: a mean over 64 weights of a long text is rarely past 0.1
        scale = style.sequential(0, float(means.max()) or 1.0)
        scale["colorbar"] = {"title": {"text": "mean weight"}}
        what = "mean weight"
    # x and y one longer than the cells: their edges, so a cell covers exactly the positions it averages
    heat = go.Heatmap(z=means, x=edges(n_k, f_k) - 0.5, y=edges(n_q, f_q) - 0.5, **{**scale, "hovertemplate": None})
    heat.hoverinfo = "skip"  # the tiles below name what is under the pointer
    g_q, g_k = factor(n_q, CLICK_TILES), factor(n_k, CLICK_TILES)
    tiles = block_means(weights, g_q, g_k)
    rows, cols = edges(n_q, g_q), edges(n_k, g_k)
    cells = [(i, j) for i in range(tiles.shape[0]) for j in range(tiles.shape[1])]
    clicks = targets(
        [(cols[j] + cols[j + 1] - 1) / 2 for _, j in cells],
        [(rows[i] + rows[i + 1] - 1) / 2 for i, _ in cells],
        [
            (int(rows[i]), int(rows[i + 1] - 1), int(cols[j]), int(cols[j + 1] - 1), float(tiles[i, j]))
            for i, j in cells
        ],
        "queries %{customdata[0]}-%{customdata[1]}, keys %{customdata[2]}-%{customdata[3]}<br>"
        f"{what} %{{customdata[4]:.4g}}<extra>click: draw them at full resolution</extra>",
    )
    shapes = []
    if region is not None:
        box = {"x0": region.keys.start - 0.5, "x1": region.keys.stop - 0.5}
        shapes.append({"type": "rect", **box, "y0": region.queries.start - 0.5, "y1": region.queries.stop - 0.5})
        shapes[0]["line"] = OUTLINE
    if window is not None and n_q > window:  # key j hidden from query i when i - j >= window: below x = y - w + 0.5
        corner = f"{n_q - window},{n_q - 0.5}"
        shapes.append(
            {
                "type": "path",
                "path": f"M -0.5,{window - 1} L -0.5,{n_q - 0.5} L {corner} Z",
                "fillcolor": style.OUTSIDE_WINDOW,
                "opacity": 0.6,
                "line": {"width": 0},
                "name": "outside the window",
            }
        )
        edge = {"type": "line", "x0": -0.5, "y0": window - 1, "x1": n_q - window, "y1": n_q - 0.5}
        shapes.append({**edge, "line": style.WINDOW_EDGE, "name": "window edge"})
    if row is not None:
        shapes.append({"type": "rect", "x0": -0.5, "x1": n_k - 0.5, "y0": row - 0.5, "y1": row + 0.5, "line": ROW})
    rows_fit = max(4, (HEIGHT - 220) // TICK_PX)
    note = cells_note(f_q, f_k, values)
    return go.Figure(
        data=[heat, clicks],
        layout={
            **CLICK_LAYOUT,
            "title": titled(f"{title} ({note})" if title else note.capitalize()),
            "height": HEIGHT,
            "margin": {"l": 10, "r": 10, "t": 10, "b": 10, "autoexpand": True},
            "shapes": shapes,
            "xaxis": _position_axis(
                escape_tokens(keys),
                n_k,
                "key (attended to)",
                MAX_TICKS,
                side="top",
                range=[-0.5, n_k - 0.5],
                autotickangles=[0, -90],
            ),
            "yaxis": _position_axis(
                escape_tokens(queries), n_q, "query (attending)", min(MAX_TICKS, rows_fit), range=[n_q - 0.5, -0.5]
            ),
            "plot_bgcolor": "white",
        },
    )


def region_heatmap(
    weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], region: Region, title: str = "", **options
) -> go.Figure:
    """The region of a long map at full resolution: the model's weights there, the text's positions on the axes
    and in click targets (head_heatmap's options)."""
    q, k = region.queries, region.keys
    return head_heatmap(
        weights[q.start : q.stop, k.start : k.stop],
        queries[q.start : q.stop],
        keys[k.start : k.stop],
        f"{title}: {region.words}" if title else region.words.capitalize(),
        first=(q.start, k.start),
        **options,
    )
