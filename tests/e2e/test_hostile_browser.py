"""Hostile text typed into a real browser: every drawn label literal, no markup made, no script run."""

from __future__ import annotations

import pytest

from attention_explorer.models import registry
from bench.harness import TIMEOUT_MS, open_app, tick_labels, type_sentence, wait_for_tokens
from tests.e2e.conftest import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TYPED = (
    "<img src=x onerror=alert(1)> <b>bold</b>",
    "</script><script>alert(2)</script> &amp; <br> <a href=x>link</a>",
    "😀 日本 שלום e\u0301 **not bold** $x$ :smile:",
)
MARKUP = "img, script:not([src]):not([type]), b, br, a[href='x'], strong, .katex"


@pytest.fixture(scope="module")
def tokenizer():
    return registry.load_bert_folder_tokenizer()


@pytest.mark.parametrize("text", TYPED, ids=range(len(TYPED)))
def test_typed_hostile_text_is_drawn_literally(server, page, tokenizer, text):
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_app(page, f"{server}/attention")
    type_sentence(page, text)
    tokens = list(tokenizer.encode(text, 128).tokens)
    wait_for_tokens(page, tokens)
    assert tick_labels(page) == tokens and tick_labels(page, axis="ytick") == tokens
    plot = page.locator(".js-plotly-plot").first
    assert plot.locator(MARKUP).count() == 0  # nothing a label turned into
    assert page.get_by_test_id("stMain").locator("img[src='x'], a[href='x']").count() == 0
    assert dialogs == []
    screenshot(page, f"hostile_{TYPED.index(text)}")


def test_unknown_words_message_shows_them_as_typed(server, page):
    open_app(page, f"{server}/attention?model=reverse&text=alpha+bravo")
    type_sentence(page, "alpha *x* $y$ <b>")
    page.get_by_text("not in the model's vocabulary").wait_for(timeout=TIMEOUT_MS)
    message = page.get_by_test_id("stAlert").first.text_content()
    assert all(f"'{piece}'" in message for piece in ("*", "$", "<", ">"))
    assert page.get_by_test_id("stAlert").first.locator("em, strong, b, .katex").count() == 0
