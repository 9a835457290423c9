"""The live training curve: label-smoothed loss and next-token accuracy against the step."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go


def loss_curve(steps: Sequence[int], loss: Sequence[float], accuracy: Sequence[float]) -> go.Figure:
    """Loss on the left axis, teacher-forced next-token accuracy (0..1) on the right."""
    return go.Figure(
        data=[
            go.Scatter(x=list(steps), y=list(loss), name="loss", mode="lines", line={"color": "#1f77b4"}),
            go.Scatter(
                x=list(steps),
                y=list(accuracy),
                name="token accuracy",
                mode="lines",
                yaxis="y2",
                line={"color": "#2ca02c"},
            ),
        ],
        layout={
            "height": 320,
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            "xaxis": {"title": {"text": "step"}},
            "yaxis": {"title": {"text": "loss (label-smoothed)"}, "rangemode": "tozero"},
            "yaxis2": {
                "title": {"text": "token accuracy"},
                "overlaying": "y",
                "side": "right",
                "range": [0, 1],
                "tickformat": ".0%",
                "tick0": 0,
                "dtick": 0.25,  # round percentages, not ticks lined up with the loss axis
                "showgrid": False,
            },
            "legend": {"orientation": "h", "y": 1.12},
        },
    )
