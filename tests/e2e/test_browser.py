"""A person's path through the app in real headless Chromium: type a sentence, visit every page."""

from __future__ import annotations

import re

import pytest

from attention_explorer.explorer.navigation import BY_STEM
from bench import harness
from bench.harness import TIMEOUT_MS, open_app, rerun, tick_labels, type_sentence, wait_for_tokens
from tests.e2e.conftest import TOKEN_MAPS, heading, screenshot, step_freely

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SENTENCE = "Bark is very cute and he is a dog"
TOKENS = ["[CLS]", "bark", "is", "very", "cute", "and", "he", "is", "a", "dog", "[SEP]"]
# (sidebar title, page file, the page's heading), in the order a person visits them
PAGES = [
    (BY_STEM["model_view"].label, "model_view", heading("model_view")),
    ("Head view", "head_view", "Head view"),
    (BY_STEM["positional"].label, "positional", heading("positional")),
    ("Q/K/V on one page", "qkv", "Q, K, V step by step"),
    ("Attention heatmap", "attention", "Attention heatmap"),
]


def test_every_page_draws_for_a_typed_sentence(server, page):
    open_app(page, server)
    page.get_by_role("heading", name="Overview").wait_for(
        timeout=TIMEOUT_MS
    )  # the first page: the model as the paper's figure 1
    harness.open_page(page, "Attention heatmap")
    page.get_by_role("heading", name="Attention heatmap").wait_for(timeout=TIMEOUT_MS)
    type_sentence(page, SENTENCE)
    wait_for_tokens(page, TOKENS)
    assert tick_labels(page) == TOKENS
    assert tick_labels(page, axis="ytick") == TOKENS
    screenshot(page, "attention")
    for title, name, shown in PAGES:
        harness.open_page(page, title)
        page.get_by_role("heading", name=shown).wait_for(timeout=TIMEOUT_MS)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        assert page.locator(".js-plotly-plot").count() >= 1, name
        assert page.get_by_test_id("stException").count() == 0, name
        if name in ("model_view", "attention"):
            # the full-resolution heatmap of the picked head carries the sentence's tokens
            wait_for_tokens(page, TOKENS, chart_index=1 if name == "model_view" else 0)
            assert tick_labels(page, 1 if name == "model_view" else 0) == TOKENS
        if name == "head_view":
            texts = page.locator(".js-plotly-plot g.textpoint text").all_text_contents()
            assert texts[: len(TOKENS)] == TOKENS
        screenshot(page, name)


def choose_model(page, title: str) -> None:
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.click()
    with rerun(page):
        page.get_by_role("option", name=title, exact=True).click()


def test_decoding_a_toy_translation_step_by_step(server, page):
    open_app(page, server)
    choose_model(page, "Toy translation (trained here)")
    type_sentence(page, "the small red cat sees a big dog")
    harness.open_page(page, BY_STEM["decoding"].label)
    page.get_by_role("heading", name=heading("decoding")).wait_for(timeout=TIMEOUT_MS)
    step_freely(page)  # it asks the class before each word by default
    page.get_by_text("Output word 1 of 9: reads '0: <bos>' (and the tokens before it), writes '1: le'").wait_for(
        timeout=TIMEOUT_MS
    )
    for n, word in [(2, "chat"), (3, "rouge"), (4, "petit")]:
        with rerun(page):  # the step's figures replaced, not drawn beside the last step's
            page.get_by_role("button", name="Next ▶").click()
        page.get_by_text(re.compile(rf"Output word {n} of 9: reads .*, writes '{n}: {word}'")).wait_for(
            timeout=TIMEOUT_MS
        )
    assert page.get_by_test_id("stException").count() == 0
    assert page.locator(".js-plotly-plot").count() == 4
    screenshot(page, "decoding")


def test_an_unknown_word_is_named_in_the_browser(server, page):
    open_app(page, f"{server}/attention")
    choose_model(page, "Reverse words (trained here)")
    type_sentence(page, "one two tree")
    page.get_by_text("This word is not in the model's vocabulary: 'tree' (did you mean 'three'?)").wait_for(
        timeout=TIMEOUT_MS
    )
    screenshot(page, "unknown_word")


STEPS = 20_000
PAST_STEP_50 = """() => {
    const bar = document.querySelector('[data-testid="stProgress"]');
    const found = bar && bar.textContent.match(/step (\\d+) of/);
    return !!found && Number(found[1]) >= 50;
}"""


def test_training_in_the_browser_can_be_stopped_and_explored(server, page):
    open_app(page, server)
    harness.open_page(page, BY_STEM["train"].label)
    page.get_by_role("heading", name=heading("train")).wait_for(timeout=TIMEOUT_MS)
    page.get_by_test_id("stMain").get_by_test_id("stSelectbox").first.click()
    with rerun(page):
        page.get_by_role("option", name="reverse", exact=True).click()
    # more steps than any machine runs before Stop: the run is always stopped by hand, however fast it trains
    steps = page.get_by_label("Steps", exact=True)
    steps.fill(str(STEPS))
    with rerun(page):
        steps.press("Enter")
    page.get_by_role("button", name="Train").click()
    page.wait_for_function(PAST_STEP_50, timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Stop").click()
    stopped = page.get_by_text("Training stopped at training step")
    stopped.wait_for(timeout=TIMEOUT_MS)
    step = int(stopped.text_content().split("at training step ")[1].split()[0])
    assert 50 <= step < STEPS
    # the snapshot's cross-attention map names every token of the watched sentence on both axes
    # read in the same instant the wait saw them drawn: a rerun after Stop may redraw the maps between two reads
    every = "maps.length && maps.every(m => m.xticks.length) && maps"
    drawn = f"() => {{ const maps = ({TOKEN_MAPS})(); return {every}; }}"
    snapshots = page.wait_for_function(drawn, timeout=TIMEOUT_MS).json_value()
    assert snapshots and all(len(m["xticks"]) == m["x"] and len(m["yticks"]) == m["y"] for m in snapshots), snapshots
    with rerun(page):
        page.get_by_role("button", name="Explore it in the other pages").click()
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text(f"Trained in this browser session for {step} steps").wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("heading", name=heading("decoding")).wait_for(
        timeout=TIMEOUT_MS
    )  # Explore opened the decoding page
    page.get_by_text("Output word 1 of").wait_for(timeout=TIMEOUT_MS)
    assert page.get_by_test_id("stException").count() == 0
    screenshot(page, "train_then_decode")
