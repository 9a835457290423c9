"""Figures for the Q/K/V walkthrough: a vector as a strip, and one score per key as bars (with an overview of
every key when only some are drawn)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.labels import escape_tokens, position_label, position_labels, strip_colorbar
from attention_explorer.explorer.figures.zoom import OVERVIEW_CELLS
from attention_explorer.explorer.run import blocks

MAX_LABELS = 40  # rotated tick labels that fit side by side on a full-width chart without touching
ROW = 18  # px per strip row: one 11 px tick label each
LIGHT = "#9e9e9e"
# W^Q, W^K and W^V together send at most as many cells as a long attention map's overview (zoom.OVERVIEW_CELLS a
# side, about 0.35 MB): Gemma 3 270M's three 640 x 256 were 491,520 entries, 2.8 MB, more than the rest of its page
MATRIX_CELLS = OVERVIEW_CELLS**2


def thinned(n: int, max_labels: int) -> list[int]:
    """Every tick position when `n` labels fit, else every k-th one so at most `max_labels` are drawn."""
    step = max(1, math.ceil(n / max(1, max_labels)))
    return list(range(0, n, step))


def _labels(keys: Sequence[str], shown: np.ndarray | None) -> list[str]:
    """Tokens as drawn: alone when every key is drawn, '17: cat' when only some are (so gaps can be read)."""
    if shown is None:
        return escape_tokens(keys)
    return escape_tokens([position_label(int(i), keys[int(i)]) for i in shown])


def _subset(n: int, shown: np.ndarray | Sequence[int] | None) -> np.ndarray | None:
    """None when every key is drawn; otherwise the drawn positions as an int array."""
    if shown is None or len(shown) == n:
        return None
    return np.asarray(shown, dtype=int)


def per_key_bars(
    values: np.ndarray,
    keys: Sequence[str],
    title: str,
    mask: np.ndarray | None = None,
    compare: np.ndarray | None = None,
    compare_name: str = "",
    shown: np.ndarray | Sequence[int] | None = None,
    max_labels: int = MAX_LABELS,
    outside: np.ndarray | None = None,
) -> go.Figure:
    """One bar per key token (numeric x with token tick labels, so repeated tokens stay apart). With `shown` (key
    positions), bars only for those keys and, above them, every key's value as one light line: the overview.
    `outside`: (T,) bool, the keys a local layer's window hides (heatmap.outside_window's row, a prefix of the keys):
    shaded the heatmap's grey (style.OUTSIDE_WINDOW), not the causal mask's light grey, and the window's edge dashed."""
    subset = _subset(len(values), shown)
    index = np.arange(len(values)) if subset is None else subset
    labels = _labels(keys, subset)
    x = list(range(len(index)))
    visible = np.ones(len(values), bool) if mask is None else np.asarray(mask, bool)
    colors = [style.head_colour(0) if visible[i] else "#cccccc" for i in index]
    hover = {"customdata": labels, "hovertemplate": "key %{customdata}<br>%{y:.5f}<extra></extra>"}
    if subset is None:
        hover["hovertemplate"] = "key %{x}: %{customdata}<br>%{y:.5f}<extra></extra>"
    figure = go.Figure(go.Bar(x=x, y=np.asarray(values)[index], marker={"color": colors}, name=title, **hover))
    if compare is not None:
        bars = {
            "x": x,
            "y": np.asarray(compare)[index],
            "name": compare_name,
            "marker": {"color": style.head_colour(1)},
        }
        figure.add_trace(go.Bar(**bars, **hover))
    outside = np.zeros(len(values), bool) if outside is None else np.asarray(outside, bool)
    hidden = [j for j, i in enumerate(index) if not visible[i] and not outside[i]]
    # masked keys get weight 0, so their bars vanish: shade where they are
    shades = _window_shades(outside, index, subset is not None) + [
        {
            "type": "rect",
            "xref": "x",
            "yref": "y domain",
            "x0": j - 0.5,
            "x1": j + 0.5,
            "y0": 0,
            "y1": 1,
            "fillcolor": "#e0e0e0",
            "opacity": 0.5,
            "line": {"width": 0},
            "layer": "below",
        }
        for j in hidden
    ]
    ticks = thinned(len(x), max_labels)
    layout: dict = {
        "shapes": shades,
        "title": {"text": title},
        "height": 300,
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
        "barmode": "group",
        "showlegend": compare is not None,
        "xaxis": {
            "tickmode": "array",
            "tickvals": ticks,
            "ticktext": [labels[j] for j in ticks],
            "tickangle": -60,
            "automargin": True,
        },
        "yaxis": {"automargin": True},
    }
    if subset is not None:
        figure.add_trace(_overview(np.asarray(values), keys, subset))
        layout |= {
            "height": 380,
            "yaxis": {"domain": [0, 0.68], "automargin": True},
            "xaxis2": {"anchor": "y2", "tickfont": {"size": 12}, "nticks": 12, "showgrid": False, "zeroline": False},
            "yaxis2": {
                "domain": [0.82, 1],
                "tickfont": {"size": 12},
                "nticks": 3,
                "title": {"text": f"all {len(values)}", "font": {"size": 12}},
            },
        }
        layout["title"]["text"] = f"{title}: {len(subset)} of {len(values)} keys"
    return figure.update_layout(**layout)


def _window_shades(outside: np.ndarray, index: np.ndarray, overview: bool) -> list[dict]:
    """The keys a local layer's window hides: a grey shade on each drawn bar and, on the overview line of every key
    (`overview`), over their run; a dashed line at the window's edge (on the overview when there is one)."""
    bars = [j for j, i in enumerate(index) if outside[i]]
    shade = {"type": "rect", "fillcolor": style.OUTSIDE_WINDOW, "opacity": 0.6, "line": {"width": 0}, "layer": "below"}
    shades = [{**shade, "xref": "x", "yref": "y domain", "x0": j - 0.5, "x1": j + 0.5, "y0": 0, "y1": 1} for j in bars]
    for shape in shades:
        shape["name"] = "outside the window"
    n_out = int(outside.sum())
    if not n_out:
        return shades
    axis, edge = ("x2", n_out - 0.5) if overview else ("x", len(bars) - 0.5)
    if overview:
        run = {**shade, "xref": "x2", "yref": "y2 domain", "x0": -0.5, "x1": n_out - 0.5, "y0": 0, "y1": 1}
        shades.append({**run, "name": "outside the window (overview)"})
    line = {"type": "line", "xref": axis, "yref": f"{'y2' if overview else 'y'} domain", "x0": edge, "x1": edge}
    return [*shades, {**line, "y0": 0, "y1": 1, "line": style.WINDOW_EDGE, "name": "window edge"}]


def _overview(values: np.ndarray, keys: Sequence[str], shown: np.ndarray) -> go.Scatter:
    """Every key's value as one light line over its position; the drawn keys as dots on it."""
    sizes = np.zeros(len(values))
    sizes[shown] = 6
    return go.Scatter(
        x=np.arange(len(values)),
        y=values,
        xaxis="x2",
        yaxis="y2",
        mode="lines+markers",
        line={"color": LIGHT, "width": 1},
        marker={"size": sizes, "color": style.head_colour(0)},
        name="every key",
        showlegend=False,
        customdata=escape_tokens(keys),
        hovertemplate="key %{x}: %{customdata}<br>%{y:.5f}<extra></extra>",
    )


def vector_strip(
    rows: np.ndarray, row_labels: Sequence[str], title: str, shown: np.ndarray | Sequence[int] | None = None
) -> go.Figure:
    """Vectors as coloured strips (rows x dimensions), diverging around zero; with `shown`, only those rows
    (labelled by position), coloured on the scale of every row so a row looks the same whichever are drawn."""
    rows = np.atleast_2d(rows)
    limit = float(np.abs(rows).max()) or 1.0
    subset = _subset(len(rows), shown)
    labels = _labels(row_labels, subset)
    drawn = rows if subset is None else rows[subset]
    ticks = thinned(len(labels), MAX_LABELS)
    height = max(140, ROW * len(labels) + 70)
    # a row's name, unique, is its category (the hover reads it): the drawn keys' are ("17: cat"); every key's rows are
    # their positions; one row, its label. Not a label a cell (customdata): 16 keys of a 256-wide head were 55 KB more
    names = labels if subset is not None or len(labels) == 1 else position_labels(labels)
    figure = go.Figure(
        go.Heatmap(
            z=drawn,
            **style.diverging(limit),
            colorbar=strip_colorbar(limit, height, 50),
            y=names,
            hovertemplate="%{y}<br>dim %{x}<br>%{z:.5f}<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": title if subset is None else f"{title}: {len(subset)} of {len(rows)} rows"},
        height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        yaxis={
            "type": "category",
            "tickmode": "array",
            "tickvals": [names[j] for j in ticks],
            "ticktext": [labels[j] for j in ticks],
            "autorange": "reversed",
            "automargin": True,
        },
        xaxis={"title": {"text": "dimension"}, "automargin": True},
    )
    return figure


MINUS_INFINITY = "−∞"
MARKED = 40  # masked keys written "−∞" beside their marker; past this many, the markers and hover say it


def masked_scores(
    masked_scores: np.ndarray,
    mask: np.ndarray,
    keys: Sequence[str],
    title: str,
    shown: np.ndarray | Sequence[int] | None = None,
) -> go.Figure:
    """What the softmax sees (eq. 1 with the decoder's mask, section 3.2.3): visible keys keep their scaled score
    as a bar; a hidden key's score is the value the model wrote over it (finfo.min), drawn as a "−∞" marker below
    the bars, since a bar 3.4e38 long would flatten every other one. With `shown` (key positions), only those keys,
    labelled by position, as the other bars draw them."""
    subset = _subset(len(keys), shown)
    index = np.arange(len(keys)) if subset is None else subset
    labels = _labels(keys, subset)  # one per drawn key
    x = np.arange(len(index)) if subset is not None else index
    seen = np.asarray(mask, bool)[index]
    drawn = np.asarray(masked_scores)[index]
    visible = drawn[seen]
    # every key drawn: x is its position; a chosen few: x counts them, the label names the position
    hover = "key %{x}: %{customdata}" if subset is None else "key %{customdata}"
    figure = go.Figure(
        go.Bar(
            x=x[seen],
            y=visible,
            name="scaled score (visible key)",
            marker={"color": style.head_colour(0)},
            customdata=[labels[j] for j in np.flatnonzero(seen)],
            hovertemplate=f"{hover}<br>%{{y:.5f}}<extra></extra>",
        )
    )
    hidden = np.flatnonzero(~seen)
    if hidden.size:
        floor = min(0.0, float(visible.min()) if visible.size else 0.0)
        figure.add_trace(
            go.Scatter(
                x=x[hidden],
                y=np.full(hidden.size, floor),
                mode="markers+text" if hidden.size <= MARKED else "markers",
                text=[MINUS_INFINITY] * hidden.size,
                textposition="bottom center",
                marker={"symbol": "triangle-down", "size": 9, "color": "#888888"},
                name=f"masked: {MINUS_INFINITY} (the model writes {drawn[hidden][0]:.4g}, float32's minimum)",
                customdata=np.stack([drawn[hidden], np.array([labels[j] for j in hidden], dtype=object)], -1),
                hovertemplate=f"{hover.replace('customdata', 'customdata[1]')}<br>masked: the softmax sees "
                "%{customdata[0]:.4g}<extra></extra>",
            )
        )
    ticks = ticks_for(len(index))
    # thinned: every named label carries its position, so a reader knows how far along it is
    names = labels if len(ticks) == len(index) or subset is not None else _labels(keys, index)
    figure.update_layout(
        title={"text": title if subset is None else f"{title}: {len(index)} of {len(keys)} keys"},
        height=320,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        showlegend=True,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 1, "xanchor": "right"},
        xaxis={
            "tickmode": "array",
            "tickvals": [int(x[j]) for j in ticks],
            "ticktext": [names[j] for j in ticks],
            "tickangle": -60,
        },
    )
    return figure


def ticks_for(n: int, most: int = 40) -> list[int]:
    """Every position up to `most`, else every k-th: a figure never draws more labels than fit."""
    return list(range(0, n, max(1, -(-n // most))))


def projection_matrices(
    matrices: Sequence[np.ndarray],
    names: Sequence[str],
    title: str,
    height: int = 420,
    cells: int | None = MATRIX_CELLS,
) -> go.Figure:
    """W^Q_i, W^K_i, W^V_i side by side as (d_model x d_head) heatmaps on one symmetric scale (clipped at the 99th
    percentile of all their entries, so a few large ones do not wash the rest out) with one colour bar: rows are
    the input's dimensions, columns the head's. Past `cells` entries in all (None: never), each is drawn as block means
    (blocks.fewest_within: the fewest entries a block, rows averaged first), the title and hover saying so."""
    from plotly.subplots import make_subplots  # only this figure needs subplots

    limit = float(np.percentile(np.abs(np.concatenate([m.ravel() for m in matrices])), 99)) or 1.0
    n_rows, n_cols = matrices[0].shape
    f_r, f_c = (1, 1) if cells is None else blocks.fewest_within(n_rows, n_cols, cells // len(matrices))
    rows, cols = _block_names(n_rows, f_r), _block_names(n_cols, f_c)
    value = "%{z:.5f}" if f_r * f_c == 1 else "mean of these entries %{z:.5f}"
    figure = make_subplots(rows=1, cols=len(matrices), subplot_titles=list(names), horizontal_spacing=0.06)
    for i, matrix in enumerate(matrices, start=1):
        figure.add_trace(
            go.Heatmap(
                z=blocks.block_means(matrix, f_r, f_c),
                **style.diverging(limit),
                showscale=i == len(matrices),
                hovertemplate=f"{names[i - 1]}<br>row{'s' * (f_r > 1)} %{{y}} (input dim)<br>"
                f"column{'s' * (f_c > 1)} %{{x}} (head dim)<br>{value}<extra></extra>",
                **({} if rows is None else {"y": rows}),
                **({} if cols is None else {"x": cols}),
            ),
            row=1,
            col=i,
        )
        figure.update_yaxes(autorange="reversed", title_text="input dimension" if i == 1 else None, row=1, col=i)
        figure.update_xaxes(title_text="head dimension", row=1, col=i)
        if cols is not None:  # a block's dimensions by name ("0-7"): a category each, in order
            figure.update_xaxes(type="category", row=1, col=i)
        if rows is not None:  # the same input dimensions in all three: named once, at the left (wider than numbers)
            figure.update_yaxes(type="category", showticklabels=i == 1, row=1, col=i)
    if f_r * f_c > 1:
        title = f"{title}; {blocks_note(n_rows, n_cols, f_r, f_c)}"
    figure.update_layout(title={"text": title}, height=height, margin={"l": 10, "r": 10, "t": 80, "b": 10})
    return figure


def _block_names(n: int, f: int) -> list[str] | None:
    """Each block's dimensions ('0-7', the last what is left), or None when every dimension is its own (f = 1)."""
    if f == 1:
        return None
    ends = blocks.edges(n, f)
    return [f"{a}-{b - 1}" if b - 1 > a else str(a) for a, b in zip(ends[:-1], ends[1:], strict=True)]


def blocks_note(n_rows: int, n_cols: int, f_r: int, f_c: int) -> str:
    """What a cell of projection_matrices is when it is not one entry, with the true block size."""
    rows = f"{f_r} input dimensions" if f_r > 1 else "one input dimension"
    cols = f"{f_c} head dimensions" if f_c > 1 else "one head dimension"
    short = [name for name, n, f in (("row", n_rows, f_r), ("column", n_cols, f_c)) if n % f]
    last = f" (the last {' and '.join(short)} of cells average fewer)" if short else ""
    return f"each cell the mean of {f_r * f_c} entries: {rows} x {cols}{last}"
