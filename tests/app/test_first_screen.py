"""Issue 42, part 5, through app.py: what a class sees first. The real model one click away above the Overview's map,
the sentence on step 1 when the sidebar is folded, step 5 opening where the mask hides something on a causal model,
and step 10's verdict in the box every step gives its verdict in."""

from __future__ import annotations

import pytest
from streamlit.testing.v1.element_tree import Block

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.overview import MAP_PX, OFFER_PX
from tests.app import new_app, reveal
from tests.app.test_decoder_only import text_of
from tests.figdata import plain, spec

INDUCTION = "zulu nine xray seven lima two oscar romeo zulu nine xray seven lima two oscar romeo"


def in_order(node) -> list:
    """Every element under `node` in page order."""
    if isinstance(node, Block):
        return [found for child in node.children.values() for found in in_order(child)]
    return [node]


def opened(page: str | None, model: str, text: str | None = None, present: bool = False):
    at = new_app(page)
    at.query_params["model"] = model
    if text is not None:
        at.query_params["text"] = text
    if present:
        at.query_params["present"] = "1"
    return at.run()


@pytest.mark.parametrize("present", [False, True])
def test_the_real_model_is_offered_above_the_overviews_map(present):
    at = opened(None, "minilm", present=present)
    elements = in_order(at.main)
    keys = [getattr(e, "key", None) for e in elements]
    assert keys.index("overview_real") < keys.index("overview_figure")  # above the map: on the first screen
    # the map gives the button's height up, so it still ends on the first screen
    height = spec(at.get("plotly_chart")[0])["layout"]["height"]
    assert height == MAP_PX["encoder-only"] - OFFER_PX
    at = opened(None, "smollm2")  # on the real model: nothing to offer, the map keeps its height
    assert "overview_real" not in [b.key for b in at.button]
    assert spec(at.get("plotly_chart")[0])["layout"]["height"] == MAP_PX["decoder-only"]


def test_step_1_shows_the_sentence_itself_when_the_sidebar_is_folded():
    text = "Bark is very cute and he is a *dog*"  # markdown in it: shown literally
    at = opened("tokens", "minilm", text, present=True)
    said = [plain(m.value) for m in at.markdown]
    assert f"**The sentence:** {text}" in said
    assert any("The sentence above has 9 words" in s for s in said)
    assert not any("in the sidebar" in s for s in said)
    at = opened("tokens", "minilm", text)  # the sidebar is open: the question points there
    said = [plain(m.value) for m in at.markdown]
    assert not [s for s in said if s.startswith("**The sentence:**")]
    assert any("The sentence in the sidebar has 9 words" in s for s in said)


@pytest.mark.parametrize(("model", "text"), [("induction", INDUCTION), ("smollm2", "The capital of France is")])
def test_step_5_on_a_causal_model_opens_where_the_mask_hides_something(model, text):
    at = opened("scores", model, text)
    assert not at.exception
    query = at.selectbox(key=state.FOCUS_TOKEN)
    n = len(query.options)
    assert query.value < n - 1  # not the last token, which sees every key
    at = reveal(at, "scores_predict")
    hidden = n - 1 - query.value
    assert f"The mask hides {hidden} key(s)" in text_of(at)


def test_step_10_gives_its_verdict_in_the_box_every_step_gives_it_in():
    at = opened("patch", "induction", INDUCTION)
    at = reveal(at, "patch_predict", 1)
    assert not at.exception
    (verdict,) = [plain(s.value) for s in [*at.success, *at.warning]]
    assert verdict.startswith("The head that restores most, ") and "your class picked the last layer: " in verdict
    right = verdict.endswith("right.")
    assert right == (", sits in the last layer;" in verdict)  # right exactly when the head is where the class said
    assert bool(at.success) == right  # green only for a right answer, a warning for a wrong one
