"""Issue 42, part 2, through app.py: every lesson step, for every built-in model, shows its "2017 paper: ... This
model: ..." line under the title, outside any fold, in normal and in presenter mode."""

from __future__ import annotations

import pytest
from streamlit.testing.v1.element_tree import Block, Caption, Expander, Tab

from attention_explorer.explorer import navigation
from attention_explorer.explorer.lesson import then_and_now
from attention_explorer.models import registry
from tests.app import new_app
from tests.figdata import plain

FOLDS = (Expander, Tab)  # what a class must open (or pick) before it sees what is inside
FOLDED_TYPES = ("expandable", "popover", "tab_container")  # the same, as the blocks' protos name them


def unfolded_captions(node, folded: bool = False) -> list[tuple[str, bool]]:
    """Every caption under `node`, in page order, with whether a fold (expander, popover, tab) holds it."""
    if isinstance(node, Caption):
        return [(plain(node.value), folded)]
    found = []
    if isinstance(node, Block):
        folded = folded or isinstance(node, FOLDS) or node.type in FOLDED_TYPES
        for child in node.children.values():
            found += unfolded_captions(child, folded)
    return found


def opened(stem: str, model: str, present: bool = False):
    at = new_app(stem)
    at.query_params["model"] = model
    if present:
        at.query_params["present"] = "1"
    return at.run()


@pytest.mark.parametrize("model", [spec.key for spec in registry.BUILT_IN])
def test_every_step_shows_then_and_now_outside_any_fold(model):
    loaded = registry.load(model)
    for page in navigation.STEPS:
        expected = then_and_now.line(loaded, page.stem)
        assert expected.startswith("2017 paper: ") and ". This model: " in expected, (model, page.stem)
        at = opened(page.stem, model)
        assert not at.exception, (model, page.stem, at.exception)
        captions = unfolded_captions(at.main)
        shown = [folded for text, folded in captions if text == expected]
        assert shown == [False], (model, page.stem, expected, captions[:3])  # once, in view
        # directly under the title: the first caption of the page
        assert captions[0] == (expected, False), (model, page.stem)
        assert at.header[0].value.startswith(f"Step {page.step} of {navigation.N_STEPS}")


@pytest.mark.parametrize("model", ["minilm", "translate"])
def test_presenter_mode_keeps_the_line_in_view(model):
    loaded = registry.load(model)
    for page in navigation.STEPS:
        at = opened(page.stem, model, present=True)
        assert not at.exception
        expected = then_and_now.line(loaded, page.stem)
        assert unfolded_captions(at.main)[0] == (expected, False), (model, page.stem)  # under the title, unfolded


def test_no_line_off_the_lesson():
    at = new_app("attention").run()
    assert not [text for text, _ in unfolded_captions(at.main) if text.startswith("2017 paper:")]
    at = new_app().run()  # the Overview is the lesson's map, not a step
    assert not [text for text, _ in unfolded_captions(at.main) if text.startswith("2017 paper:")]
