"""The live training curve: label-smoothed loss and next-token accuracy against the step, and the eq. 3 schedule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention_explorer.explorer.figures import style


def loss_curve(
    steps: Sequence[int],
    loss: Sequence[float],
    accuracy: Sequence[float],
    schedule: tuple[Sequence[int], Sequence[float]] | None = None,
    smoothed: bool = True,
) -> go.Figure:
    """Loss on the left axis, teacher-forced next-token accuracy (0..1) on the right; with `schedule` (steps,
    rates), the learning rate of eq. 3 for the whole run in a panel beneath, on the same step axis."""
    rows = 2 if schedule is not None else 1
    figure = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        specs=[[{"secondary_y": True}]] + [[{}]] * (rows - 1),
        row_heights=[0.68, 0.32] if rows == 2 else None,
        vertical_spacing=0.06,
    )
    figure.add_trace(
        go.Scatter(x=list(steps), y=list(loss), name="loss", mode="lines", line={"color": style.head_colour(0)})
    )
    figure.add_trace(
        go.Scatter(
            x=list(steps), y=list(accuracy), name="token accuracy", mode="lines", line={"color": style.head_colour(2)}
        ),
        secondary_y=True,
    )
    if schedule is not None:
        figure.add_trace(
            go.Scatter(
                x=list(schedule[0]),
                y=list(schedule[1]),
                name="learning rate (eq. 3)",
                mode="lines",
                line={"color": style.head_colour(1)},
            ),
            row=2,
            col=1,
        )
        figure.update_yaxes(title={"text": "learning rate"}, tickformat=".1e", row=2, col=1)
    loss_name = "loss (label-smoothed)" if smoothed else "loss (cross-entropy)"
    figure.update_yaxes(title={"text": loss_name}, rangemode="tozero", row=1, col=1, secondary_y=False)
    figure.update_yaxes(
        title={"text": "token accuracy"},
        range=[0, 1],
        tickformat=".0%",
        tick0=0,
        dtick=0.25,  # round percentages, not ticks lined up with the loss axis
        showgrid=False,
        row=1,
        col=1,
        secondary_y=True,
    )
    figure.update_xaxes(title={"text": "training step"}, row=rows, col=1)
    figure.update_layout(
        height=320 if rows == 1 else 460,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.08},
    )
    return figure


# one colour per head (style.CATEGORICAL), one dash per layer: "layer 2 head 3" is told from "layer 2 head 4" at a
# glance
HEAD_COLOURS = style.CATEGORICAL
LAYER_DASHES = ("dot", "solid", "dash", "dashdot")


def head_scores(steps: Sequence[int], induction: np.ndarray, previous: np.ndarray) -> go.Figure:
    """Each head's induction score (left) and previous-token score (right) at every snapshot step: (S, L, H) arrays,
    one line per head: its colour names the head, its dash the layer."""
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        subplot_titles=("Induction score, each head", "Previous-token score, each head"),
        horizontal_spacing=0.04,
    )
    _, n_layers, n_heads = induction.shape
    for col, values in ((1, induction), (2, previous)):
        for layer in range(n_layers):
            for head in range(n_heads):
                colour = HEAD_COLOURS[head % len(HEAD_COLOURS)]
                figure.add_trace(
                    go.Scatter(
                        x=list(steps),
                        y=values[:, layer, head].tolist(),
                        name=f"layer {layer + 1} head {head + 1}",
                        legendgroup=f"{layer}-{head}",
                        showlegend=col == 1,
                        mode="lines+markers",
                        line={"color": colour, "width": 2, "dash": LAYER_DASHES[layer % len(LAYER_DASHES)]},
                    ),
                    row=1,
                    col=col,
                )
    figure.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=1, title={"text": "weight"})
    figure.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=2)
    figure.update_xaxes(title={"text": "training step"})
    figure.update_layout(height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return figure
