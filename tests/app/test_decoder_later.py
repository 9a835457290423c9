"""The lesson introduces the decoder at its own step: on an encoder-decoder, the steps before it open on the
encoder's self-attention and name no decoder (target-language) token until the class picks the decoder."""

from __future__ import annotations

import re

import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.figures.labels import position_label
from attention_explorer.explorer.run import starting, trace
from attention_explorer.models import registry
from tests.app import new_app, reveal
from tests.figdata import plain, spec

BEFORE = [page.stem for page in navigation.STEPS if navigation.before_decoder(page.stem)]


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


def opened(page: str, model: str = "translate"):
    at = new_app(page)
    at.query_params["model"] = model
    return at.run()


def shown(at) -> str:
    """The page's words and every figure's data and labels."""
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.subheader, *at.text]
    return plain(" ".join(str(p.value) for p in parts)) + " ".join(c.proto.spec for c in at.get("plotly_chart"))


def french_only(loaded, result) -> set[str]:
    """The decoder's tokens for this sentence that are not also words of the source language (French 'a', 'de')."""
    return set(result.target_tokens) - set(loaded.tokenizer.known) - set(starting.MARKERS)


def test_the_steps_before_the_decoder_are_steps_2_to_10():
    assert [navigation.BY_STEM[stem].step for stem in BEFORE] == list(range(1, navigation.BY_STEM["decoding"].step))
    assert not navigation.before_decoder("attention") and not navigation.before_decoder("decoding")


@pytest.mark.parametrize("page", BEFORE[1:])
def test_no_step_before_the_decoder_opens_on_a_decoder_token(translate, page):
    at = opened(page)
    assert not at.exception, [e.value for e in at.exception]
    result = trace.run(translate, translate.example, translate.max_tokens)
    french = french_only(translate, result)
    assert len(french) >= 3  # le, chat, voit...: the check has words to find
    words = shown(at)
    found = [w for w in french if re.search(rf"(?<![\w&]){re.escape(w)}(?!\w)", words)]
    assert not found, (page, found)
    radios = [r for r in at.radio if r.key == "qkv_kind"]
    if radios:  # the class can still pick the decoder's attention there
        (radio,) = radios
        assert radio.value == "encoder_self" and "Encoder-decoder (cross) attention" in radio.options


def test_the_scores_reveal_names_a_key_the_chart_draws(translate):
    at = opened("scores")
    reveal(at, "scores_predict")
    result = trace.run(translate, translate.example, translate.max_tokens)
    # green where the class was right, else a warning
    (said,) = [b for b in [*at.success, *at.warning] if "Your class" in b.value]
    named = re.search(r"The model gives '(\d+): ([^']+)' the most weight", plain(said.value))
    assert named is not None
    position, token = int(named.group(1)), named.group(2)
    assert result.source_tokens[position] == token  # an English source token, shown as a key
    (weights,) = [spec(c) for c in at.get("plotly_chart") if c.key == "qkv_weights"]
    assert token in weights["data"][0]["customdata"][position] or token in str(weights["layout"]["xaxis"]["ticktext"])
    assert position_label(position, token) in plain(said.value)


def test_an_explore_pages_cross_attention_start_does_not_carry_into_add_norm(translate):
    at = opened("qkv")  # the Explore page opens a trained translator on its cross-attention alignment
    assert at.radio(key="qkv_kind").value == "cross"
    at.switch_page("explorer/pages/add_norm.py").run()
    assert not at.exception
    assert at.radio(key="forward_stack").value == "encoder"
