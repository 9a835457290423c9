"""Sentences whose truth depends on the model shown: each is measured on that model, and differs where the models
differ (random, pretrained, trained here)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import positions, state, trace, walkthrough
from explorer.wording import NOT_EXPLANATION, starting_note
from models import registry
from tests.app import new_app

pytestmark = pytest.mark.slow

HEAD_PAGES = ("attention", "model_view", "head_view", "find_heads", "statistics", "aggregation", "qkv")
STARTING_PAGES = ("attention", "model_view", "head_view", "statistics", "qkv")


def opened(model: str):
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(model).run()
    return at


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_the_heads_caveat_is_measured_per_model_and_on_every_page_that_shows_heads():
    seen = {}
    for model in ("minilm", "minilm-random", "paper-random", "reverse"):
        at = opened(model)
        for name in HEAD_PAGES:
            at.switch_page(f"explorer/pages/{name}.py").run()
            assert not at.exception, (model, name)
            text = captions(at)
            assert NOT_EXPLANATION in text, (model, name)
            kind = "cross" if model == "reverse" and name != "aggregation" else "encoder_self"  # where each opens
            note = starting_note(registry.load(model).family, kind)
            assert (note in text) == (name in STARTING_PAGES), (model, name)
            assert text.count("The page opens on") == (name in STARTING_PAGES), (model, name)
            seen.setdefault(model, text)
    assert "Pretrained heads" in seen["minilm"] and "Random" not in seen["minilm"]
    assert "toy model trained here" in seen["reverse"]
    assert "most peaked cross-attention head" in seen["reverse"]  # it opens on its alignment, and says so
    # random weights, but most of layer 1's input is position: measured on each model's own embeddings
    for model, share, kind in (
        ("paper-random", "94%", "the paper's sinusoids"),
        ("minilm-random", "86%", "one random"),
    ):
        token, position = positions.input_norms(registry.load(model))
        assert f"position ({kind}" in seen[model] and f"is {share} of what enters layer 1" in seen[model]
        assert f"norm {position:.3g}" in seen[model] and f"{token:.3g}" in seen[model]
    assert "x sqrt(d_model)" in seen["paper-random"] and "x sqrt(d_model)" not in seen["minilm-random"]
    assert "any pattern here is chance" not in " ".join(seen.values())


def test_model_view_asks_for_learned_patterns_only_where_weights_were_learned():
    hints = {}
    for model in ("minilm", "minilm-random", "translate"):
        at = opened(model)
        at.switch_page("explorer/pages/model_view.py").run()
        hints[model] = " ".join(m.value for m in [*at.markdown, *at.caption])  # the scaling note: under the grid
    assert "bright diagonal" in hints["minilm"]
    assert "bright diagonal" not in hints["minilm-random"] and "No head here has learned" in hints["minilm-random"]
    assert "cross-attention" in hints["translate"] and "bright diagonal" not in hints["translate"]
    assert all("scaled to its own maximum" in hint for hint in hints.values())


def test_learned_positions_are_called_similar_only_when_they_are():
    notes = {}
    for model in ("minilm", "minilm-random"):
        at = opened(model)
        at.switch_page("explorer/pages/positional.py").run()
        notes[model] = captions(at)
        learned = positions.tables(registry.load(model))["learned"]
        assert f"{positions.neighbour_cosine(learned):.2f}" in notes[model]
    assert "training made neighbours similar" in notes["minilm"]
    assert "unrelated" in notes["minilm-random"] and "similar" not in notes["minilm-random"]


def test_the_scaling_note_gives_this_querys_measured_spread_not_the_papers_assumption(minilm):
    at = opened("minilm")
    at.switch_page("explorer/pages/qkv.py").run()
    at.selectbox(key="qkv_layer").set_value(0).run()
    at.toggle(key="qkv_what_if_on").set_value(True).run()
    layer, head, query = 0, at.selectbox(key="qkv_head").value, at.selectbox(key="qkv_query").value
    steps = walkthrough.steps(trace.run(minilm, state.DEFAULT_TEXT, 128), "encoder_self", layer, head, query)
    spread = float(np.std(steps.scaled_scores[steps.mask]))
    text = captions(at)
    assert "an assumption" in text and f"standard deviation of {spread:.3g}" in text
    assert "stays near 1 whatever d_k" not in text


def test_a_row_click_on_the_mean_of_heads_says_it_opens_head_1():
    at = opened("minilm")
    at.switch_page("explorer/pages/attention.py").run()
    assert "the click opens head 1" not in captions(at)
    at.selectbox(key="attention_head").set_value(-1).run()
    assert "a mean of heads has no Q, K and V of its own: the click opens head 1" in captions(at)
