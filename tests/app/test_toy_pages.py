"""The trained toy models through app.py: decoding step by step, unknown words, training in the app."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import gpu, state
from attention_explorer.explorer.run import decoding, trace
from attention_explorer.explorer.run.heads import MEAN
from attention_explorer.models import registry, tasks
from tests.app import KIND_KEYS, new_app, stepping
from tests.figdata import array, plain, spec


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


def charts(at: AppTest) -> list[dict]:
    return [spec(c) for c in at.get("plotly_chart")]


def with_model(key: str, text: str | None = None) -> AppTest:
    at = new_app("attention").run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    if text is not None:
        at.sidebar.text_area[0].set_value(text).run()
    return at


def test_switching_to_a_toy_model_brings_its_example_and_a_fitting_limit():
    at = with_model("reverse")
    assert at.sidebar.text_area[0].value == tasks.get("reverse").examples[0]
    assert at.sidebar.number_input[0].value == 32
    assert not at.exception


def test_decoding_page_steps_through_the_greedy_translation(translate):
    text = "the small red cat sees a big dog"
    at = with_model("translate", text)
    stepping(at.switch_page("explorer/pages/decoding.py").run())
    expected = trace.run(translate, text, 32)
    assert at.success[0].value == "The model's output is right: le chat rouge petit voit un chien grand"
    assert at.slider(key="decoding_position").value == 1
    assert at.selectbox(key="decoding_layer").value == 1 and at.selectbox(key="decoding_head").value == MEAN
    for index in range(3):
        if index:
            at.button(key="decoding_next").click().run()
        step = decoding.step(expected, index, layer=1, head=MEAN)
        figs = charts(at)
        assert f"writes '{index + 1}: {step.chosen}'" in plain(at.subheader[0].value)
        np.testing.assert_array_equal(array(figs[0]["data"][0]["y"]), step.self_weights)
        np.testing.assert_array_equal(array(figs[1]["data"][0]["y"]), step.cross_weights)
        np.testing.assert_array_equal(array(figs[2]["data"][0]["x"]), step.top_probabilities)
        assert list(figs[2]["layout"]["yaxis"]["ticktext"])[0] == step.chosen
        np.testing.assert_array_equal(array(figs[3]["data"][0]["z"]), expected.cross.weights[1].mean(0))
    assert [s for s in expected.output_tokens[:3]] == ["le", "chat", "rouge"]
    at.button(key="decoding_back").click().run()
    assert at.slider(key="decoding_position").value == 2


def test_decoding_page_explains_an_encoder_only_model():
    at = new_app().run()
    at.switch_page("explorer/pages/decoding.py").run()
    assert "encoder-only" in at.info[0].value and not at.exception


def test_unknown_word_gets_a_message_with_suggestions():
    at = with_model("reverse", "one two tree fuor")
    assert not at.exception
    message = plain(at.info[0].value)
    assert "'tree'" in message and "'three'" in message and "'fuor'" in message and "'four'" in message
    assert "The 36 words this model knows" in [e.label for e in at.expander]
    assert at.text[0].value.split(", ") == sorted(tasks.REVERSE_WORDS)


@pytest.mark.parametrize("page", ["attention", "model_view", "head_view", "qkv"])
def test_every_view_offers_all_three_attention_kinds(page):
    at = with_model("translate")
    at.switch_page(f"explorer/pages/{page}.py").run()
    for kind in ("decoder_self", "cross"):
        at.radio(key=KIND_KEYS.get(page, f"{page}_kind")).set_value(kind).run()
        assert not at.exception and charts(at)


def test_train_page_trains_snapshots_and_publishes_a_model():
    at = new_app().run()
    at.switch_page("explorer/pages/train.py").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.number_input(key="train_steps").set_value(30).run()
    at.number_input(key="train_every").set_value(10).run()
    at.text_input(key="train_probe").set_value("one two three").run()
    at.button(key="train_start").click().run()
    assert not at.exception
    run = at.session_state["train_run"]
    assert run.device == gpu.device() == run.trainer.device  # the server's device, the CPU here, reached the trainer
    assert run.step == 30 and [s.step for s in run.snapshots] == [0, 10, 20, 30]
    assert "finished at training step 30" in at.success[0].value
    figs = charts(at)
    curve = figs[0]["data"]
    np.testing.assert_array_equal(array(curve[0]["y"]), [p.loss for p in run.trainer.history])
    np.testing.assert_array_equal(array(curve[1]["y"]), [p.accuracy for p in run.trainer.history])
    published = at.session_state[state.TRAINED]["yours-reverse"]
    expected = trace.run(published, "one two three")
    np.testing.assert_array_equal(array(figs[1]["data"][0]["z"]), expected.cross.weights[-1].mean(0))
    # the published copy is frozen and equals the trainer's weights
    for name, value in published.model.state_dict().items():
        assert value.equal(run.trainer.model.state_dict()[name]), name
    at.select_slider(key="train_snapshot").set_value(0).run()
    np.testing.assert_array_equal(
        array(charts(at)[1]["data"][0]["z"]), run.snapshots[0].trace.cross.weights[-1].mean(0)
    )
    # explore it: the sidebar now runs the session's own model on the probe sentence
    at.button(key="train_explore").click().run()
    assert at.session_state[state.MODEL] == at.session_state[state.widget(state.MODEL)] == "yours-reverse"
    model_box = at.sidebar.selectbox(key=state.widget(state.MODEL))
    assert model_box.options[-1] == "Your reverse model (trained here, step 30)"
    stepping(at.switch_page("explorer/pages/decoding.py").run())
    assert not at.exception
    np.testing.assert_array_equal(array(charts(at)[3]["data"][0]["z"]), expected.cross.weights[-1].mean(0))


def test_train_page_refuses_a_probe_outside_the_vocabulary():
    at = new_app().run()
    at.switch_page("explorer/pages/train.py").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.text_input(key="train_probe").set_value("one too").run()
    at.button(key="train_start").click().run()
    assert "'too'" in at.error[0].value and "train_run" not in at.session_state


def test_decoding_page_says_when_there_is_no_right_answer():
    at = with_model("translate", "dog the sees")
    stepping(at.switch_page("explorer/pages/decoding.py").run())
    assert any("outside the task's grammar" in c.value for c in at.caption) and not at.success
