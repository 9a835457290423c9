"""The paper's figure 1 for a given configuration, drawn as the lesson's map: every box carries the number of the
lesson step that shows it and opens that step when clicked; arrows for the data flow, the residual connections and
the encoder's output into the decoder."""

from __future__ import annotations

import html
import itertools
from collections.abc import Mapping, MutableMapping

import plotly.graph_objects as go

from attention_explorer.explorer import navigation
from attention_explorer.explorer.figures.clicks import CLICK_LAYOUT, targets
from attention_explorer.explorer.figures.overview_boxes import HEIGHT, ROW, WIDTH, Column, columns, sub_layers
from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import TransformerConfig

COLOURS = {
    "tokens": "#e6e6e6",
    "attention": "#fbe3c2",
    "norm": "#f6f6c4",
    "ffn": "#c9e8f5",
    "embedding": "#f5d0d0",
    "output": "#d9d2ee",
    "loss": "#d5ecd4",
}
LANE = 0.25  # the residual connections run this far outside a stack's boxes (the paper's figure 1 draws them so)
PAD = 0.45  # a stack's dotted bracket, this far outside its boxes
BADGE_INSET = 0.28  # a box's step number sits this far in from its left edge; the label is centred in the rest
TEXT = "#111111"
FLOW, RESIDUAL = "#444444", "#2f6db5"
BADGES = "step numbers"  # the badge trace's `meta`: tests find it by this
TARGET_SPACING = 0.4  # click targets along a box: closer than a row, so the nearest is always the box clicked
# The attention box stands for the steps from query, key and value to the heads joined by W^O: "4–6"
SPANS = {"query_key_value": "multi_head"}

# the map's height on the Overview: at most this tall under the sentence and its tokens, so the whole map is on the
# first screen of 900 px; a button above it (the real model's offer: 40 px and its gap) takes its height from the map
MAP_PX = {"encoder-only": 460, "decoder-only": 470, "encoder-decoder": 470}
OFFER_PX = 56


def map_height(shape: str, offer: bool) -> int:
    """The Overview map's height for a model of this shape, with or without the button above it."""
    return MAP_PX[shape] - (OFFER_PX if offer else 0)


def step_number(stem: str) -> str:
    """The step number a box shows: its lesson step, or a range ("4–6") where one box stands for several steps."""
    first = navigation.BY_STEM[stem].step
    last = navigation.BY_STEM[SPANS[stem]].step if stem in SPANS else None
    return f"{first}–{last}" if last else str(first)


def _arrow(x0: float, y0: float, x1: float, y1: float, colour: str, name: str) -> dict:
    """An arrow annotation from (x0, y0) to its head at (x1, y1), in data units."""
    return {
        "x": x1,
        "y": y1,
        "ax": x0,
        "ay": y0,
        "xref": "x",
        "yref": "y",
        "axref": "x",
        "ayref": "y",
        "text": "",
        "showarrow": True,
        "arrowhead": 2,
        "arrowsize": 1.2,
        "arrowwidth": 2,
        "arrowcolor": colour,
        "standoff": 0,
        "name": name,
    }


def _path(points: list[tuple[float, float]], colour: str, name: str) -> dict:
    """A polyline shape through `points` (the bends of a connection; its last leg is an arrow)."""
    return {
        "type": "path",
        "path": "M " + " L ".join(f"{x},{y}" for x, y in points),
        "line": {"color": colour, "width": 2},
        "name": name,
    }


def _connections(found: list[Column]) -> tuple[list[dict], list[dict]]:
    """(shapes, arrow annotations): the data flow between consecutive boxes, each sub-layer's residual connection
    around it into its Add & Norm, and the encoder's output into every decoder layer's cross-attention."""
    shapes, arrows = [], []
    for column in found:
        # each row's boxes to the next row's: one arrow a box, or a parallel block's fork and join
        rows = [list(row) for _, row in itertools.groupby(column.blocks, key=lambda block: block.y)]
        for below_row, above_row in itertools.pairwise(rows):
            for below, above in itertools.product(below_row, above_row):
                arrows.append(_arrow(below.x, below.y + HEIGHT / 2, above.x, above.y - HEIGHT / 2, FLOW, "flow"))
        lane = column.x + column.side * (WIDTH / 2 + LANE)
        edge = column.x + column.side * WIDTH / 2
        for sub_layer, norm in sub_layers(column):
            branch = sub_layer.y - ROW / 2  # on the sub-layer's input, between it and the box below
            shapes.append(_path([(column.x, branch), (lane, branch), (lane, norm.y)], RESIDUAL, "residual"))
            arrows.append(_arrow(lane, norm.y, edge, norm.y, RESIDUAL, "residual"))
    if len(found) == 2:  # the encoder's last Add & Norm out to the side, over, and into the cross-attention
        encoder, decoder = found
        out = encoder.blocks[encoder.last]
        cross = decoder.blocks[decoder.first + 2]
        right = encoder.x + WIDTH / 2
        gap = (right + PAD + decoder.x - WIDTH / 2 - PAD) / 2
        shapes.append(_path([(right, out.y), (gap, out.y), (gap, cross.y)], FLOW, "memory"))
        arrows.append(_arrow(gap, cross.y, decoder.x - WIDTH / 2, cross.y, FLOW, "memory"))
    return shapes, arrows


def _targets(found: list[Column]) -> go.Scatter:
    """The click targets: a row of invisible markers along each box (and each stack's title), customdata [stem].
    With hoverdistance -1 a click picks the nearest marker, so a row about a box's height apart covers the box."""
    x, y, stems = [], [], []
    for column in found:
        rows = [(block.x - block.width / 2, block.x + block.width / 2, block.y, block.stem) for block in column.blocks]
        rows.append((column.x + 0.2, column.x + 2.4, _title_y(column), "model_view"))
        for left, right, row_y, stem in rows:
            n = int((right - left) / TARGET_SPACING) + 1
            x += [left + (right - left) * (i + 0.5) / n for i in range(n)]
            y += [row_y] * n
            stems += [stem] * n
    labels = [html.escape(f"Click to open {navigation.BY_STEM[stem].label}", quote=False) for stem in stems]
    clicks = targets(x, y, [[stem] for stem in stems], "%{text}<extra></extra>")
    return clicks.update(text=labels)


def _title_y(column: Column) -> float:
    return column.bracket[1] + 0.32 * ROW


def _badges(found: list[Column]) -> go.Scatter:
    """Every box's step number in a circle at its left end, and the stack's (step 8) before its title."""
    x, y, stems = [], [], []
    for column in found:
        x += [block.x - block.width / 2 + BADGE_INSET for block in column.blocks] + [column.x + 0.3]
        y += [block.y for block in column.blocks] + [_title_y(column)]
        stems += [block.stem for block in column.blocks] + ["model_view"]
    return go.Scatter(
        x=x,
        y=y,
        text=[step_number(stem) for stem in stems],
        customdata=stems,
        mode="markers+text",
        marker={"size": 38, "color": "white", "line": {"color": TEXT, "width": 2}},
        textfont={"size": 15, "color": TEXT, "weight": "bold"},
        hoverinfo="skip",  # not a click target: the box's own targets around it are
        showlegend=False,
        meta=BADGES,
    )


def _boxes(column: Column) -> tuple[list[dict], list[dict]]:
    """(shapes, annotations) of a column: its boxes with their labels, and its stack's dotted bracket and title."""
    shapes, annotations = [], []
    for block in column.blocks:
        shapes.append(
            {
                "type": "rect",
                "x0": block.x - block.width / 2,
                "x1": block.x + block.width / 2,
                "y0": block.y - HEIGHT / 2,
                "y1": block.y + HEIGHT / 2,
                "fillcolor": COLOURS[block.kind],
                "line": {"color": "#555555", "width": 1},
                "layer": "below",
            }
        )
        annotations.append(
            {
                "x": block.x + BADGE_INSET,  # centred right of the badge
                "y": block.y,
                "text": "<br>".join(html.escape(line, quote=False) for line in block.label.split("\n")),
                "showarrow": False,
                "font": {"size": 15, "color": TEXT},
            }
        )
    bottom, top = column.bracket
    shapes.append(
        {
            "type": "rect",
            "x0": column.x - WIDTH / 2 - PAD,
            "x1": column.x + WIDTH / 2 + PAD,
            "y0": bottom,
            "y1": top,
            "line": {"color": "#888888", "width": 2, "dash": "dot"},
            "layer": "below",
        }
    )
    annotations.append(  # right of the flow arrow that leaves the stack
        {
            "x": column.x + 0.55,
            "y": _title_y(column),
            "xanchor": "left",
            "text": column.title,
            "font": {"weight": "bold", "size": 15, "color": TEXT},
            "showarrow": False,
        }
    )
    return shapes, annotations


def figure_one(config: TransformerConfig, title: str) -> go.Figure:
    """Figure 1 of the paper with this model's N, h, d_model and d_ff (encoder-only models get the encoder only),
    each box numbered with its lesson step and opening it when clicked. `title` is escaped by the caller."""
    found = columns(config)
    shapes, annotations = _connections(found)
    for column in found:
        column_shapes, column_annotations = _boxes(column)
        shapes += column_shapes
        annotations += column_annotations
    encoder = found[0]
    annotations.append(  # name the residual lane once, outside the encoder's bracket
        {
            "x": encoder.x - WIDTH / 2 - PAD - 0.2,
            "y": sum(encoder.bracket) / 2,
            "text": "residual connections",
            "textangle": -90,
            "showarrow": False,
            "font": {"size": 15, "color": RESIDUAL},
        }
    )
    encoder_decoder = len(found) == 2
    top = max(block.y for column in found for block in column.blocks) + 0.5  # the highest box's top, and a margin
    block = describe(config)
    norm = ("pre-norm RMSNorm" if block.norm == "rms" else "pre-LN") if block.norm_first else "post-LN"
    norm = f"sandwich {block.norm_name} (before and after each sub-layer)" if block.sandwich else norm
    norm += ", parallel block" if block.parallel else ""
    heads = f"h = {block.n_heads}"
    if block.shared_kv:
        heads += f" sharing {block.kv_heads} key/value head{'s' * (block.kv_heads > 1)}"
    figure = go.Figure([_badges(found), _targets(found)])
    figure.update_layout(
        title={"text": f"{title}: d_model = {config.d_model}, d_ff = {config.d_ff}, {heads}, {norm}"},
        shapes=shapes,
        annotations=annotations,
        height=880 if encoder_decoder else round(600 + max(0.0, top - 7.4) * 60),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        xaxis={"visible": False, "range": [-2.7, 7.4] if encoder_decoder else [-3.3, 3.7], "fixedrange": True},
        yaxis={"visible": False, "range": [-0.45, 12.5 if encoder_decoder else max(top, 7.4)], "fixedrange": True},
        plot_bgcolor="white",
        **CLICK_LAYOUT,
    )
    return figure


def clicked_step(point: Mapping | None) -> navigation.Page | None:
    """The lesson step a clicked box names (its click target's customdata [stem]), or None."""
    data = point.get("customdata") if point else None
    stem = data[0] if isinstance(data, list | tuple) and data else data
    page = navigation.BY_STEM.get(stem) if isinstance(stem, str) else None
    return page if page is not None and page.step else None


def open_clicked(session: MutableMapping, key: str, point: Mapping) -> None:
    """A chart's on_click (bound with functools.partial): the clicked box's step becomes the page app.py opens next
    (`session[key]`, the drill-to key)."""
    page = clicked_step(point)
    if page is not None:
        session[key] = page.script
