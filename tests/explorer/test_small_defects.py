"""Issue 12's smaller defects in the figures, on small synthetic arrays."""

from __future__ import annotations

import math

import numpy as np

from attention_explorer.explorer.figures import positional
from attention_explorer.explorer.figures.decoding import top_k_bars
from attention_explorer.explorer.run import positions
from attention_explorer.models.positional import sinusoidal_table
from tests import tolerance
from tests.figdata import array

SAMPLES = positions.SAMPLES_PER_POSITION
EPS64 = float(np.finfo(np.float64).eps)


def test_tiny_next_token_probabilities_are_readable_and_the_chosen_bar_visible():
    # an untrained model over a 37,000-word vocabulary: every probability near 1/37,000
    probabilities = np.array([4.1e-5, 3.9e-5, 3.2e-5, 2.7e-5], dtype=np.float32)
    figure = top_k_bars(["le", "chat", "<b>", "un"], probabilities, "le", "next").to_plotly_json()
    bar = figure["data"][0]
    assert list(bar["text"]) == ["4.1e-05", "3.9e-05", "3.2e-05", "2.7e-05"]  # never "0.000"
    np.testing.assert_array_equal(array(bar["x"]), probabilities)
    xaxis = figure["layout"]["xaxis"]
    assert xaxis["type"] == "log"  # a bar of 4e-5 on a 0..1 line is less than a pixel wide
    low, high = xaxis["range"]
    assert low < math.log10(probabilities.min()) - 0.2 and high >= math.log10(probabilities.max())
    assert bar["marker"]["color"][0] != bar["marker"]["color"][1]  # the chosen one stands out


def test_confident_next_token_probabilities_keep_a_linear_scale():
    figure = top_k_bars(["le", "la"], np.array([0.97, 0.02]), "le", "next").to_plotly_json()
    assert list(figure["data"][0]["text"]) == ["0.970", "0.020"]
    assert figure["layout"]["xaxis"].get("type", "linear") == "linear" and list(figure["layout"]["xaxis"]["range"]) == [
        0,
        1,
    ]


def test_positional_curves_follow_the_sinusoid_between_positions():
    table = sinusoidal_table(20, 8).numpy()
    x, y = positions.sinusoid_curves(20, 8, [0, 1, 3])
    # the same formula as the model's table: its float64 sine rounded once to float32, against the float64 sine at
    # linspace's whole positions (each within a few float64 ulps of the integer): the table holds the float32 nearest
    # a value within those ulps of the curve's, so between the float32 nearest its two ends (rounding keeps order),
    # exactly, on any machine (usually both ends round to one number)
    whole = np.arange(len(table))
    near = 4 * EPS64 * (whole + 1)
    curve = y[::SAMPLES, 0]
    low, high = (curve - near).astype(np.float32), (curve + near).astype(np.float32)
    got = table[:, 0]
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, "the curve at whole positions")
    figure = positional.curves(table, [0, 1, 3], (x, y))
    markers, lines = figure.data[:3], figure.data[3:]
    np.testing.assert_array_equal(array(markers[0].y), table[:, 0])  # the model's values, at whole positions
    assert markers[0].mode == "markers" and lines[0].mode == "lines"
    drawn = array(lines[0].x)
    assert drawn[0] == 0 and drawn[-1] == 19 and np.diff(drawn).max() <= 0.25  # no straight cuts between positions
    # dim 0: sin(pos), dim 1: cos(pos), the angle pos / 10000^0 exactly pos: the same float64 sine, in another shape
    # of array (numpy's SIMD loops and libm: each within a few float64 ulps of the exact value, and |value| <= 1)
    tolerance.assert_within(array(lines[0].y), np.sin(drawn), 8 * EPS64, "dim 0: sin(pos)")
    tolerance.assert_within(array(lines[1].y), np.cos(drawn), 8 * EPS64, "dim 1: cos(pos)")
