"""Turning heads off in real Chromium, as a class does it: a click on a grid cell turns that head off (a second click
turns it on again), and a click on the effect grid opens that head turned off; the bars drawn are the model's own."""

from __future__ import annotations

import urllib.parse

import numpy as np
import pytest
from playwright.sync_api import expect

from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from attention_explorer.models.ablation import Head
from bench.harness import TIMEOUT_MS, figure_array, open_app, rerun
from tests.e2e.test_drill import click_target

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TEXT = "kilo seven zulu echo two mike kilo seven zulu echo two mike"
QUERY = urllib.parse.urlencode({"model": "induction", "text": TEXT})
HEADS = 4  # the induction model's heads a layer: click targets are row-major, layer by layer
# the "heads off" bars of the probability chart (the page's second chart), once drawn
AFTER_BARS = """() => { const plot = document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')[1];
    return plot && plot.data && plot.data[1] ? plot.data[1].y : null; }"""


def expected_after(layer: int, head: int) -> np.ndarray:
    loaded = registry.load("induction")
    clean = trace.run(loaded, TEXT, loaded.max_tokens)
    return ablate.outcome(loaded, clean, [Head("decoder_self", layer, head)], "zero").after.right_probabilities()


def test_a_click_turns_a_head_off_and_on_again(server, page):
    open_app(page, f"{server}/ablation?{QUERY}")
    with rerun(page):
        click_target(page, 0, 0 * HEADS + 1)  # layer 1, head 2: the previous-token head the repeat needs
    heading = page.get_by_role("heading", name="With layer 1, head 2 off")
    heading.wait_for(timeout=TIMEOUT_MS)
    drawn = figure_array(page.wait_for_function(AFTER_BARS, timeout=TIMEOUT_MS).json_value())
    # the server's run of the same ablation in another process: a guard on the model's own probabilities, which a head
    # turned off moves by whole percents
    np.testing.assert_allclose(drawn, expected_after(0, 1), rtol=1e-5, atol=1e-7)
    assert page.get_by_test_id("stException").count() == 0
    with rerun(page):
        click_target(page, 0, 0 * HEADS + 1)  # the same cell again: the head is on again
    expect(page.get_by_text("Pick at least one head to turn off")).to_be_visible(timeout=TIMEOUT_MS)


def test_a_click_on_the_effect_grid_opens_that_head_turned_off(server, page):
    open_app(page, f"{server}/head_effects?{QUERY}")
    with rerun(page):
        click_target(page, 0, 1 * HEADS + 3)  # layer 2, head 4
    page.get_by_role("heading", name="Turn heads off").wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("heading", name="With layer 2, head 4 off").wait_for(timeout=TIMEOUT_MS)
    drawn = figure_array(page.wait_for_function(AFTER_BARS, timeout=TIMEOUT_MS).json_value())
    np.testing.assert_allclose(drawn, expected_after(1, 3), rtol=1e-5, atol=1e-7)  # as above: the same run, twice
