"""The attention kind in the shareable address, and the toy models opening on the cross-attention that aligns."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import starting, trace
from attention_explorer.models import registry, tasks
from tests.app import new_app
from tests.figdata import array, plain, spec

ADDRESS = {"model": "translate", "kind": "cross", "layer": "2", "head": "3", "token": "1"}
TOY_MAX_TOKENS = 32  # the toy models' limit: an address naming one opens with it


@pytest.fixture(scope="module")
def toy_traces() -> dict[str, trace.Trace]:
    """Each toy model's trace of its own example sentence, as the app opens it."""
    keys = ("translate", "reverse")
    return {key: trace.run(registry.load(key), tasks.get(key).example, TOY_MAX_TOKENS) for key in keys}


def opened(page: str, **params: str) -> AppTest:
    """A new session opened at /page?params, as a copied address opens it."""
    at = new_app(page)
    at.query_params.update(params)
    return at.run()


def figure(at: AppTest, key: str) -> dict:
    return next(spec(c) for c in at.get("plotly_chart") if c.key == key)


def picked(at: AppTest, prefix: str) -> tuple[str, int, int]:
    return (
        at.radio(key=f"{prefix}_kind").value,
        at.selectbox(key=f"{prefix}_layer").value,
        at.selectbox(key=f"{prefix}_head").value,
    )


def notices(at: AppTest) -> str:
    return plain(" ".join(w.value for w in at.warning))


@pytest.mark.parametrize("kind", ["cross", "decoder_self"])
def test_an_address_opens_the_heatmap_on_its_kind_layer_and_head(kind, toy_traces):
    at = opened("attention", **{**ADDRESS, "kind": kind})
    assert not at.exception and not at.warning
    assert picked(at, "attention") == (kind, 1, 2)
    np.testing.assert_array_equal(
        array(figure(at, "attention_heatmap")["data"][0]["z"]), toy_traces["translate"].attention(kind).weights[1, 2]
    )
    assert {name: at.query_params[name] for name in ("kind", "layer", "head")} == {
        "kind": kind,
        "layer": "2",
        "head": "3",
    }


def test_an_address_opens_qkv_on_its_kind_layer_head_and_query_token(toy_traces):
    at = opened("qkv", **ADDRESS)
    assert not at.exception and not at.warning
    assert picked(at, "qkv") == ("cross", 1, 2)
    query = at.selectbox(key=state.QKV_QUERY)
    assert query.value == 1 and query.options[1] == f"1: {toy_traces['translate'].target_tokens[1]}"  # a decoder token
    weights = figure(at, "qkv_weights")["data"][0]["y"]
    np.testing.assert_allclose(array(weights), toy_traces["translate"].cross.weights[1, 2, 1], rtol=1e-6)
    assert {name: at.query_params[name] for name in ADDRESS} == ADDRESS  # the address still names all of it


def test_the_kind_picked_goes_into_the_address():
    at = opened("attention", model="translate")
    at.radio(key="attention_kind").set_value("decoder_self").run()
    assert at.query_params["kind"] == "decoder_self"
    at.selectbox(key="attention_layer").set_value(0).run()
    assert at.query_params["kind"] == "decoder_self" and at.query_params["layer"] == "1"


def test_a_bad_kind_in_the_address_gives_a_notice_and_the_default(toy_traces):
    at = opened("attention", model="translate", kind="sideways", layer="2", head="3")
    assert "kind 'sideways'" in notices(at) and not at.exception
    assert picked(at, "attention") == ("cross", 1, 2)  # the toy model's own default; layer and head still apply
    np.testing.assert_array_equal(
        array(figure(at, "attention_heatmap")["data"][0]["z"]), toy_traces["translate"].cross.weights[1, 2]
    )


def test_a_kind_the_model_lacks_gives_a_notice_and_stays_out_of_the_address():
    at = opened("attention", model="minilm", kind="cross")
    assert not at.exception
    assert "encoder-decoder (cross) attention" in notices(at) and "showing encoder self-attention" in notices(at)
    assert not at.get("radio") and "kind" not in at.query_params


@pytest.mark.parametrize("key", ["translate", "reverse"])
def test_a_toy_model_opens_on_the_cross_attention_head_that_aligns(key, toy_traces):
    at = new_app("attention").run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    result = toy_traces[key]
    link = starting.aligned_link(result.cross.weights, *result.tokens_for("cross"))
    assert picked(at, "attention") == ("cross", link.layer, link.head) and link.layer == 1
    assert at.query_params["kind"] == "cross"
    np.testing.assert_array_equal(
        array(figure(at, "attention_heatmap")["data"][0]["z"]), result.cross.weights[link.layer, link.head]
    )
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value("paper-random").run()
    assert at.radio(key="attention_kind").value == "encoder_self"  # random weights: no alignment to open on
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value("minilm").run()
    assert "kind" not in at.query_params


def test_a_kind_picked_by_hand_stays_when_the_sentence_changes():
    at = new_app("attention").run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value("translate").run()
    at.radio(key="attention_kind").set_value("encoder_self").run()
    at.sidebar.text_area[0].set_value(tasks.get("translate").examples[1]).run()
    assert at.radio(key="attention_kind").value == "encoder_self" and at.query_params["kind"] == "encoder_self"


@pytest.mark.parametrize("key", ["translate", "reverse"])
def test_the_starting_cross_head_shows_the_tasks_right_alignment(key):
    """On every example of the shipped checkpoints: a head of the last layer whose rows point at the right words."""
    loaded, task = registry.load(key), tasks.get(key)
    for text in task.examples:
        result = trace.run(loaded, text, TOY_MAX_TOKENS)
        link = starting.aligned_link(result.cross.weights, *result.tokens_for("cross"))
        right = task.expected(tuple(text.split()))
        assert right is not None and result.output_tokens[:-1] == right.target, text  # the model gets it right
        rows = result.cross.weights[link.layer, link.head].argmax(axis=-1)  # (Tq,) the key each output step reads
        assert link.layer == 1 and rows[: len(right.alignment)].tolist() == list(right.alignment), text
        if key == "reverse":
            n = len(right.target)
            assert right.alignment == tuple(range(n - 1, -1, -1))  # the anti-diagonal
        # the first layer's clearest head is one word off: looking at the word just written, not the one to write
        first = result.cross.weights[0].max(axis=-1).mean(axis=-1).argmax()
        assert result.cross.weights[0, first].argmax(axis=-1)[: len(right.alignment)].tolist() != list(right.alignment)
