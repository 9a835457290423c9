"""Decoder-only models in real Chromium: a GPT-2 folder given through EXPLORER_MODEL_FOLDERS and the toy induction
model, walked through every lesson step (Start, then Next) with a figure drawn and no error on each."""

from __future__ import annotations

import re
from urllib.parse import quote_plus

import pytest

from attention_explorer.explorer import navigation
from attention_explorer.models import registry
from bench import harness
from bench.browser import CHARTS_DRAWN
from bench.harness import TIMEOUT_MS, open_app, rerun, reveal
from tests.e2e.conftest import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GPT2 = ("folder:tiny-gpt2", "the cat sat on the mat because it was tired")
# steps that draw no figure before someone acts: training waits for its button
NO_FIGURE = {"train"}
# steps that ask the class first and draw their figure once the answer is revealed
ASKS_FIRST = {"tokens", "scores", "why_attention", "turn_off", "patch", "layer_predictions"}
# the patching step asks once it has a corruption to patch: a random model whose every one-word change moves no answer
# is proposed none, and says so
NONE_PROPOSED = "No corruption proposed for this text"


@pytest.fixture(scope="module")
def decoder_server(gpt2_folder):
    with harness.app_server(env={registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}) as url:
        yield url


def follow(page, word: str) -> None:
    link = page.get_by_role("link", name=re.compile(rf"^{word}: ")).first
    with rerun(page):
        link.click()


def models() -> list[tuple[str, str]]:
    found = [GPT2]
    if "induction" in registry.MODELS:
        found.append(("induction", registry.MODELS["induction"].examples[0]))
    return found


@pytest.mark.parametrize(("model", "text"), models(), ids=[m for m, _ in models()])
def test_every_lesson_step_draws_for_a_decoder_only_model(decoder_server, page, model, text):
    open_app(page, f"{decoder_server}/?model={quote_plus(model)}&text={quote_plus(text)}")
    page.get_by_role("heading", name=navigation.OVERVIEW.title).wait_for(timeout=TIMEOUT_MS)
    page.get_by_text("decoder-only model").first.wait_for(timeout=TIMEOUT_MS)
    screenshot(page, f"decoder_only_{model.replace(':', '_')}_overview")
    follow(page, "Start")
    for i, step in enumerate(navigation.STEPS):
        if i:
            follow(page, "Next")
        page.get_by_role("heading", name=f"Step {step.step} of {navigation.N_STEPS}: {step.title}").wait_for(
            timeout=TIMEOUT_MS
        )
        if step.stem == "patch" and page.get_by_text(NONE_PROPOSED).count():
            assert page.get_by_text("Write a corrupted text above").count() == 1
        elif step.stem in ASKS_FIRST:
            reveal(page)
        if step.stem not in NO_FIGURE and not page.get_by_text(NONE_PROPOSED).count():
            page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=TIMEOUT_MS)
            page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
        assert page.get_by_test_id("stException").count() == 0, step.stem
        assert page.get_by_test_id("stAlert").filter(has_text="Error").count() == 0, step.stem
        assert page.get_by_text("encoder-only").count() == 0, step.stem
        screenshot(page, f"decoder_only_{model.replace(':', '_')}_{step.stem}")
