"""A model switch in real headless Chromium: a typed sentence the toy translator cannot read gives way to its
example, comes back in one click, and the example is one click away again; the words typed stay literal."""

from __future__ import annotations

import pytest

from attention_explorer.models import registry
from bench.harness import TIMEOUT_MS, open_app, rerun, sentence_box, type_sentence, wait_for_tokens
from tests.e2e.conftest import screenshot
from tests.e2e.test_browser import choose_model

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TYPED = "The cat sat on the mat, **because** <b>it</b> was tired"


def test_switching_to_the_translator_puts_a_typed_sentence_aside_and_back(server, page):
    example = registry.load("translate").example
    source = [*example.split(), "<eos>"]  # the cross-attention heatmap's keys: the words the encoder read
    open_app(page, f"{server}/attention")
    type_sentence(page, TYPED)
    choose_model(page, "Toy translation (trained here)")
    page.get_by_text("cannot read your sentence, so it shows its own example", exact=False).wait_for(timeout=TIMEOUT_MS)
    wait_for_tokens(page, source)
    assert sentence_box(page).input_value() == example
    screenshot(page, "sentence_put_aside")

    with rerun(page):
        page.get_by_role("button", name="Back to your sentence").click()
    page.get_by_text("It knows 3 of the 15 words typed: 'the', 'cat', 'on'.").wait_for(timeout=TIMEOUT_MS)
    assert sentence_box(page).input_value() == TYPED
    main = page.get_by_test_id("stMain")
    assert main.locator("b, strong").count() == 0  # '<b>' and '**' shown as typed, never as bold
    assert main.get_by_text("'<'", exact=False).count() > 0
    screenshot(page, "unreadable_sentence")

    with rerun(page):
        page.get_by_role("button", name=f"Use this model's example: {example}").click()
    wait_for_tokens(page, source)
    assert sentence_box(page).input_value() == example
    assert page.get_by_test_id("stException").count() == 0
