"""One attention head as a heatmap: rows are queries (attending), columns are keys (attended to)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, row_targets, targets
from attention_explorer.explorer.figures.labels import escape_tokens, position_labels
from attention_explorer.explorer.run.blocks import block_means, edges, factor

HOVER = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"


MAX_TICKS = 40  # token labels per axis at most: past this every k-th token is named (hover still names each)
# across a figure drawn in half the page's width (about 350 px of plot at 1400 px): labels turn to -90 degrees
# where they do not fit flat, so one label a line height (16 px) fits
NARROW_TICKS = 20
NARROW_THINNED = 12  # past NARROW_TICKS the labels carry positions ('120: tired') and the plot is narrower still
TICK_PX = 16  # a label's line height and gap: down the side, one label per this many pixels at most


def fits_half_width(n_keys: int) -> bool:
    """Whether a map names every one of `n_keys` keys drawn in half the page's width; past NARROW_TICKS a page draws
    its maps one under another at full width instead, where up to MAX_TICKS keys are each named."""
    return n_keys <= NARROW_TICKS


def thinned(n: int, most: int = MAX_TICKS) -> list[int]:
    """Every k-th position of n, k the smallest step that names at most `most` of them (all when n <= most)."""
    step = max(1, -(-n // max(1, most)))
    return list(range(0, n, step))


def token_axis(labels: list[str], title: str, most: int = MAX_TICKS, names: list[str] | None = None, **extra) -> dict:
    """A category axis of position labels (`names`, default '3: the') whose ticks show the (already escaped)
    tokens alone, or past `most` every k-th name in full; automargin so no label is cut off."""
    names = position_labels(labels) if names is None else names
    shown = thinned(len(labels), most)
    return {
        "type": "category",
        "tickmode": "array",
        "tickvals": [names[i] for i in shown],
        # thinned: each named label carries its position, so a reader knows how far along it is
        "ticktext": [labels[i] if len(shown) == len(labels) else names[i] for i in shown],
        "title": {"text": title},
        "automargin": True,
        **extra,
    }


def titled(title: str) -> dict:
    """A title placed in the top margin, which grows to hold it above the tick labels and axis title (never over)."""
    return {
        "text": title,
        "automargin": True,
        "yref": "container",
        "x": 0.02,
        "xanchor": "left",
        "y": 0.995,
        "yanchor": "top",
        "pad": {"t": 4, "b": 8},
    }


def blocks(n: int, size: int) -> np.ndarray:
    """Boundaries of at most `size` blocks of n positions, each of blocks.factor(n, size) positions but the last (what
    model_view.pool averages over)."""
    return edges(n, factor(n, size))


def block_labels(labels: Sequence[str], size: int) -> tuple[list[str], list[str]]:
    """(categories 'i-j: token', ticks 'token'): each block named by its positions and its first token."""
    bounds = blocks(len(labels), size)
    names = [
        f"{a}-{b - 1}: {labels[a]}" if b - a > 1 else f"{a}: {labels[a]}"
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    return names, [labels[a] for a in bounds[:-1]]


def cells_note(f_q: int, f_k: int, values: str = "weights") -> str:
    """What one cell of a block-mean map is, with the true factor: 'each cell averages 8 x 8 weights'."""
    return f"each cell averages {f_q} x {f_k} {values}"


WEIGHT_SCALE = {
    **style.sequential(0, 1),
    "colorbar": {"title": {"text": "weight"}},
    "hovertemplate": HOVER,
}
CLICK_CELLS = 4096  # up to this many cells (64 x 64 tokens) a marker a cell; past it a marker a row (clicks.py)
CLICK_NOTE = "<extra>click: this query step by step</extra>"
CLICK_HOVER = "query %{y}<br>key %{x}<br>weight %{customdata[2]:.4f}" + CLICK_NOTE
DIFFERENCE_HOVER = "query %{y}<br>key %{x}<br>difference %{z:.4g}<extra></extra>"


STRETCH = (1, 99)  # percentiles a stretched map's colours span


def stretched_range(z: np.ndarray) -> tuple[float, float]:
    """The STRETCH percentiles of a map's values: the colour range that shows its structure whatever its spread."""
    low, high = (float(v) for v in np.percentile(z, STRETCH)) if z.size else (0.0, 1.0)
    return low, max(high, low + 1e-9)


def stretched_note(z: np.ndarray) -> str:
    """What a stretched map's colours span, for its title (one line: a colour bar's long title narrows the plot)."""
    low, high = stretched_range(z)
    return f"(colours: {STRETCH[0]}st-{STRETCH[1]}th percentile, {low:.2g} to {high:.2g})"


def diverging_scale(z: np.ndarray) -> dict:
    limit = float(np.abs(z).max()) if z.size else 0.0
    limit = limit or 1e-12  # all zeros: still a valid, centred scale
    return {
        **style.diverging(limit),
        "colorbar": {"title": {"text": "difference"}},
        "hovertemplate": DIFFERENCE_HOVER,
    }


OUTSIDE = "outside the window"  # the name of the trace that greys what a local layer's window hides
EDGE = "window edge"  # the name of the dashed line along a local layer's window


def outside_window(queries: np.ndarray, keys: np.ndarray, window: int) -> np.ndarray:
    """(Tq, Tk) bool: the keys a local layer of `window` keys hides from each query though the causal mask would show
    them (key j before query i, i - j >= window), for query and key positions `queries` and `keys` in the text."""
    behind = queries[:, None] - keys[None, :]
    return behind >= window


def window_edge(hidden: np.ndarray) -> str | None:
    """An SVG path in cell coordinates (column and row indices) along the left edge of each row's window, from the
    (rows, columns) cells it hides (outside_window: a prefix of each row, keys in order): the line between the last
    cell it hides and the first it shows; None when it hides nothing drawn."""
    if not hidden.any():
        return None
    counts = hidden.sum(axis=1)
    first = int(np.flatnonzero(counts)[0])  # from the first row it hides anything in: none on the map's edge above
    points: list[str] = []
    for row in range(first, len(counts)):
        points += [f"{counts[row] - 0.5},{row - 0.5}", f"{counts[row] - 0.5},{row + 0.5}"]
    return "M " + " L ".join(points)


def window_layers(hidden: np.ndarray) -> tuple[go.Heatmap, dict | None]:
    """What a local layer's window adds to its map, from the cells it hides (outside_window): a grey cell on each
    (its weight is 0, as a causal mask's are, but greyed, not blank) and its edge as a dashed line."""
    grey = go.Heatmap(
        z=np.where(hidden, 1.0, np.nan).astype(np.float32),
        colorscale=style.OUTSIDE_WINDOW_SCALE,
        showscale=False,
        hoverinfo="skip",
        name=OUTSIDE,
    )
    path = window_edge(hidden)
    edge = None if path is None else {"type": "path", "path": path, "line": style.WINDOW_EDGE, "name": EDGE}
    return grey, edge


def head_heatmap(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    title: str = "",
    diverging: bool = False,
    clickable: bool = False,
    narrow: bool = False,
    overview: int | None = None,
    stretched: bool = False,
    first: tuple[int, int] = (0, 0),
    blocked: bool = False,
    window: int | None = None,
) -> go.Figure:
    """softmax(QK^T/sqrt(d_k)) for one head (eq. 1) with query tokens down the side and key tokens across.
    diverging: a difference of two such maps, on a red-blue scale centred at zero and symmetric about it.
    clickable: a click on a row names its query (for a block of rows: its first query) in the click target's
    customdata[0]: up to CLICK_CELLS cells one target a cell (query, key, weight), past it one a row (clicks.py).
    narrow: drawn in half the page's width, so fewer key labels fit across.
    overview: past this many tokens a side, cells are means over blocks of tokens (named 'i-j: token').
    stretched: colours span the map's own 1st to 99th percentile (named on the colour bar), not 0 to 1: for maps
    whose values are spread thin (rollout over hundreds of tokens) or evenly (flow).
    first: the positions of the first query and key drawn, for a region of a longer map (figures.zoom): labels and
    click targets name the text's own positions.
    blocked: `weights` are already the `overview`'s block means (reduced while a run held each layer).
    window: a local layer's sliding window of keys (self-attention, queries and keys the same positions): the keys it
    hides are drawn grey, not blank as the causal mask's, and its edge dashed; as block means, the blocks it hides
    wholly (their first query is `window` or more past their last key)."""
    expected = (len(queries), len(keys))
    if blocked:
        if overview is None:
            raise ValueError("block means need the overview they were made for")
        expected = (len(blocks(len(queries), overview)) - 1, len(blocks(len(keys), overview)) - 1)
    if weights.shape != expected:
        raise ValueError(f"weights {weights.shape} do not match {len(queries)} queries x {len(keys)} keys")
    q_labels, k_labels = escape_tokens(queries), escape_tokens(keys)
    n = max(len(queries), len(keys))
    # tall enough to name every query when they fit (up to MAX_TICKS): thinning is for long inputs only
    size = max(320, min(900, max(24 * n + 160, 220 + TICK_PX * min(n, MAX_TICKS) + TICK_PX)))
    # float32: the model's own precision, and half the bytes of float64 on the wire (a 512 x 512 map is 1.4 MB)
    weights = np.asarray(weights, dtype=np.float32)
    if overview is not None and (blocked or max(weights.shape) > overview):
        y, q_ticks = block_labels(q_labels, overview)
        x, k_ticks = block_labels(k_labels, overview)
        f_q, f_k = factor(len(queries), overview), factor(len(keys), overview)
        weights = weights if blocked else block_means(weights, f_q, f_k)
        # short: a half-width chart has room for one line (a second line, <br>, made Plotly drop the whole title)
        title = f"{title} ({cells_note(f_q, f_k)})"
        q_labels, k_labels = q_ticks, k_ticks
        first_query, first_key = blocks(len(queries), overview)[:-1], blocks(len(keys), overview)[:-1]
        last_key = blocks(len(keys), overview)[1:] - 1
    else:
        # per-position categories, not per-cell hover text: the hover data grows as T, not T^2 (click targets
        # carry the hover only up to CLICK_CELLS; past it they are one a row and the heatmap keeps its own)
        x, y = position_labels(k_labels, first[1]), position_labels(q_labels, first[0])
        first_query, first_key = np.arange(len(queries)) + first[0], np.arange(len(keys)) + first[1]
        last_key = first_key
    # built in one call: every later update_layout re-validates and deep-copies the whole figure
    scale = diverging_scale(weights) if diverging else WEIGHT_SCALE
    if stretched:
        scale = {**scale, **dict(zip(("zmin", "zmax"), stretched_range(weights), strict=True))}
        title = f"{title} {stretched_note(weights)}"
    data = [go.Heatmap(z=weights, x=x, y=y, **scale)]
    click_layout = {}
    if clickable and weights.size <= CLICK_CELLS:
        cells = np.ndindex(weights.shape)
        rows, cols = zip(*cells, strict=True) if weights.size else ((), ())
        custom = [
            (int(first_query[i]), int(first_key[j]), float(weights[i, j])) for i, j in zip(rows, cols, strict=True)
        ]
        data = [
            go.Heatmap(z=weights, x=x, y=y, **{**scale, "hoverinfo": "skip", "hovertemplate": None}),
            targets([x[j] for j in cols], [y[i] for i in rows], custom, CLICK_HOVER),
        ]
        click_layout = CLICK_LAYOUT
    elif clickable:
        marks, click_layout = row_targets([(int(i),) for i in first_query])
        # the heatmap keeps its own label (Plotly tilts it in hovermode "y" when a map has two traces)
        data = [data[0], marks]
    shapes = []
    if window is not None:
        # a cell is hidden when even its first query is `window` past its last key (a token: the same position)
        grey, edge = window_layers(outside_window(np.asarray(first_query), np.asarray(last_key), window))
        grey.update(x=x, y=y)
        data.append(grey)
        shapes = [edge] if edge is not None else []
    rows_fit = max(4, (size - 220) // TICK_PX)  # the plot's height less the key labels above it
    figure = go.Figure(
        data=data,
        layout={
            **click_layout,
            "title": titled(title),
            "height": size,
            "shapes": shapes,
            "margin": {"l": 10, "r": 10, "t": 10, "b": 10, "autoexpand": True},
            "xaxis": token_axis(
                k_labels,
                "key (attended to)",
                (NARROW_TICKS if len(k_labels) <= NARROW_TICKS else NARROW_THINNED) if narrow else MAX_TICKS,
                x,
                side="top",
                autotickangles=[0, -90],
            ),
            "yaxis": token_axis(q_labels, "query (attending)", min(MAX_TICKS, rows_fit), y, autorange="reversed"),
        },
    )
    return figure
