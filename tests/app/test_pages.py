"""Every page through app.py, asserting on figure data (the model's own numbers), for both models."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.model_view import grid, layer_window, thumbnail_px
from attention_explorer.explorer.run import trace
from attention_explorer.explorer.run.positions import tables
from tests import tolerance
from tests.app import KIND_KEYS, new_app
from tests.figdata import array, spec

TEXT = "Bark is very cute and he is a dog"


@pytest.fixture
def at():
    app = new_app("attention").run()
    app.sidebar.text_area[0].set_value(TEXT).run()
    return app


def chart_list(app: AppTest) -> list[dict]:
    return [spec(c) for c in app.get("plotly_chart")]


def test_attention_mean_over_heads_and_layer_small_multiples(at, minilm):
    at.selectbox(key="attention_layer").set_value(2).run()
    at.selectbox(key="attention_head").set_value(-1).run()
    figs = chart_list(at)
    expected = trace.run(minilm, TEXT, 128).encoder_self.weights
    mean = expected[2].mean(0)  # the mean over 12 heads, which the page may sum in another order
    tolerance.assert_within(array(figs[0]["data"][0]["z"]), mean, tolerance.reordered(12, mean), "mean over heads")
    np.testing.assert_allclose(array(figs[1]["data"][0]["z"]), grid(expected[2:3], 64), rtol=1e-6, equal_nan=True)


def test_model_view_grid_and_open_in_attention(at, minilm):
    at.switch_page("explorer/pages/model_view.py").run()
    at.selectbox(key="qkv_layer").set_value(3).run()
    at.selectbox(key="qkv_head").set_value(9).run()
    figs = chart_list(at)
    expected = trace.run(minilm, TEXT, 128).encoder_self.weights
    window = layer_window(expected.shape[0], 3, thumbnail_px(expected.shape[1]))  # the layers that fit the screen
    assert 3 in window and len(window) < expected.shape[0]
    drawn = grid(expected[window.start : window.stop], 32)
    np.testing.assert_allclose(array(figs[0]["data"][0]["z"]), drawn, rtol=1e-6, equal_nan=True)
    np.testing.assert_array_equal(array(figs[1]["data"][0]["z"]), expected[3, 9])
    at.button(key="model_open").click().run()
    assert not at.exception
    assert at.selectbox(key="attention_layer").value == 3 and at.selectbox(key="attention_head").value == 9
    np.testing.assert_array_equal(array(chart_list(at)[0]["data"][0]["z"]), expected[3, 9])


def test_head_view_focus_and_heads(at, minilm):
    at.switch_page("explorer/pages/head_view.py").run()
    at.selectbox(key="head_layer").set_value(1).run()
    at.multiselect(key="head_heads").set_value([2]).run()
    at.selectbox(key="head_focus").set_value(4).run()
    fig = next(spec(c) for c in at.get("plotly_chart") if c.key == "head_lines")  # under the heads' colour key
    weights = trace.run(minilm, TEXT, 128).encoder_self.weights[1, 2, 4]
    lines = [t for t in fig["data"] if t.get("mode") == "lines"]
    drawn = sorted(int(k) for t in lines for k in t["y"][1::3])
    assert drawn == sorted(int(k) for k in np.argsort(weights)[::-1][:8] if weights[k] >= 0.05)
    assert all(t["y"][0] == 4 for t in lines)
    texts = [t for t in fig["data"] if t.get("mode") == "text"]
    assert list(texts[0]["text"])[1:4] == ["bark", "is", "very"]
    at.multiselect(key="head_heads").set_value([]).run()
    assert "at least one head" in at.info[0].value


def test_positional_page_shows_sinusoid_and_learned_table(at, minilm):
    at.switch_page("explorer/pages/positional.py").run()
    at.slider(key="positional_positions").set_value(40).run()
    figs = chart_list(at)
    model_tables = tables(minilm)
    np.testing.assert_array_equal(array(figs[0]["data"][0]["y"]), model_tables["sinusoidal"][:40, 0])
    z = [array(f["data"][0]["z"]) for f in figs[1:]]
    np.testing.assert_array_equal(z[0], model_tables["sinusoidal"][:40])
    np.testing.assert_array_equal(z[2], model_tables["learned"][:40])
    assert len(figs) == 5


def test_qkv_page_numbers_reproduce_the_weights(at, minilm):
    at.switch_page("explorer/pages/qkv.py").run()
    at.selectbox(key="qkv_layer").set_value(4).run()
    at.selectbox(key="qkv_head").set_value(6).run()
    at.selectbox(key="qkv_query").set_value(9).run()
    assert not at.exception
    figs = {f["layout"]["title"]["text"]: f for f in chart_list(at)}
    q = array(figs["q"]["data"][0]["z"])[0]
    k = array(figs["K (one row per key)"]["data"][0]["z"])
    scores = k.astype(np.float64) @ q.astype(np.float64) / np.sqrt(32)
    recomputed = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    shown = array(figs["softmax weights (the model's)"]["data"][0]["y"])
    expected = trace.run(minilm, TEXT, 128).encoder_self.weights[4, 6, 9]
    np.testing.assert_array_equal(shown, expected)
    # the model's float32 scores: q.k's 32 terms, the division by sqrt(d_head) and softmax's subtraction of the row's
    # largest (two more, relative to |q_i k_i|), and exp's own rounding (about an ulp: 2 eps in the logit)
    dz = tolerance.scores_bound(q[None], k, 2)[0] + 2 * tolerance.EPS32
    bound = tolerance.probabilities_bound(shown, dz)
    tolerance.assert_within(recomputed, shown, bound, "softmax recomputed in float64")
    assert "model (T = 1) vs what-if" not in figs  # not built while its toggle is off
    at.toggle(key="qkv_what_if_on").set_value(True).run()
    at.slider(key="qkv_temperature").set_value(0.5).run()
    what_if = chart_list(at)
    compare = next(f for f in what_if if f["layout"]["title"]["text"] == "model (T = 1) vs what-if")
    assert compare["data"][1]["name"] == "T = 0.5" and array(compare["data"][1]["y"]).max() > shown.max()


@pytest.mark.parametrize("page", ["attention", "model_view", "head_view", "positional", "qkv"])
def test_every_page_works_for_the_random_encoder_decoder(page):
    app = new_app().run()
    app.sidebar.selectbox[0].set_value("paper-random").run()
    app.switch_page(f"explorer/pages/{page}.py").run()
    assert not app.exception and len(app.get("plotly_chart")) >= 1
    if page in ("model_view", "head_view", "qkv"):
        app.radio(key=KIND_KEYS.get(page, f"{page}_kind")).set_value("cross").run()
        assert not app.exception


def test_example_picker_fills_the_sentence(at):
    at.sidebar.selectbox(key="sidebar_example").set_value("Thinking Machines").run()
    fig = chart_list(at)[0]
    assert list(fig["layout"]["xaxis"]["ticktext"]) == ["[CLS]", "thinking", "machines", "[SEP]"]


def test_sentence_box_takes_several_lines_and_keeps_its_limit():
    app = new_app("attention").run()
    box = app.sidebar.text_area[0]
    assert box.max_chars == state.MAX_TEXT and "Ctrl+Enter" in box.help
    box.set_value("The cat sat.\nThe dog ran.").run()
    assert not app.exception
    ticks = list(spec(app.get("plotly_chart")[0])["layout"]["xaxis"]["ticktext"])
    assert ticks == ["[CLS]", "the", "cat", "sat", ".", "the", "dog", "ran", ".", "[SEP]"]
