"""Token-to-token lines for one layer: queries on the left, keys on the right, opacity = attention weight."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.heatmap import OUTSIDE as HIDDEN
from attention_explorer.explorer.figures.heatmap import outside_window
from attention_explorer.explorer.figures.labels import escape_tokens, position_label, position_labels

PALETTE = style.CATEGORICAL  # one colour a head; past nine, the colours come round again dashed (style.head_dash)
LEVELS = (0.05, 0.15, 0.3, 0.5, 0.75)  # weights are drawn in these opacity bands; below the first, not at all
WINDOW = 32  # tokens a column shows at once: past this the view is a window that the page moves
ROW_PX = 22  # pixels a token row takes: WINDOW rows fit one screen
OUTSIDE = "#888"  # the stubs that stand for the tokens above and below the window


def window_start(n: int, focus: int | None = None, size: int = WINDOW, also: int | None = None) -> int:
    """First position of a `size`-token window of n: centred on `focus` where there is one (on the middle of `focus`
    and `also` when both fit in one window: a query and the key it attends to), else at the start."""
    if n <= size or focus is None:
        return 0
    centre = focus if also is None or abs(also - focus) >= size else (focus + also) // 2
    return int(min(max(0, centre - size // 2), n - size))


def _token_column(x: float, y: list[float], labels: list[str], side: str, colors: list[str] | str = "#222"):
    return go.Scatter(
        x=[x] * len(labels),
        y=y,
        mode="text",
        text=labels,
        textposition=f"middle {side}",
        textfont={"color": colors},
        showlegend=False,
        hoverinfo="skip",
    )


def _named(tokens: Sequence[str], positions: bool) -> list[str]:
    """Escaped token labels, with their positions when asked."""
    return escape_tokens(position_labels(tokens) if positions else tokens)


def _column(labels: list[str], first: int, size: int) -> tuple[list[float], list[str], list[str]]:
    """(y, text, colour) of one token column's window [first, first + size), with a grey stub for what is cut."""
    end = min(len(labels), first + size)
    ys, texts = list(range(end - first)), labels[first:end]
    colors = ["#222"] * len(texts)
    if first:
        ys, texts, colors = [-1, *ys], [f"\u25b2 {first} earlier tokens", *texts], [OUTSIDE, *colors]
    if end < len(labels):
        ys, texts, colors = [*ys, end - first], [*texts, f"\u25bc {len(labels) - end} later tokens"], [*colors, OUTSIDE]
    return ys, texts, colors


def _legend_only(head: int) -> go.Scatter:
    """A legend entry for a head with nothing drawn: its colour and dash, no line."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="lines",
        line={"color": style.head_colour(head), "dash": style.head_dash(head), "width": 4},
        name=f"head {head + 1}",
        legendgroup=f"h{head}",
        hoverinfo="skip",
    )


def head_view(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    heads: Sequence[int],
    focus: int | None = None,
    max_lines_per_query: int = 8,
    start: int | None = None,
    size: int = WINDOW,
    window: int | None = None,
) -> go.Figure:
    """weights: (H, Tq, Tk) for one layer. One legend entry (a colour swatch) per head; focus keeps only that
    query's lines. Past `size` tokens both columns show the window [start, start + size) (default: around the
    focus), and a key's weight outside it goes to a stub 'N earlier/later tokens' (their sum).
    window: a local layer's sliding window of keys (self-attention): the keys it hides from the focus query
    (heatmap.outside_window) get a grey square and a grey label, their edge a dashed line, and the stub above counts
    those it holds."""
    n_q, n_k = len(queries), len(keys)
    if start is None:
        start = window_start(max(n_q, n_k), focus, size)
    q0, k0 = min(start, max(0, n_q - size)), min(start, max(0, n_k - size))
    q1, k1 = min(n_q, q0 + size), min(n_k, k0 + size)
    in_window = np.arange(q0, q1)
    rows = in_window if focus is None else np.array([focus]) if q0 <= focus < q1 else np.array([], dtype=int)
    # the keys as drawn: those in the window, then the summed weight above it and below it
    key_y = np.concatenate([np.arange(k1 - k0), [-1, k1 - k0]]).astype(float)
    uppers = (*LEVELS[1:], 1.01)
    traces = []
    for head in heads:
        w = weights[head, rows]  # (R, Tk)
        w = np.concatenate([w[:, k0:k1], w[:, :k0].sum(1, keepdims=True), w[:, k1:].sum(1, keepdims=True)], 1)
        # the strongest keys of each query only, so the lines stay readable
        top = np.argsort(w, axis=1)[:, ::-1][:, :max_lines_per_query]  # (R, k)
        q_idx = np.repeat(rows - q0, top.shape[1])
        k_idx = top.reshape(-1)
        band = np.digitize(w[np.repeat(np.arange(len(rows)), top.shape[1]), k_idx], LEVELS) - 1  # -1: below 0.05
        first = True
        for b, high in enumerate(uppers):
            chosen = band == b
            if not chosen.any():
                continue
            pairs = list(zip(q_idx[chosen].tolist(), key_y[k_idx[chosen]].tolist(), strict=True))
            traces.append(
                go.Scatter(
                    x=[0.0, 1.0, None] * len(pairs),  # one segment per (query, key), None breaks the line
                    y=[y for qi, kj in pairs for y in (float(qi), float(kj), None)],
                    mode="lines",
                    # heavier and darker with the weight: the strong links read from the back of a room
                    line={"color": style.head_colour(head), "dash": style.head_dash(head), "width": 1.5 + 4.5 * high},
                    opacity=min(1.0, 0.3 + high * 0.7),
                    name=f"head {head + 1}",
                    legendgroup=f"h{head}",
                    showlegend=first,
                    hoverinfo="skip",
                )
            )
            first = False
        if first:  # no line of this head in view: its legend entry still shows its colour
            traces.append(_legend_only(head))
    # a window of a longer text names each token with its position ('1500: the'): where it is, not only what
    windowed = max(n_q, n_k) > size
    q_y, q_text, q_colors = _column(_named(queries, windowed), q0, size)
    k_y, k_text, k_colors = _column(_named(keys, windowed), k0, size)
    hidden = np.zeros(n_k, bool)
    if window is not None and focus is not None:
        hidden = outside_window(np.array([focus]), np.arange(n_k), window)[0]
    k_colors = [
        style.OUTSIDE_WINDOW if 0 <= y < k1 - k0 and hidden[k0 + y] else c for y, c in zip(k_y, k_colors, strict=True)
    ]
    if hidden[:k0].any():  # the stub above holds keys the window hides
        k_text[0] += f" ({int(hidden[:k0].sum())} hidden by the window)"
    q_colors = ["#d62728" if focus is not None and y == focus - q0 else c for y, c in zip(q_y, q_colors, strict=True)]
    traces += [_token_column(0, q_y, q_text, "left", q_colors), _token_column(1, k_y, k_text, "right", k_colors)]
    # each query in the window is a click target naming its position: click a token to see only its lines
    names = [f"{position_label(int(i), escape_tokens([queries[i]])[0])}" for i in in_window]
    traces.append(
        targets(
            [0.0] * len(in_window),
            (in_window - q0).tolist(),
            [(int(i), n) for i, n in zip(in_window, names, strict=True)],
            "%{customdata[1]}<extra>click: only its lines</extra>",
        )
    )
    shapes = []
    if hidden.any():  # the keys drawn that the window hides: a grey square each, and the edge after the last
        ys = np.flatnonzero(hidden[k0:k1])
        square = {"symbol": "square", "size": 12, "color": style.OUTSIDE_WINDOW}
        marks = {"mode": "markers", "marker": square, "name": HIDDEN, "hoverinfo": "skip", "showlegend": False}
        traces.append(go.Scatter(x=[1.0] * len(ys), y=ys, **marks))
        edge = int(hidden[k0:k1].sum()) - 0.5  # hidden keys come first: the line between them and the seen ones
        line = {"type": "line", "x0": 0.95, "x1": 1.85, "y0": edge, "y1": edge, "line": style.WINDOW_EDGE}
        shapes.append({**line, "name": "window edge"})
    shown = max(q1 - q0, k1 - k0) + 2 * (max(n_q, n_k) > size)
    return go.Figure(
        data=traces,
        layout={
            **CLICK_LAYOUT,
            "shapes": shapes,
            "height": max(320, ROW_PX * shown + 110),
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            "xaxis": {"range": [-0.9, 1.9], "visible": False, "fixedrange": True},
            "yaxis": {"range": [max(q1 - q0, k1 - k0) + 0.6, -1.6 if shown > size else -0.6], "visible": False},
            "plot_bgcolor": "white",
            "legend": {
                "orientation": "h",
                "y": 1.0,
                "yanchor": "bottom",
                "title": {"text": "click a head to hide it"},
            },
        },
    )
