"""Every layer x head at a glance, in one figure: thumbnails pooled to at most `size` x `size`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.heatmap import EDGE, OUTSIDE, outside_window
from attention_explorer.explorer.run.blocks import THUMBNAIL, block_means, edges, factor

LAYER_CELLS = 64  # cells per side when one layer's heads are shown as small multiples
ROW_PX = 70  # a layer's row on screen where no size is asked for
# The lesson's grid (step 8): each thumbnail as wide as the page allows (plot widths at 1600 x 900: the sidebar
# open, and folded in presenter mode), at most THUMB_PX; past GRID_PX of rows (what the first screen has left under
# the step's title and pickers) a window of layers is drawn
PLOT_WIDTH_PX = {False: 1000, True: 1400}
GRID_PX = {False: 400, True: 600}
THUMB_PX = 160


def thumbnail_px(n_heads: int, present: bool = False) -> int:
    """A thumbnail's side in the lesson's grid: the plot's width shared by the heads, at most THUMB_PX."""
    return int(min(THUMB_PX, PLOT_WIDTH_PX[present] // max(1, n_heads)))


def layer_window(n_layers: int, layer: int, thumb_px: int, present: bool = False) -> range:
    """The layers the lesson's grid draws: all of them when their rows fit GRID_PX, else the window that holds
    `layer` among windows of equal size (6 layers: 1-3 and 4-6, not 1-5 and 6)."""
    fit = max(1, GRID_PX[present] // thumb_px)
    if n_layers <= fit:
        return range(n_layers)
    size = -(-n_layers // -(-n_layers // fit))  # as many windows as needed, as even as they come
    first = min(layer // size * size, n_layers - size)
    return range(first, first + size)


def pool(weights: np.ndarray, size: int) -> np.ndarray:
    """(..., Tq, Tk) -> at most size x size block means (blocks.block_means): f x f positions a cell, the last row and
    column of cells what is left; a map no larger is drawn as it is."""
    t_q, t_k = weights.shape[-2:]
    return block_means(weights, factor(t_q, size), factor(t_k, size))


def grid(weights: np.ndarray, size: int = THUMBNAIL) -> np.ndarray:
    """(L, H, Tq, Tk) -> one 2-D image of pooled thumbnails, layers down, heads across, NaN gutters between. Thumbnails
    already reduced (blocks.thumbnails, at most `size` a side) are drawn as they are."""
    n_layers, n_heads = weights.shape[:2]
    thumbs = pool(weights, size)  # (L, H, s_q, s_k)
    # each thumbnail scaled to its own maximum: pooled long inputs are faint, and the pattern is the point here
    peak = thumbs.max(axis=(-2, -1), keepdims=True)
    thumbs = thumbs / np.where(peak > 0, peak, 1)
    s_q, s_k = thumbs.shape[-2:]
    image = np.full((n_layers * (s_q + 1) - 1, n_heads * (s_k + 1) - 1), np.nan, dtype=np.float32)
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = layer * (s_q + 1), head * (s_k + 1)
            image[r : r + s_q, c : c + s_k] = thumbs[layer, head]
    return image


def model_view(
    weights: np.ndarray,
    size: int = THUMBNAIL,
    selected: tuple[int, int] | None = None,
    first_layer: int = 0,
    row_px: int = ROW_PX,
    spans: Sequence[str] = (),
    windows: Sequence[int | None] = (),
    n_tokens: int | None = None,
) -> go.Figure:
    """All heads of all layers; each thumbnail is its head's attention (queries down, keys across), pooled. Each
    thumbnail is a click target naming (layer, head); `first_layer` numbers the first row (one layer's heads, or a
    window of layers); `row_px`: each layer's row this tall on screen (thumbnail_px); `spans`: each drawn layer's
    kind ('local', 'global'), named beside its number where a model has both. `windows`: each drawn layer's sliding
    window (None: global) of a self-attention over `n_tokens` tokens (default: the thumbnails' side, drawn unpooled):
    the cells a local layer's window hides wholly are greyed, as heatmap.head_heatmap greys them."""
    n_layers, n_heads, t_q, t_k = weights.shape
    s_q, s_k = -(-t_q // factor(t_q, size)), -(-t_k // factor(t_k, size))  # the thumbnail size pool() produces
    shapes = []
    if selected is not None:
        layer, head = selected
        r, c = (layer - first_layer) * (s_q + 1), head * (s_k + 1)
        line = {"color": "#d62728", "width": 2}
        shapes.append(
            {"type": "rect", "x0": c - 0.5, "x1": c + s_k - 0.5, "y0": r - 0.5, "y1": r + s_q - 0.5, "line": line}
        )
    head_ticks = [h * (s_k + 1) + (s_k - 1) / 2 for h in range(n_heads)]
    layer_ticks = [i * (s_q + 1) + (s_q - 1) / 2 for i in range(n_layers)]
    cells = [(i, h) for i in range(n_layers) for h in range(n_heads)]
    names = [f"layer {first_layer + i + 1}, head {h + 1}" for i, h in cells]
    clicks = targets(
        [head_ticks[h] for _, h in cells],
        [layer_ticks[i] for i, _ in cells],
        [(first_layer + i, h, name) for (i, h), name in zip(cells, names, strict=True)],
        "%{customdata[2]}<extra>click to open</extra>",
    )
    data = [go.Heatmap(z=grid(weights, size), **style.sequential(0, 1), showscale=False, hoverinfo="skip"), clicks]
    grey = window_grey(windows, n_tokens or t_q, size, n_heads) if any(w is not None for w in windows) else None
    if grey is not None and np.shape(grey.z) == np.shape(data[0].z):  # cells as pool() drew them
        data.insert(1, grey)
        for row, window in enumerate(windows):  # each local thumbnail's window edge, dashed as on the head view
            path = None if window is None else window_path(n_tokens or t_q, size, window)
            shapes += [
                {
                    "type": "path",
                    "path": path(head * (s_k + 1), row * (s_q + 1)),
                    "line": style.WINDOW_EDGE,
                    "name": EDGE,
                }
                for head in range(n_heads)
                if path is not None
            ]
    # built in one call: every later update_layout/add_shape re-validates and deep-copies the whole figure
    return go.Figure(
        data=data,
        layout={
            **CLICK_LAYOUT,
            "height": max(200, row_px * n_layers + 60),
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            "shapes": shapes,
            "xaxis": {
                "tickmode": "array",
                "tickvals": head_ticks,
                "ticktext": [f"head {h + 1}" for h in range(n_heads)],
                "side": "top",
                "automargin": True,
                "showgrid": False,
                "zeroline": False,
            },
            "yaxis": {
                "tickmode": "array",
                "tickvals": layer_ticks,
                "ticktext": [
                    f"layer {first_layer + i + 1}" + (f" ({spans[i]})" if spans else "") for i in range(n_layers)
                ],
                "autorange": "reversed",
                "automargin": True,
                "showgrid": False,
                "zeroline": False,
                "scaleanchor": "x",
            },
            "plot_bgcolor": "white",
        },
    )


def window_grey(windows: Sequence[int | None], n: int, size: int, n_heads: int) -> go.Heatmap:
    """Over grid()'s image: a grey cell wherever a local layer's window hides every query-key pair of the cell
    (heatmap.outside_window on the cells' first query and last key), NaN elsewhere; named heatmap.OUTSIDE."""
    bounds = edges(n, factor(n, size))  # the cells pool() averages: positions [bounds[i], bounds[i + 1])
    s = len(bounds) - 1
    image = np.full((len(windows) * (s + 1) - 1, n_heads * (s + 1) - 1), np.nan, dtype=np.float32)
    for layer, window in enumerate(windows):
        if window is None:
            continue
        hidden = np.where(outside_window(bounds[:-1], bounds[1:] - 1, window), 1.0, np.nan)
        for head in range(n_heads):
            image[layer * (s + 1) : layer * (s + 1) + s, head * (s + 1) : head * (s + 1) + s] = hidden
    return go.Heatmap(z=image, colorscale=style.OUTSIDE_WINDOW_SCALE, showscale=False, hoverinfo="skip", name=OUTSIDE)


def window_boundary(n: int, size: int, window: int) -> np.ndarray | None:
    """(points, 2) the window's edge on a thumbnail of n tokens pooled to at most `size` cells a side, as (column, row)
    in cell coordinates: the line left of key i - w + 1, the first key query i sees (i - w < j <= i); at a cell a
    token the staircase head_heatmap draws, pooled one corner of it a row of cells (its steps are finer than a
    cell). None where the window hides no key (n <= w)."""
    if window >= n:
        return None
    rows = np.arange(window, n)  # the queries that have a key hidden
    bounds = edges(n, factor(n, size))
    if len(bounds) - 1 == n:  # a cell a token: both corners of each row's step
        points = np.stack([np.repeat(rows - window + 1, 2), np.stack([rows, rows + 1], axis=1).ravel()], axis=1)
    else:  # where each row of cells begins (and the first row hiding anything), and the last row's end
        rows = rows[np.isin(rows, bounds) | (rows == window)]
        points = np.concatenate([np.stack([rows - window + 1, rows], axis=1), [[n - window, n]]])
    # a position's left edge in cells: pool()'s cell i holds positions [bounds[i], bounds[i + 1])
    return np.interp(points, bounds, np.arange(len(bounds), dtype=float)) - 0.5


def window_path(n: int, size: int, window: int):
    """window_boundary as an SVG path for a thumbnail whose first cell is at (column, row): f(column, row) -> path."""
    points = window_boundary(n, size, window)
    if points is None:
        return None
    return lambda x0, y0: "M " + " L ".join(f"{x + x0:g},{y + y0:g}" for x, y in points)


def layer_heads(layer_weights: np.ndarray, layer: int = 0, window: int | None = None) -> go.Figure:
    """(H, Tq, Tk): layer `layer`'s heads side by side, at full resolution up to LAYER_CELLS per side; `window`: a
    local layer's, greyed where it hides whole cells."""
    windows = () if window is None else (window,)
    return model_view(layer_weights[None], size=LAYER_CELLS, first_layer=layer, windows=windows)
