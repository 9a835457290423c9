"""A picker on a page reruns that page only (a Streamlit fragment), not the sidebar and navigation; what the page
draws is still the model's own numbers; a change the sidebar must show still reruns everything."""

from __future__ import annotations

import re

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import trace
from bench.harness import FRAGMENT_RUN, LAST_FINISH, TIMEOUT_MS, figure_array, open_app, rerun

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HEATMAP = """() => { const plot = document.querySelectorAll('.js-plotly-plot')[0];
    return [plot.data[0].z, plot.layout.title.text]; }"""


def choose(page, label: str, option: str) -> None:
    page.get_by_test_id("stMain").get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()


def test_a_layer_or_head_change_reruns_only_the_page(server, page, minilm):
    open_app(page, f"{server}/attention")
    expected = trace.run(minilm, state.DEFAULT_TEXT, state.DEFAULT_MAX_TOKENS).encoder_self.weights
    for label, option, (layer, head) in (("Layer", "layer 5", (4, None)), ("Head", "head 2", (4, 1))):
        with rerun(page):
            choose(page, label, option)
        assert page.evaluate(LAST_FINISH) == FRAGMENT_RUN  # the page's fragment, not the whole app
        z, title = page.evaluate(HEATMAP)
        named = re.search(r"Layer (\d+), head (\d+)", title)
        assert int(named[1]) == layer + 1 and (head is None or int(named[2]) == head + 1)
        np.testing.assert_array_equal(figure_array(z), expected[layer, int(named[2]) - 1])
    assert "layer=5" in page.url and "head=2" in page.url  # the address follows, as on a whole run


def test_a_page_that_sets_the_sentence_reruns_the_sidebar_too(server, page):
    open_app(page, f"{server}/compare_sentences")
    with rerun(page):
        page.get_by_role("combobox", name="Minimal pairs", exact=True).click()
        page.get_by_role("option").nth(1).click()
    assert page.evaluate(LAST_FINISH) != FRAGMENT_RUN
    sentence = page.get_by_test_id("stSidebar").get_by_role("textbox", name="Sentence")
    expect(sentence).not_to_have_value(state.DEFAULT_TEXT, timeout=TIMEOUT_MS)
