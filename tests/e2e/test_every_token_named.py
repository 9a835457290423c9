"""On a 7-token sentence every token fits, so every map names every token on both axes (in real Chromium: the
labels Plotly actually drew, not the ones it was sent). Thinning is for long inputs only."""

from __future__ import annotations

import urllib.parse

import pytest

from attention_explorer.explorer.navigation import BY_STEM
from bench import harness
from bench.harness import TIMEOUT_MS, open_app
from tests.e2e.conftest import TOKEN_MAPS, screenshot, step_freely

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SENTENCE = "the teacher reads a long book"  # 7 tokens with <eos>: it was labelled every other row
PAGES = ("Attention heatmap", BY_STEM["model_view"].label, BY_STEM["decoding"].label)


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_a_short_sentence_has_every_token_named_on_every_map(server, page, kind):
    query = urllib.parse.urlencode({"model": "translate", "text": SENTENCE, "kind": kind})
    open_app(page, f"{server}/attention?{query}")
    seen = 0
    for title in PAGES:
        harness.open_page(page, title)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=TIMEOUT_MS)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        if title == BY_STEM["decoding"].label:  # its maps come once the class has answered: step through freely
            step_freely(page)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=TIMEOUT_MS)
        maps = page.evaluate(TOKEN_MAPS)
        assert maps, f"{title}: no token map drawn"
        for drawn in maps:
            assert len(drawn["xticks"]) == drawn["x"] and len(drawn["yticks"]) == drawn["y"], (title, drawn)
        seen += len(maps)
        screenshot(page, f"every_token_{kind}_{title.split()[0].lower()}")
    assert seen >= 3
