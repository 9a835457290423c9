"""The tokens a model read, as boxes: each token's text with its id under it, coloured by its kind."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from attention_explorer.explorer.figures.labels import abbreviated, escape_tokens

# Pale fills that dark text reads on, told apart by lightness as well as hue
COLOURS = {
    "special": "#d9d9d9",
    "whole word": "#c6dbef",
    "piece of a word": "#fdd49e",
    "unknown": "#f4a6b4",
}
COLUMNS = 8  # boxes per row: ~190 px each at 1600 px, room for a 14-character token at 16 px
SHOWN = 24  # three rows
LONGEST = 14  # characters drawn in a box; the hover has the whole token
ROW_PX = 92
BOX_W, BOX_H = 0.94, 0.86
FOCUS_LINE = "#262730"


def token_boxes(
    tokens: Sequence[str],
    ids: Sequence[int],
    kinds: Sequence[str],
    focus: int | None = None,
    shown: int = SHOWN,
    columns: int = COLUMNS,
    raw: Sequence[str] | None = None,
) -> go.Figure:
    """The first `shown` tokens in reading order, `columns` to a row: the token (its text escaped) and its id under
    it, the box coloured by kind (COLOURS); `focus`, a position, is drawn with a thick border. `raw`: the tokens as
    the tokenizer spells them ('Ġcapital' for '␣capital'), named in each box's hover."""
    n = min(len(tokens), shown)
    tokens, ids, kinds = list(tokens[:n]), [int(i) for i in ids[:n]], list(kinds[:n])
    spelt = escape_tokens(tokens if raw is None else raw[:n])
    x = [i % columns + BOX_W / 2 for i in range(n)]
    row = [i // columns for i in range(n)]
    rows = max(1, -(-n // columns))
    shapes = [
        {
            "type": "rect",
            "x0": i % columns,
            "x1": i % columns + BOX_W,
            "y0": row[i],
            "y1": row[i] + BOX_H,
            "fillcolor": COLOURS[kinds[i]],
            "line": {"color": FOCUS_LINE, "width": 4} if i == focus else {"color": "#8c8c8c", "width": 1},
            "layer": "below",
        }
        for i in range(n)
    ]
    escaped = escape_tokens(tokens)
    data = [
        go.Scatter(
            x=x,
            y=[r + 0.32 for r in row],
            mode="text",
            text=[html.escape(abbreviated(t, LONGEST), quote=False) for t in tokens],
            textfont={"size": 17, "color": "#111111"},
            customdata=[
                [i, token_id, kind, token, raw_token]
                for i, (token_id, kind, token, raw_token) in enumerate(zip(ids, kinds, escaped, spelt, strict=True))
            ],
            hovertemplate="position %{customdata[0]}: %{customdata[3]}<br>id %{customdata[1]}<br>"
            "%{customdata[2]}<br>spelt %{customdata[4]}<extra></extra>",
            name="token",
            showlegend=False,
        ),
        go.Scatter(
            x=x,
            y=[r + 0.64 for r in row],
            mode="text",
            text=[str(i) for i in ids],
            textfont={"size": 15, "color": "#444444"},
            hoverinfo="skip",
            name="id",
            showlegend=False,
        ),
    ]
    # one legend entry per kind drawn (a square in the kind's colour)
    data += [
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            marker={"symbol": "square", "size": 16, "color": COLOURS[kind], "line": {"color": "#8c8c8c", "width": 1}},
            name=kind,
        )
        for kind in COLOURS
        if kind in kinds
    ]
    if focus is not None and 0 <= focus < n:
        data.append(
            go.Scatter(x=[None], y=[None], mode="markers", name="the lesson's focused token", marker=_focus_marker())
        )
    return go.Figure(
        data=data,
        layout={
            "shapes": shapes,
            "height": ROW_PX * rows + 70,
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            "xaxis": {"range": [-0.05, columns], "visible": False, "fixedrange": True},
            "yaxis": {"range": [rows, -0.05], "visible": False, "fixedrange": True},
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 15}},
            "plot_bgcolor": "white",
        },
    )


def _focus_marker() -> dict:
    return {"symbol": "square-open", "size": 16, "color": FOCUS_LINE, "line": {"width": 3}}
