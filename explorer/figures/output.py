"""Figures for the output: the next-token distribution beside the smoothed target, and the loss per position."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.labels import escape_tokens, position_label


def distribution_bars(
    tokens: Sequence[str],
    model: np.ndarray,
    target: np.ndarray | None,
    title: str,
    model_name: str = "model",
    smoothed: bool = True,
) -> go.Figure:
    """Chosen tokens of the vocabulary: the model's probability and the target's (label-smoothed, or one-hot when
    the model trains without smoothing), side by side; no target (None): the model's bars alone."""
    target_name = "target (label-smoothed)" if smoothed else "target (the right token)"
    labels = escape_tokens(tokens)
    y = list(range(len(labels)))
    hover = {"customdata": labels, "hovertemplate": "%{customdata}<br>%{x:.5f}<extra></extra>"}
    bars = [go.Bar(x=model, y=y, orientation="h", name=model_name, marker={"color": style.head_colour(0)}, **hover)]
    if target is not None:
        bars.append(
            go.Bar(x=target, y=y, orientation="h", name=target_name, marker={"color": style.head_colour(2)}, **hover)
        )
    figure = go.Figure(bars)
    figure.update_layout(
        title={"text": title},
        barmode="group",
        height=max(260, BAR_PX * len(labels) + 100),
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": {"text": "probability"}, "range": [0, 1]},
        yaxis={"tickmode": "array", "tickvals": y, "ticktext": labels, "autorange": "reversed", "automargin": True},
        legend={"orientation": "h", "y": -0.15},
    )
    return figure


BAR_PX = 34  # a probability bar's row: two bars (model and target) and a 13 px label, 11 rows on the first screen
FLOOR_LABEL_PX = 100  # the right margin: "floor 0.932" at 16 px (presenter mode) beside the plot
MAX_TICKS = 64  # past this many steps the axis names every n-th step only (hover names each)


def loss_bars(
    targets: Sequence[str],
    per_token: np.ndarray,
    nll: np.ndarray,
    floor: float,
    smoothed: bool = True,
    token: str = "right",
) -> go.Figure:
    """Per decoding step: the loss (label-smoothed where the model trains so) and plain -log p(right token), with the
    loss's floor. Each step is labelled with the token it should write at its position (the start token is
    position 0)."""
    labels = escape_tokens([position_label(i + 1, t) for i, t in enumerate(targets)])
    x = list(range(len(labels)))
    hover = {"customdata": labels, "hovertemplate": "%{customdata}<br>%{y:.4f}<extra></extra>"}
    bars = [go.Bar(x=x, y=nll, name=f"-log p({token} token)", marker={"color": style.head_colour(1)}, **hover)]
    if smoothed:  # without smoothing the loss is -log p itself: one bar says it
        bars.insert(
            0, go.Bar(x=x, y=per_token, name="label-smoothed loss", marker={"color": style.head_colour(0)}, **hover)
        )
    figure = go.Figure(bars)
    mean = float(np.mean(per_token))
    # the floor's label in the right margin beside its line, the mean's above its own: a trained model's mean sits
    # just over the floor, and a floor of 0 (no smoothing) would put a label under the line on the token labels
    floor_line = {"dash": "dot", "color": style.head_colour(2)}
    figure.add_hline(y=floor, line=floor_line, annotation_text=f"floor {floor:.3f}", annotation_position="right")
    mean_line = {"dash": "dash", "color": style.REFERENCE}  # black beside the green floor: apart for every reader
    figure.add_hline(y=mean, line=mean_line, annotation_text=f"mean {mean:.3f}", annotation_position="top right")
    figure.update_layout(
        title={"text": "Loss per position"},  # the ticks name what each position should write
        barmode="group",
        height=340,  # under the step's title, numbers and metrics on the first screen
        # automargin grows the margins to fit tick labels and axis titles: an export keeps them whole and apart
        margin={"l": 10, "r": FLOOR_LABEL_PX, "t": 40, "b": 10, "pad": 4},
        xaxis={
            "tickmode": "array",
            "tickvals": x[:: max(1, -(-len(x) // MAX_TICKS))],
            "ticktext": labels[:: max(1, -(-len(x) // MAX_TICKS))],
            "tickangle": -45,
            "automargin": True,
        },
        yaxis={"title": {"text": "nats", "standoff": 10}, "automargin": True, "rangemode": "tozero"},
        legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
    )
    return figure
