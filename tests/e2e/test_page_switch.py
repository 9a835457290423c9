"""Typing right after a page switch, as a class does: the sentence is drawn whole and the sidebar keeps its model
and Max tokens. (A browser that redrew the sidebar while the first page's charts were still loading fell back to
each widget's default and sent it as the user's choice: Max tokens became 3 and every later sentence was cut.)"""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from bench import harness
from bench.harness import TIMEOUT_MS, wait_for_tokens

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DETOURS = ("8. The stack: every layer and head", "Q/K/V on one page", "Head view", "3. Positional encoding")


def sidebar_state(page) -> tuple[str, str]:
    sidebar = page.get_by_test_id("stSidebar")
    model = sidebar.get_by_test_id("stSelectbox").first.locator("input").input_value()
    return model, sidebar.get_by_test_id("stNumberInputField").first.input_value()


def test_a_sentence_typed_right_after_page_switches_is_drawn_whole(server, page):
    loaded = registry.load("minilm-random")  # not the first model of the list, which a redrawn picker falls back to
    for step, detour in enumerate(DETOURS):
        page.goto(f"{server}/?model=minilm-random", timeout=TIMEOUT_MS)  # a new document: charts load afresh
        page.wait_for_function(harness.SETTLED, arg=0, timeout=TIMEOUT_MS)
        harness.open_page(page, detour)  # its run ends; before the first page's charts are drawn
        harness.open_page(page, "Attention heatmap")  # typed into without waiting for its charts
        text = f"On day {step} the {detour.lower()} showed every student how the quiet river found the sea."
        harness.type_sentence(page, text)
        assert sidebar_state(page) == (loaded.title, str(state.DEFAULT_MAX_TOKENS)), f"after {detour}"
        wait_for_tokens(page, trace.run(loaded, text, state.DEFAULT_MAX_TOKENS).source_tokens)  # whole, not cut
