"""Forward pass and Output and loss pages through app.py, for every model, at 3 tokens and at the model's most."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state, store
from attention_explorer.explorer.run import forward, movement, output, trace
from attention_explorer.models import registry, tasks
from tests import tolerance
from tests.app import new_app
from tests.figdata import array, plain, spec

MODELS = ("minilm", "paper-random", "translate", "reverse")
LONG = {
    "minilm": "the street " * 300,
    "paper-random": "the street " * 300,
    "translate": "the cat sees a dog " * 8,
    "reverse": "one two three " * 12,
}


@pytest.fixture(scope="module")
def models():
    return {key: registry.load(key) for key in MODELS}


def charts(at: AppTest) -> list[dict]:
    return [spec(c) for c in at.get("plotly_chart")]


def opened(key: str, max_tokens: int, text: str | None = None) -> AppTest:
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    if text is not None:
        at.sidebar.text_area[0].set_value(text).run()
    at.sidebar.number_input[0].set_value(max_tokens).run()
    return at


def differences(at: AppTest) -> list[float]:
    """Every 'max |difference| = ...' the page states; each must say the recomputed row equals the model's own
    (within float32 rounding of the row's own chain of sums: explorer.run.forward.rounding_bound)."""
    texts = [c.value for c in [*at.caption, *at.markdown] if "max |difference|" in c.value]
    assert not [t for t in texts if "DIFFERS" in t], texts
    found = [re.search(r"max \|difference\| = (\d\.\de[+-]\d+)", t) for t in texts]
    return [float(m.group(1)) for m in found if m]


@pytest.mark.parametrize("key", MODELS)
@pytest.mark.parametrize("size", ["short", "long"])
def test_forward_and_output_pages_show_the_models_numbers(models, key, size):
    loaded = models[key]
    max_tokens = 3 if size == "short" else loaded.max_tokens
    text = None if size == "short" else LONG[key]
    at = opened(key, max_tokens, text)
    expected = trace.run(loaded, at.session_state[state.TEXT], max_tokens)
    at.switch_page("explorer/pages/forward.py").run()
    asked = [b for b in at.button if b.key.startswith(store.FIRST_RUN)]
    if asked:  # a long first run (an encoder-decoder's greedy decoding of 64 tokens too) waits for its click
        asked[0].click().run()
    assert not at.exception
    figs = charts(at)
    position = at.selectbox(key="qkv_query").value
    e = forward.embedding(loaded, expected, "encoder", position)
    np.testing.assert_array_equal(array(figs[0]["data"][0]["z"])[0], e.row)
    bound = forward.rounding_bound(loaded.model.config, len(expected.source_tokens), e.traced)  # one row recomputed
    tolerance.assert_within(array(figs[0]["data"][0]["z"])[-1], e.traced, bound, "the drawn input to layer 1")
    checks = differences(at)
    assert len(checks) >= 3  # and none says DIFFERS (differences)
    moved = movement.movement(expected, "encoder")
    path = figs[-2]["data"]
    np.testing.assert_allclose(array(path[0]["y"])[1:], moved.norms[:, :, position].ravel(), rtol=1e-6)
    heat = array(figs[-1]["data"][0]["z"])
    assert heat.shape == (moved.change.shape[0] * moved.change.shape[1], len(expected.source_tokens))
    assert len(figs[-1]["layout"]["xaxis"]["tickvals"]) <= 40  # ticks thinned past 40 tokens
    if size == "long":  # no per-token strip: every strip holds a few named vectors
        assert all(array(f["data"][0]["z"]).shape[0] <= 8 for f in figs[:-2] if "z" in f["data"][0])
    at.switch_page("explorer/pages/output.py").run()
    assert not at.exception
    if not loaded.is_encoder_decoder:
        assert "encoder-only" in at.info[0].value and not at.get("plotly_chart")
        return
    ids, _ = output.target_for(loaded, expected)
    scored = output.score(loaded, forward.token_ids(loaded, expected, "encoder"), ids)
    loss = charts(at)[0]["data"]
    np.testing.assert_allclose(array(loss[0]["y"]), scored.per_token, rtol=1e-6)
    assert at.metric[0].value == f"{scored.mean:.4f}"
    assert at.metric[1].value == f"{output.loss_floor(scored.vocab_size):.4f}"


def test_forward_page_steps_through_the_decoder_of_translate(models):
    loaded = models["translate"]
    at = opened("translate", 32)
    at.switch_page("explorer/pages/forward.py").run()
    at.radio(key="forward_stack").set_value("decoder").run()
    at.selectbox(key="qkv_query").set_value(2).run()
    at.selectbox(key="qkv_layer").set_value(1).run()
    assert not at.exception
    expected = trace.run(loaded, loaded.example, 32)
    layer = forward.layer(loaded, expected, "decoder", 1, 2)
    figs = charts(at)
    cross = array(figs[2]["data"][0]["z"])  # masked self-attention, cross-attention, feed-forward hidden, ...
    np.testing.assert_allclose(cross[1], layer.sublayers[1].output, atol=1e-6)
    assert differences(at)  # each within its row's float32 rounding


def test_output_page_scores_a_typed_target_and_samples_repeatably(models):
    loaded = models["translate"]
    text = "the small red cat sees a big dog"
    at = opened("translate", 32, text)
    at.switch_page("explorer/pages/output.py").run()
    right = at.metric[0].value
    at.text_input(key="output_target").set_value("le chien voit").run()
    assert not at.exception and float(at.metric[0].value) > float(right)
    at.text_input(key="output_target").set_value("").run()
    at.selectbox(key="output_method").set_value("sample").run()
    at.number_input(key="output_sample_temperature").set_value(3.0).run()
    at.number_input(key="output_seed").set_value(5).run()
    first = at.text[-1].value
    at.number_input(key="output_seed").set_value(6).run()
    at.number_input(key="output_seed").set_value(5).run()
    assert at.text[-1].value == first
    ids = forward.token_ids(loaded, trace.run(loaded, text, 32), "encoder")
    sampled = output.sample(loaded, ids, "sample", 3.0, 10, 0.9, 5, len(ids) + 2)
    assert " ".join(sampled.tokens) in first
    at.text_input(key="output_target").set_value("le chien zzz").run()
    assert "'zzz'" in plain(at.info[0].value) and not at.exception


def test_output_target_of_a_toy_task_is_its_right_answer(models):
    at = opened("reverse", 32, "one two three")
    at.switch_page("explorer/pages/output.py").run()
    assert "three two one <eos>" in at.text[0].value
    assert tasks.get("reverse").expected(("one", "two", "three")).target == ("three", "two", "one")
