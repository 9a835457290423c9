"""The lesson in real Chromium, as a teacher walks it: Start, then Next to the last step, each at its own address;
the token chosen on the Q/K/V step still chosen on the next; presenter mode's text size on screen."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from attention_explorer.explorer import navigation
from bench.browser import CHARTS_DRAWN
from bench.harness import SETTLED, TIMEOUT_MS, open_app, rerun, reveal
from tests.e2e.conftest import screenshot, step_freely

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ADDRESS = "/?model=translate&text=the+small+red+cat+sees+a+big+dog"
# the computed size of the main area's paragraphs, in px
BODY_PX = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')]
    .map(p => parseFloat(getComputedStyle(p).fontSize))"""
# presenter mode is on screen: every paragraph 20 px or more
LARGE_TEXT = f"() => (sizes => sizes.length > 0 && Math.min(...sizes) >= 20)(({BODY_PX})())"


def follow(page, word: str) -> None:
    """Click the lesson's link whose text begins with `word` (Start / Next) and wait for the page it opens."""
    link = page.get_by_role("link", name=re.compile(rf"^{word}: ")).first
    with rerun(page):
        link.click()


def query_token(page) -> str:
    """The Query token picker's shown value."""
    return page.get_by_test_id("stMain").get_by_role("combobox", name="Query token").input_value()


def step_heading(page, step: navigation.Page):
    return page.get_by_role("heading", name=f"Step {step.step} of {navigation.N_STEPS}: {step.title}")


def test_start_then_next_walks_every_step_in_order(server, page):
    open_app(page, server + ADDRESS)
    page.get_by_role("heading", name=navigation.OVERVIEW.title).wait_for(timeout=TIMEOUT_MS)
    follow(page, "Start")
    for i, step in enumerate(navigation.STEPS):
        if i:
            follow(page, "Next")
        step_heading(page, step).wait_for(timeout=TIMEOUT_MS)
        address = urlparse(page.url)
        assert address.path.rstrip("/").endswith("/" + step.stem), (step.stem, page.url)
        assert "model=translate" in address.query
        assert page.get_by_test_id("stException").count() == 0, step.stem
        assert page.get_by_test_id("stAlert").filter(has_text="Error").count() == 0, step.stem
    assert page.get_by_role("link", name=re.compile(r"^Next: ")).count() == 0  # the last step
    screenshot(page, "lesson_last_step")


def test_the_token_picked_on_the_qkv_step_is_still_picked_on_the_next(server, page):
    open_app(page, server + "/query_key_value" + ADDRESS[1:])
    step_heading(page, navigation.BY_STEM["query_key_value"]).wait_for(timeout=TIMEOUT_MS)
    token = page.get_by_test_id("stMain").get_by_test_id("stSelectbox").filter(has_text="Query token")
    token.get_by_role("combobox").click()
    option = page.get_by_role("option").nth(2)  # the query list: the third token
    chosen = option.inner_text().strip()
    with rerun(page):
        option.click()
    assert token.get_by_role("combobox").input_value() == chosen
    page.wait_for_function("() => location.search.includes('token=')", timeout=TIMEOUT_MS)
    follow(page, "Next")
    step_heading(page, navigation.BY_STEM["scores"]).wait_for(timeout=TIMEOUT_MS)
    assert query_token(page) == chosen
    assert f"token={chosen.split(':')[0]}" in page.url
    follow(page, "Next")  # and on the step after
    step_heading(page, navigation.BY_STEM["multi_head"]).wait_for(timeout=TIMEOUT_MS)
    assert query_token(page) == chosen


def test_presenter_mode_sets_large_text_and_folds_the_sidebar(server, page):
    page.goto(server + "/scores" + ADDRESS[1:] + "&present=1", timeout=TIMEOUT_MS)  # no chart before an answer
    step_heading(page, navigation.BY_STEM["scores"]).wait_for(timeout=TIMEOUT_MS)
    # the run's end (a first screen can show a page before its style sheet): every paragraph 20 px or more
    page.wait_for_function(LARGE_TEXT, timeout=TIMEOUT_MS)
    assert page.get_by_test_id("stSidebar").get_attribute("data-collapsed") == "true"
    screenshot(page, "lesson_presenter_scores")
    page.goto(server + "/scores" + ADDRESS[1:], timeout=TIMEOUT_MS)
    step_heading(page, navigation.BY_STEM["scores"]).wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function(SETTLED, arg=0, timeout=TIMEOUT_MS)
    page.get_by_role("link", name=re.compile(r"^Next: ")).first.wait_for(timeout=TIMEOUT_MS)
    assert max(page.evaluate(BODY_PX)) < 20  # not in presenter mode


@pytest.mark.parametrize("present", [True, False], ids=["presenter", "normal"])
def test_each_steps_first_figure_fits_on_the_first_screen(server, page, present):
    """At 1600 x 900, with ?present=1 and without (the sidebar open), every step that opens on a figure has it whole
    on the first screen (Why attention opens on table 1 once the class has answered, Train on its settings, Patch
    activations on its inputs, its grids below them once the class has predicted: they are left out; the decoder's step
    asks the class above its figures, so it is measured with "Ask the class first" turned off)."""
    from bench.present import MEASURE

    page.set_viewport_size({"width": 1600, "height": 900})
    for step in (navigation.OVERVIEW, *navigation.STEPS):
        if step.stem in ("why_attention", "train", "patch"):
            continue
        address = (
            f"{server}/{'' if step is navigation.OVERVIEW else step.stem}{ADDRESS[1:]}{'&present=1' if present else ''}"
        )
        page.goto(address, timeout=TIMEOUT_MS)
        page.wait_for_function(SETTLED, arg=0, timeout=TIMEOUT_MS)
        if step.stem in ("tokens", "scores", "turn_off", "layer_predictions"):  # these wait for the class's answer
            reveal(page)
        if step.stem == "decoding":  # asks the class first by default, above its figures: as a teacher steps freely
            step_freely(page)
        page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
        # the run's end: its links drawn, and presenter mode's style sheet applied
        page.get_by_role("link", name=re.compile(r"^(Start|Next): ")).first.wait_for(timeout=TIMEOUT_MS)
        if present:
            page.wait_for_function(LARGE_TEXT, timeout=TIMEOUT_MS)
        found = page.evaluate(MEASURE)
        assert found["text"] >= 20 if present else found["text"] < 20, (step.stem, found)
        assert found["top"] > 0 and found["bottom"] <= 900, (step.stem, present, found)
