"""Predict, then reveal, on every step that asks (AppTest via app.py): step 12 asks before it shows the word the model
writes (its "Ask the class first" on from the start), step 15 asks a decoder-only model's class too (the text's words
in reverse order: up or down?), and a revealed answer is green only where the class was right: a wrong guess shows in
a warning box, never in a success box."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.run import output, trace
from attention_explorer.models import registry
from tests.app import new_app
from tests.app.test_decoder_only import KEY, TEXT
from tests.figdata import plain

pytestmark = pytest.mark.slow

WRONG = ("not so", "not the model's choice")  # what each reveal says of a wrong guess
RIGHT = (": right", "ranks 1 of")  # ... and of a right one


@pytest.fixture
def gpt2(gpt2_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    return registry.load(KEY)


def opened(page: str, model: str = KEY, text: str = TEXT):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    return at.run()


def answered(page: str, choice: int, model: str = KEY, text: str = TEXT):
    """The page after the class picks option `choice` of its question and reveals (and runs what the reveal asks to
    run: Turn heads off's forward passes)."""
    at = opened(page, model, text)
    (box,) = [s for s in at.selectbox if "_guess_" in s.key]
    box.set_value(choice).run()
    at.button(key=box.key.split("_guess_")[0] + "_reveal").click().run()
    for button in [b for b in at.button if b.key and b.key.endswith("_run")]:
        button.click().run()
    assert not at.exception, (page, at.exception)
    return at


def test_step_12_asks_the_class_before_it_shows_the_word(gpt2):
    at = opened("decoding")
    assert at.toggle(key="decoding_ask").value is True
    assert [s for s in at.selectbox if s.key.startswith("decoding_predict_guess_")]  # the question is asked
    heading = plain(at.subheader[0].value)
    assert heading.endswith("predicts '?'"), heading  # its answer is not shown before it
    assert any("appear once the class's answer is revealed" in i.value for i in at.info)
    at.toggle(key="decoding_ask").set_value(False).run()  # a teacher may step through freely
    assert not plain(at.subheader[0].value).endswith("predicts '?'")


def test_step_15_asks_a_decoder_only_model_about_its_text_reversed(gpt2):
    at = opened("loss")
    question = plain(" ".join(m.value for m in at.markdown if "Predict first" in m.value))
    reversed_text = " ".join(TEXT.split()[::-1])
    assert f"reverse order: '{reversed_text}'" in question
    at = answered("loss", 0)  # "It goes up"
    result = trace.run(gpt2, TEXT, gpt2.max_tokens)
    other = trace.run(gpt2, reversed_text, gpt2.max_tokens)
    mean, reversed_mean = output.score_text(gpt2, result).mean, output.score_text(gpt2, other).mean
    said = plain(" ".join(b.value for b in [*at.success, *at.warning]))
    assert f"On the words in reverse order the mean cross-entropy is {reversed_mean:.4f}" in said
    assert f"on the text {mean:.4f}" in said
    up = reversed_mean - mean > 0.01 * mean
    assert ("right" in said) == up and (": not so" in said) == (not up)


@pytest.mark.parametrize(
    "page", ["tokens", "scores", "why_attention", "decoding", "layer_predictions", "loss", "turn_off"]
)
def test_a_wrong_guess_is_never_shown_as_a_success(gpt2, page):
    verdicts = []
    for choice in (0, 1):
        at = answered(page, choice)
        success = plain(" ".join(b.value for b in at.success))
        warning = plain(" ".join(b.value for b in at.warning))
        assert not any(w in success for w in WRONG), (page, success)  # wrong: never green
        assert not any(r in warning for r in RIGHT), (page, warning)  # right: never a warning
        verdicts.append(any(w in warning for w in WRONG) or ("ranks" in warning and "of" in warning))
    assert any(verdicts), page  # of two different answers at least one is wrong: the check above was made


def test_smollm2_asks_on_the_loss_step(smollm2):
    at = opened("loss", "smollm2", "The capital of France is")
    assert [s for s in at.selectbox if s.key.startswith("loss_predict_guess_")], "step 15 asks SmolLM2's class"
    assert "France of capital The" in plain(" ".join(m.value for m in at.markdown))
