"""Operations per layer against the number of tokens n: self-attention's n^2 d and a recurrent layer's n d^2
(table 1), with this sentence's n and the crossover at n = d marked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention_explorer.explorer.figures import style

SELF_COLOUR, RECURRENT_COLOUR, MARK = style.head_colour(0), style.head_colour(4), "#262730"  # blue, vermillion
AXIS = {"automargin": True, "dtick": 1, "tickfont": {"size": 15}}


def operations(
    n: np.ndarray,
    self_attention: np.ndarray,
    recurrent: np.ndarray,
    sentence_n: int,
    d: int,
    max_len: int | None = None,
) -> go.Figure:
    """Both curves on log axes; markers at `sentence_n` on each; a dotted line at the crossover n = d (equal cost,
    d^3), labelled; with `max_len`, a line where the model's input ends."""
    at_self, at_recurrent = sentence_n * sentence_n * d, sentence_n * d * d
    data = [
        go.Scatter(
            x=n,
            y=self_attention,
            mode="lines",
            name="self-attention: n²·d",
            line={"color": SELF_COLOUR, "width": 3},
            hovertemplate="n = %{x}<br>n²·d = %{y:,}<extra>self-attention</extra>",
        ),
        go.Scatter(
            x=n,
            y=recurrent,
            mode="lines",
            name="recurrent: n·d²",
            line={"color": RECURRENT_COLOUR, "width": 3},
            hovertemplate="n = %{x}<br>n·d² = %{y:,}<extra>recurrent</extra>",
        ),
        go.Scatter(
            x=[sentence_n, sentence_n],
            y=[at_self, at_recurrent],
            mode="markers+text",
            name=f"this sentence: n = {sentence_n}",
            marker={"size": 13, "color": [SELF_COLOUR, RECURRENT_COLOUR], "line": {"color": MARK, "width": 2}},
            text=[f"{at_self:,}", f"{at_recurrent:,}"],
            textposition=["bottom right", "top left"],
            textfont={"size": 15},
            hovertemplate="this sentence: n = %{x}<br>%{y:,} operations<extra></extra>",
        ),
    ]
    top = max(float(np.max(recurrent)), float(np.max(self_attention)))
    shapes = [{"type": "line", "x0": d, "x1": d, "y0": 0, "y1": 1, "yref": "paper", "line": {"dash": "dot"}}]
    annotations = [
        {
            "x": np.log10(d),
            "y": np.log10(d**3),
            "text": f"n = d = {d}: self-attention stops being cheaper",
            "showarrow": True,
            "arrowhead": 2,
            "ax": -30,
            "ay": -70,
            "xanchor": "right",
            "font": {"size": 15},
            "bgcolor": "white",
        }
    ]
    if max_len is not None:
        shapes.append(
            {
                "type": "line",
                "x0": max_len,
                "x1": max_len,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"dash": "dash", "color": "#7f7f7f"},
            }
        )
        annotations.append(
            {
                "x": np.log10(max_len),
                "y": 0.02,
                "yref": "paper",
                "text": f"this model reads at most {max_len} tokens",
                "showarrow": False,
                "xanchor": "right",
                "yanchor": "bottom",
                "font": {"size": 15},
                "bgcolor": "white",
            }
        )
    return go.Figure(
        data=data,
        layout={
            "height": 460,
            "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
            # powers of ten only (dtick 1 on a log axis): 15 px labels for 2, 5, 20 ... would crowd
            "xaxis": {"type": "log", "title": {"text": "n: tokens in the sentence"}, **AXIS},
            "yaxis": {
                "type": "log",
                "title": {"text": "operations per layer"},
                **AXIS,
                "range": [0, np.log10(top) + 0.2],
            },
            "legend": {"x": 0.01, "y": 0.99, "bgcolor": "rgba(255,255,255,0.8)", "font": {"size": 15}},
            "shapes": shapes,
            "annotations": annotations,
        },
    )
