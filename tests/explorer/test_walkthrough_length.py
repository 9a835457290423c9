"""Q/K/V and decoding figures at any length: past a few dozen keys only some are drawn, each with the model's own
value, every key stays in the overview line, and no axis gets more labels than fit."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.walkthrough import MAX_LABELS, per_key_bars, thinned, vector_strip
from attention_explorer.explorer.run import trace, walkthrough
from tests.figdata import array

TEXT = "The animal did not cross the street because it was too tired to walk any further that day. "


def test_strongest_keys_are_the_top_weights_plus_the_query_in_position_order():
    weights = np.array([0.05, 0.4, 0.01, 0.3, 0.02, 0.2, 0.02])
    assert list(walkthrough.strongest_keys(weights, 3, keep=(6,))) == [1, 3, 6]
    assert list(walkthrough.strongest_keys(weights, 3)) == [1, 3, 5]
    assert list(walkthrough.strongest_keys(weights, 10, keep=(6,))) == list(range(7))  # few keys: every one


def test_window_stays_inside_the_keys():
    assert list(walkthrough.window_keys(100, 2, 8)) == list(range(8))
    assert list(walkthrough.window_keys(100, 98, 8)) == list(range(92, 100))
    assert list(walkthrough.window_keys(100, 50, 8)) == list(range(46, 54))
    assert list(walkthrough.window_keys(5, 2, 8)) == list(range(5))


def test_thinned_ticks_never_exceed_the_budget():
    for n in (1, 3, 40, 41, 64, 512):
        ticks = thinned(n, MAX_LABELS)
        assert len(ticks) <= MAX_LABELS and ticks[0] == 0 and ticks == sorted(set(ticks))


@pytest.fixture(scope="module", params=[3, 64, 512])
def long_steps(request, minilm):
    """One head's steps for the last query of a sentence cut to exactly n tokens."""
    result = trace.run(minilm, TEXT * 40, request.param)
    assert len(result.source_tokens) == request.param
    return walkthrough.steps(result, "encoder_self", 3, 1, request.param - 2), result.source_tokens


def test_bars_draw_the_walkthroughs_values_for_the_keys_shown_and_every_key_in_the_overview(long_steps):
    s, keys = long_steps
    n = len(keys)
    shown = walkthrough.strongest_keys(s.weights, 16, keep=(s.query,))
    for values in (s.raw_scores, s.scaled_scores, s.weights):
        fig = per_key_bars(values, keys, "bars", s.mask, shown=shown).to_dict()
        bars = fig["data"][0]
        np.testing.assert_array_equal(array(bars["y"]), values[shown])
        ticks = list(fig["layout"]["xaxis"]["ticktext"])
        assert len(ticks) == len(shown) <= 16 + 1
        if n <= 16:
            assert len(fig["data"]) == 1 and ticks == list(keys)  # short: every key, the tokens alone
        else:
            assert s.query in shown and ticks == [f"{i}: {keys[i]}" for i in shown]
            overview = fig["data"][-1]
            np.testing.assert_array_equal(array(overview["y"]), values)  # the overview holds every key
            np.testing.assert_array_equal(array(overview["x"]), np.arange(n))
            assert fig["layout"]["height"] <= 400


def test_strips_draw_the_walkthroughs_rows_for_the_keys_shown(long_steps):
    s, keys = long_steps
    shown = walkthrough.strongest_keys(s.weights, 16, keep=(s.query,))
    for rows in (s.k, s.v, s.weighted_values):
        fig = vector_strip(rows, keys, "strip", shown).to_dict()
        np.testing.assert_array_equal(array(fig["data"][0]["z"]), rows[shown])
        assert fig["layout"]["height"] <= 18 * 17 + 70  # never 9,000 px tall
        limit = float(np.abs(rows).max())  # colours on every row's scale: a row looks the same wherever drawn
        assert (fig["data"][0]["zmin"], fig["data"][0]["zmax"]) == (-limit, limit)


def test_a_window_draws_consecutive_keys(long_steps):
    s, keys = long_steps
    shown = walkthrough.window_keys(len(keys), s.query, 40)
    fig = per_key_bars(s.weights, keys, "bars", s.mask, shown=shown).to_dict()
    np.testing.assert_array_equal(array(fig["data"][0]["y"]), s.weights[shown])
    assert len(fig["layout"]["xaxis"]["tickvals"]) <= MAX_LABELS


def test_masked_keys_are_shaded_where_they_are_drawn():
    values = np.array([0.5, 0.5, 0.0, 0.0, 0.0])
    mask = np.array([True, True, False, False, False])
    fig = per_key_bars(values, list("abcde"), "w", mask, shown=[0, 1, 3])
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(1.5, 2.5)]  # the third bar drawn is key 3, masked
    assert list(fig.data[0].marker.color) == [style.head_colour(0), style.head_colour(0), "#cccccc"]


def test_decoding_bars_at_a_long_output_fit_a_column(paper_random):
    from attention_explorer.explorer.run import decoding

    result = trace.run(paper_random, "the cat sat on the mat " * 20, 128)
    total = decoding.n_positions(result)
    assert total > 12  # paper-random writes up to 64 tokens
    current = decoding.step(result, total - 1, 0, 0)
    shown = walkthrough.strongest_keys(current.self_weights, 12, keep=(current.index,))
    fig = per_key_bars(
        current.self_weights, current.target_tokens, "self", current.visible, shown=shown, max_labels=12
    ).to_dict()
    np.testing.assert_array_equal(array(fig["data"][0]["y"]), current.self_weights[shown])
    np.testing.assert_array_equal(array(fig["data"][-1]["y"]), current.self_weights)
    assert current.index in shown and len(fig["layout"]["xaxis"]["ticktext"]) == 12


@pytest.mark.parametrize("n_rows", [1, 2, 4, 8, 16])
def test_thin_strips_label_their_colour_bar_with_labels_that_do_not_overlap(n_rows):
    """Steps 2, 4 and 6 draw vectors one to a few rows tall: the colour bar names its two ends (and 0 where there is
    room), each label a presenter-mode line apart, never Plotly's own ticks every 0.5 squeezed into 50 px."""
    from attention_explorer.explorer.figures.forward import named_strips
    from attention_explorer.explorer.figures.labels import COLORBAR_LABEL_PX, X_AXIS_PX

    rows = np.random.default_rng(n_rows).normal(size=(n_rows, 24)).astype(np.float32)
    rows[0, 3] = -9.0  # the largest magnitude: the strip's scale runs -9 .. 9
    for figure in (
        vector_strip(rows, [f"t{i}" for i in range(n_rows)], "K"),
        named_strips(list(rows), list("abcdefghijklmnop")[:n_rows], "x"),
    ):
        layout = figure.to_plotly_json()["layout"]
        bar = figure.data[0].colorbar
        values = list(bar.tickvals)
        limit = figure.data[0].zmax
        assert values[0] == -limit and values[-1] == limit and values in ([-limit, limit], [-limit, 0.0, limit])
        assert list(bar.ticktext) == [f"{v:.2g}" for v in values]
        plot = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"] - X_AXIS_PX
        assert plot / (len(values) - 1) >= COLORBAR_LABEL_PX  # each label a line apart on the bar
    assert vector_strip(rows, [f"t{i}" for i in range(n_rows)], "K").data[0].zmax == 9.0  # |-9.0|, read exactly
