"""A model switch and a sentence the new model cannot read (through app.py): the typed sentence is put aside for the
model's example, comes back in one click; every page then says which words the model knows and offers its example in
one click; the words typed stay literal."""

from __future__ import annotations

import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.labels import escape_tokens
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests.app import KIND_KEYS, new_app
from tests.figdata import array, plain, spec

# a sentence MiniLM reads and the translator cannot (it knows 'the', 'cat', 'on'), with markup in its unknown words
TYPED = "The cat sat on the mat, **because** <b>it</b> was [tired](javascript:alert(1)) $x$"
KNOWN = ("the", "cat", "on")
UNKNOWN = ("sat", "mat", ",", "*", "because", "<", "b", ">")
UNESCAPED = re.compile(r"(?<!\\)[*<>\[\]$_`]")  # a markdown or HTML mark that a message would render, not show
# every page that reads a toy's sentence: Train reads none, Positional encoding draws a toy's position table, Compare
# and Reference take only MiniLM or a pretrained folder (they say so), and Heads over many texts reads a corpus
NOT_READ = ("train", "positional", "compare", "reference", "corpus")
PAGES = tuple(page.stem for pages in navigation.MENUS.values() for page in pages if page.stem not in NOT_READ)


def switch(at: AppTest, key: str) -> AppTest:
    return at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()


def assert_literal(markdown: str) -> None:
    assert UNESCAPED.search(markdown) is None, markdown


def assert_heatmap_is_the_models(at: AppTest, loaded, text: str) -> None:
    """The attention page draws the model's own weights on `text`'s tokens for the kind, layer and head shown."""
    kind = at.radio(key=KIND_KEYS["attention"]).value
    layer, head = at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value
    expected = trace.run(loaded, text, loaded.max_tokens)
    fig = spec(next(c for c in at.get("plotly_chart") if c.key == "attention_heatmap"))
    queries, keys = expected.tokens_for(kind)
    np.testing.assert_array_equal(array(fig["data"][0]["z"]), expected.attention(kind).weights[layer, head])
    assert list(fig["layout"]["yaxis"]["ticktext"]) == escape_tokens(queries)
    assert list(fig["layout"]["xaxis"]["ticktext"]) == escape_tokens(keys)


def test_a_typed_sentence_the_translator_cannot_read_is_put_aside_and_comes_back(translate):
    at = new_app("attention").run()
    at.sidebar.text_area[0].set_value(TYPED).run()
    switch(at, "translate")
    assert not at.exception
    # the translator shows its own example at once, and says what it did with the sentence and why
    assert at.sidebar.text_area[0].value == translate.example
    assert_heatmap_is_the_models(at, translate, translate.example)
    notice = at.info[0].value
    assert_literal(notice)
    assert "cannot read your sentence, so it shows its own example" in plain(notice)
    assert "It knows 3 of the 25 words typed: " + ", ".join(map(repr, KNOWN)) in plain(notice)
    assert "It does not know " + ", ".join(map(repr, UNKNOWN[:5])) in plain(notice)
    assert plain(at.caption[0].value) == f"Your sentence: {TYPED[:80]!r}…"
    assert_literal(at.caption[0].value)

    at.button(key="aside_back").click().run()  # one click back: the page says why it cannot draw it
    assert at.sidebar.text_area[0].value == TYPED
    assert not at.get("plotly_chart")
    assert [b.key for b in at.button if b.key == "aside_back"] == []
    assert "not in the model's vocabulary" in plain(at.info[0].value)
    knows = next(m.value for m in at.markdown if "It knows" in m.value)
    assert_literal(knows)
    assert plain(knows) == "It knows 3 of the 25 words typed: " + ", ".join(map(repr, KNOWN)) + "."
    offer = at.button(key="unreadable_example")
    assert plain(offer.label) == f"Use this model's example: {translate.example}"

    offer.click().run()  # one click to the example, with the sentence still one click away
    assert at.sidebar.text_area[0].value == translate.example
    assert_heatmap_is_the_models(at, translate, translate.example)
    assert [b.key for b in at.button if b.key == "aside_back"] == ["aside_back"]

    switch(at, "minilm")  # a model that reads the sentence gets it back
    assert at.sidebar.text_area[0].value == TYPED
    assert [b.key for b in at.button if b.key == "aside_back"] == []
    assert not at.exception


def test_a_switch_between_toys_keeps_the_sentence_put_aside(translate):
    at = new_app("tokens").run()
    at.sidebar.text_area[0].set_value("a sentence nobody trained a toy on").run()
    switch(at, "translate")
    switch(at, "reverse")
    assert at.sidebar.text_area[0].value == registry.load("reverse").example
    assert "Reverse" in plain(at.info[0].value) and "cannot read your sentence" in plain(at.info[0].value)
    at.button(key="aside_back").click().run()
    assert at.sidebar.text_area[0].value == "a sentence nobody trained a toy on"


def test_keeping_the_example_takes_the_notice_off_every_page():
    at = new_app("tokens").run()
    at.sidebar.text_area[0].set_value("a sentence nobody trained a toy on").run()
    switch(at, "translate")
    assert [b.key for b in at.button if (b.key or "").startswith("aside_")] == ["aside_back", "aside_keep"]
    at.button(key="aside_keep").click().run()
    example = registry.load("translate").example
    for page in ("tokens", "attention"):
        at.switch_page(f"explorer/pages/{page}.py").run()
        assert [b.key for b in at.button if (b.key or "").startswith("aside_")] == [] and not at.exception
        assert not any("cannot read" in i.value for i in at.info)
        assert at.sidebar.text_area[0].value == example


def test_an_example_is_not_put_aside():
    """The sidebar's example of one model gives way to the next model's: nothing typed, nothing to go back to."""
    at = new_app("attention").run()
    switch(at, "reverse")
    assert at.sidebar.text_area[0].value == registry.load("reverse").example
    assert [b.key for b in at.button if b.key == "aside_back"] == []
    assert not any("cannot read" in i.value for i in at.info)


@pytest.mark.parametrize("model", ["translate", "induction"])
def test_every_page_names_the_words_known_and_offers_the_example(model):
    at = new_app().run()
    switch(at, model)
    at.sidebar.text_area[0].set_value(TYPED).run()
    loaded = registry.load(model)
    for page in PAGES:
        at.switch_page(f"explorer/pages/{page}.py").run()
        assert not at.exception, page
        knows = [m.value for m in at.markdown if m.value.startswith("It knows")]
        assert len(knows) == 1, page
        assert_literal(knows[0])
        assert plain(at.button(key="unreadable_example").label).endswith(loaded.example), page
        assert f"The {len(loaded.tokenizer.known)} words this model knows" in [e.label for e in at.expander], page


def test_the_lessons_offer_of_the_translator_keeps_a_typed_sentence():
    """A decoder step on MiniLM offers the translator on the lesson's sentence: the typed one is put aside, not lost."""
    at = new_app("decoding").run()
    at.sidebar.text_area[0].set_value(TYPED).run()
    at.button(key="needs_decoder_translate").click().run()
    assert at.sidebar.selectbox(key=state.widget(state.MODEL)).value == navigation.TRANSLATE
    assert at.sidebar.text_area[0].value == navigation.TRANSLATE_EXAMPLE
    assert "cannot read your sentence" in plain(at.info[0].value)
    at.button(key="aside_back").click().run()
    assert at.sidebar.text_area[0].value == TYPED and not at.exception
