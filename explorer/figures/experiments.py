"""Figures for the experiments: a layer x head grid per attention kind (heads turned off, their effect, their share
of a logit), before/after bars, the logit lens and the attribution's parts. Pure: arrays and labels in."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.heatmap import MAX_TICKS, thinned, titled
from attention_explorer.explorer.figures.labels import abbreviated, escape_tokens, position_labels

KIND_TITLES = {
    "encoder_self": "encoder self-attention",
    "decoder_self": "decoder masked self-attention",
    "cross": "cross-attention",
}
BEFORE, AFTER = "#8c8c8c", "#d62728"  # grey: every head on; red: heads turned off


def head_grids(
    grids: dict[str, np.ndarray],
    name: str,
    title: str = "",
    marked: Sequence[tuple[str, int, int]] = (),
    diverging: bool = True,
    number: str = ".3g",
) -> go.Figure:
    """One layer x head grid per attention kind side by side, on one colour scale (diverging: centred at 0); cells
    in `marked` (kind, layer, head) are outlined and named "off"; NaN cells are left blank. Each cell is a click
    target whose customdata is (layer, head, kind index, value)."""
    kinds = list(grids)
    figure = make_subplots(
        rows=1, cols=len(kinds), subplot_titles=[KIND_TITLES[k] for k in kinds], horizontal_spacing=0.08
    )
    finite = np.concatenate([g[np.isfinite(g)] for g in grids.values()]) if grids else np.zeros(0)
    top = float(np.abs(finite).max()) if finite.size else 1.0
    top = top or 1.0
    scale = style.diverging(top) if diverging else style.sequential(float(finite.min()) if finite.size else 0, top)
    safe = html.escape(name, quote=False)
    off = set(marked)
    for col, kind in enumerate(kinds, start=1):
        values = grids[kind]
        n_layers, n_heads = values.shape
        heads = [f"head {h + 1}" for h in range(n_heads)]
        layers = [f"layer {i + 1}" for i in range(n_layers)]
        text = [
            [
                "off" if (kind, i, h) in off else ("" if np.isnan(values[i, h]) else f"{values[i, h]:{number}}")
                for h in range(n_heads)
            ]
            for i in range(n_layers)
        ]
        figure.add_trace(
            go.Heatmap(
                z=values,
                x=heads,
                y=layers,
                text=text,
                texttemplate="%{text}" if n_heads <= 12 else None,
                textfont={"size": 13},
                showscale=col == len(kinds),
                colorbar={"title": {"text": safe}},
                hoverinfo="skip",
                **scale,
            ),
            row=1,
            col=col,
        )
        cells = [(i, h) for i in range(n_layers) for h in range(n_heads)]
        figure.add_trace(
            targets(
                [heads[h] for _, h in cells],
                [layers[i] for i, _ in cells],
                [(i, h, col - 1, float(values[i, h]) if np.isfinite(values[i, h]) else 0.0) for i, h in cells],
                f"{KIND_TITLES[kind]}<br>%{{y}}, %{{x}}<br>{safe} %{{customdata[3]:{number}}}<extra>click</extra>",
            ),
            row=1,
            col=col,
        )
        for i, h in cells:
            if (kind, i, h) in off:
                figure.add_shape(
                    type="rect",
                    x0=h - 0.5,
                    x1=h + 0.5,
                    y0=i - 0.5,
                    y1=i + 0.5,
                    line={"color": "black", "width": 3},
                    row=1,
                    col=col,
                )
        figure.update_yaxes(autorange="reversed", automargin=True, row=1, col=col)
        figure.update_xaxes(automargin=True, row=1, col=col)
    n_layers = max((g.shape[0] for g in grids.values()), default=1)
    figure.update_layout(
        **CLICK_LAYOUT,
        height=max(280, 46 * n_layers + 130),
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        **({"title": titled(html.escape(title, quote=False))} if title else {}),
    )
    return figure


def before_after(
    labels: Sequence[str], before: np.ndarray, after: np.ndarray, name: str, title: str = "", percent: bool = True
) -> go.Figure:
    """Two bars per row (every head on, heads off): the right answer's probability or the loss at each position."""
    x = position_labels(escape_tokens(labels))
    fmt = ".0%" if percent else ".2f"
    figure = go.Figure(
        [
            go.Bar(x=x, y=before, name="every head on", marker_color=BEFORE, hovertemplate=f"%{{x}}<br>%{{y:{fmt}}}"),
            go.Bar(x=x, y=after, name="heads off", marker_color=AFTER, hovertemplate=f"%{{x}}<br>%{{y:{fmt}}}"),
        ]
    )
    ticks = thinned(len(x), MAX_TICKS)
    figure.update_layout(
        barmode="group",
        height=340,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        yaxis={"title": {"text": html.escape(name, quote=False)}, "tickformat": fmt, "automargin": True},
        xaxis={"tickvals": [x[i] for i in ticks], "automargin": True, "tickangle": -45 if len(x) > 12 else 0},
        legend={"orientation": "h", "y": 1.12, "x": 0},
        **({"title": titled(html.escape(title, quote=False))} if title else {}),
    )
    return figure


LENS_TEXT = 24  # positions up to which each cell names its token
# the cells' text must fit its cell: the map's cells span at least this many pixels on a screen 1,440 px wide with the
# sidebar open (about 700 px, less the reads' names on the left and the colour bar; 860 px at 1,600), about CHAR_PX a
# character at 12 px
CELLS_PX = 640
CHAR_PX = 7


SPECIAL_NOTE = " (a special token of the vocabulary: a marker, not text)"


def lens_map(
    reads: Sequence[str],
    positions: Sequence[str],
    top: Sequence[Sequence[str]],
    p: np.ndarray,
    start: int = 0,
    end: int | None = None,
    end_note: str = "",
    specials: Sequence[str] = (),
) -> go.Figure:
    """Reads down (embedding at the top, the model's output at the bottom), positions across (from `start`: a window
    of a long text); each cell is the most likely next token after that read, coloured by its probability, its text
    cut to fit the cell (the whole token on the hover). `end`: the position the text ends at, whose column's hover
    and label carry `end_note` (nothing in the text follows it). A cell whose token is one of the tokenizer's
    `specials` ('<filename>') says so in its hover."""
    labels = list(positions)
    shown_end = end is not None and start <= end < start + len(labels)
    if shown_end:
        labels[end - start] = f"{labels[end - start]} (text ends)"
    x = position_labels(escape_tokens(labels), start)
    y = [html.escape(r, quote=False) for r in reads]
    words = [escape_tokens(row) for row in top]
    ends = [
        "<br>" + html.escape(end_note, quote=False) if shown_end and start + i == end and end_note else ""
        for i in range(len(labels))
    ]
    marked = set(specials)
    notes = [[(SPECIAL_NOTE if t in marked else "") + ends[i] for i, t in enumerate(row)] for row in top]
    customdata = np.stack([np.array(words, dtype=object), np.array(notes, dtype=object)], axis=-1)
    show_text = len(positions) <= LENS_TEXT
    chars = max(2, CELLS_PX // max(len(positions), 1) // CHAR_PX)
    # cut before escaping: an ellipsis never splits "&amp;"
    text = [escape_tokens([abbreviated(t, chars) for t in row]) for row in top] if show_text else None
    ticks = thinned(len(x), MAX_TICKS)
    figure = go.Figure(
        go.Heatmap(
            z=p,
            x=x,
            y=y,
            customdata=customdata,
            text=text,
            texttemplate="%{text}" if show_text else None,
            textfont={"size": 12},
            **style.sequential(0, 1),
            colorbar={"title": {"text": "probability"}, "tickformat": ".0%"},
            hovertemplate="%{y}<br>position %{x}<br>next: %{customdata[0]} (%{z:.1%})%{customdata[1]}<extra></extra>",
        )
    )
    figure.update_layout(
        height=max(320, 34 * len(reads) + 150),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis={"autorange": "reversed", "automargin": True},
        xaxis={"tickvals": [x[i] for i in ticks], "automargin": True, "tickangle": -45 if len(x) > 12 else 0},
    )
    return figure


MOST_READS = 14  # reads named under each line chart; a 30-layer stack's 61 reads are named every fifth


# the rank axis's plot area at its smallest (presenter mode's 360 px figure less its margins, subplot titles and the
# reads named under it) and the room a tick label needs there (16 px text and a gap)
RANK_PLOT_PX = 200
RANK_LABEL_PX = 24


def rank_ticks(worst: int) -> list[int]:
    """Ranks to mark on a log axis from 1 to `worst`: 1, 2, 5, 10, 20, 50, ... and `worst` itself, or only the powers
    of ten where 1, 2, 5 do not fit; a tick less than RANK_LABEL_PX from the one below it, or from `worst`, on a
    RANK_PLOT_PX axis left out, so even in presenter mode's 16 px text a real vocabulary's tens of thousands of ranks
    keep their labels apart (10000 beside 14221 overlapped)."""
    decades = np.log10(worst * 1.25 / 0.8)  # the axis's range (rank_lines)
    closest = 10 ** (RANK_LABEL_PX * decades / RANK_PLOT_PX)  # the ratio of two ranks RANK_LABEL_PX apart
    steps = (1, 2, 5) if closest <= 2 else (1,)  # 1, 2, 5 are at most 2.5 apart: each kept where that fits
    ticks = sorted(m * 10**e for e in range(len(str(worst)) + 1) for m in steps if m * 10**e < worst)
    kept = [1]
    for t in ticks[1:]:
        if t >= kept[-1] * closest:
            kept.append(t)
    return [*(t for t in kept if t * closest <= worst), worst] if worst > 1 else [1]


def rank_lines(
    reads: Sequence[str], rank: np.ndarray, probability: np.ndarray, target: str, name: str = "the right answer"
) -> go.Figure:
    """The target's rank (log scale, 1 at the top) and probability after each read, for one position; `name`: what
    the target is (the right answer, or the model's own greedy output where no right answer is known)."""
    y_reads = [html.escape(r, quote=False) for r in reads]
    x = list(range(len(reads)))  # numeric: a deep stack's reads are named on fewer ticks, every point keeps its name
    shown = thinned(len(reads), MOST_READS)
    figure = make_subplots(rows=1, cols=2, subplot_titles=["rank (1 = most likely)", "probability"])
    for col, (name_, y) in enumerate((("rank", rank), ("probability", probability)), start=1):
        figure.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=name_,
                showlegend=False,
                customdata=y_reads,
                hovertemplate="%{customdata}<br>%{y}<extra></extra>",
            ),
            1,
            col,
        )
    worst = max(int(np.nanmax(rank)), 1) if len(rank) else 1
    ticks = rank_ticks(worst)
    # log scale from rank 1 (top) down to the worst rank: every tick a whole rank, named in full (not Plotly's 2, 5)
    top, bottom = np.log10(0.8), np.log10(worst * 1.25)
    figure.update_yaxes(type="log", range=[bottom, top], tickvals=ticks, ticktext=[str(t) for t in ticks], row=1, col=1)
    figure.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=2)
    figure.update_xaxes(tickangle=-45, automargin=True, tickvals=shown, ticktext=[y_reads[i] for i in shown])
    figure.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        title=titled(f"{html.escape(name, quote=False)} {html.escape(target, quote=False)} across the layers"),
    )
    return figure


def part_bars(names: Sequence[str], values: np.ndarray, most: int = 16, title: str = "") -> go.Figure:
    """The largest parts of a logit by size, positive (helping) right of 0, negative left."""
    order = np.argsort(-np.abs(values), kind="stable")[:most][::-1]
    labels = [html.escape(names[i], quote=False) for i in order]
    shown = values[order]
    figure = go.Figure(
        go.Bar(
            x=shown,
            y=labels,
            orientation="h",
            marker_color=["#2166ac" if v >= 0 else "#b2182b" for v in shown],
            hovertemplate="%{y}<br>%{x:.3f}<extra></extra>",
            text=[f"{v:+.2f}" for v in shown],
            textposition="outside",
            cliponaxis=False,
        )
    )
    low, high = min(0.0, float(shown.min(initial=0))), max(0.0, float(shown.max(initial=0)))
    room = 0.15 * (high - low or 1.0)  # each bar's number sits past its end: room for it on both sides
    figure.update_layout(
        height=max(320, 28 * len(order) + 120),
        margin={"l": 10, "r": 40, "t": 40, "b": 10},
        xaxis={"title": {"text": "share of the logit"}, "zeroline": True, "range": [low - room, high + room]},
        yaxis={"automargin": True},
        **({"title": titled(html.escape(title, quote=False))} if title else {}),
    )
    return figure


def layer_bars(names: Sequence[str], changes: np.ndarray, axis: str, title: str) -> go.Figure:
    """Layers turned off whole, in the order given (the most hurt first, drawn on top): how the measure moved."""
    changes = np.asarray(changes, dtype=float)
    labels = [html.escape(name, quote=False) for name in names]
    figure = go.Figure(
        go.Bar(
            x=changes,
            y=list(range(len(labels))),
            orientation="h",
            marker_color=["#b2182b" if v < 0 else "#2166ac" for v in changes],
            customdata=labels,
            hovertemplate="%{customdata}<br>%{x:.4f}<extra></extra>",
            text=[f"{v:+.3g}" for v in changes],
            textposition="outside",
            cliponaxis=False,
        )
    )
    low, high = min(0.0, float(changes.min(initial=0))), max(0.0, float(changes.max(initial=0)))
    room = 0.2 * (high - low or 1.0)  # each bar's number sits past its end
    figure.update_layout(
        height=28 * len(labels) + 110,
        margin={"l": 10, "r": 40, "t": 40, "b": 10},
        title=titled(html.escape(title, quote=False)),
        xaxis={"title": {"text": html.escape(axis, quote=False)}, "zeroline": True, "range": [low - room, high + room]},
        # numeric rows with tick text: two layers never merge; reversed, so the first (most hurt) is on top
        yaxis={"tickvals": list(range(len(labels))), "ticktext": labels, "autorange": "reversed", "automargin": True},
    )
    return figure
