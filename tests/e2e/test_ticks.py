"""At 16, 128 and 512 tokens, in real Chromium: no two drawn tick labels of a token axis overlap, and every page
of attention views is screenshotted (artifacts/screenshots/ticks_<page>_<n>.png) to be looked at."""

from __future__ import annotations

import pytest

from attention_explorer.models import registry
from bench import harness
from bench.harness import TIMEOUT_MS
from bench.inputs import text_of
from tests.e2e.conftest import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# (sidebar title, file stem, charts whose axes name tokens)
PAGES = (
    ("Attention heatmap", "attention", (0,)),
    ("8. The stack: every layer and head", "model_view", (1,)),
    ("Head view", "head_view", ()),
    ("Rollout and flow", "aggregation", (0, 1)),
    ("Compare weights", "compare", (1, 2)),
    ("Compare sentences", "compare_sentences", (1, 2, 3)),
    ("Ours vs transformers", "reference", (1, 2, 3)),
    ("Find heads", "find_heads", ()),
    ("Head statistics", "statistics", ()),
)
BOXES = """(chart) => {  // the drawn label boxes of one axis of chart `chart`, in page pixels
    const plot = document.querySelectorAll('.js-plotly-plot')[chart[0]];
    return Array.from(plot.querySelectorAll(`g.${chart[1]} text`))
        .filter(t => t.textContent.trim())
        .map(t => { const b = t.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom, t.textContent]; });
}"""


def overlapping(boxes: list) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes share more than half a pixel each way."""
    pairs = []
    for i, (l1, t1, r1, b1, s1) in enumerate(boxes):
        for l2, t2, r2, b2, s2 in boxes[i + 1 :]:
            if min(r1, r2) - max(l1, l2) > 0.5 and min(b1, b2) - max(t1, t2) > 0.5:
                pairs.append((s1, s2))
    return pairs


@pytest.mark.parametrize("n_tokens", [16, 128, 512])
def test_tick_labels_never_overlap(server, page, n_tokens):
    loaded = registry.load("minilm")
    harness.open_app(page, server)
    box = page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first
    if box.input_value() != str(n_tokens):  # the default needs no run
        harness.set_max_tokens(page, n_tokens)
    harness.type_sentence(page, text_of(loaded, n_tokens))
    for title, stem, charts in PAGES:
        harness.open_page(page, title)
        page.wait_for_selector(".js-plotly-plot", timeout=TIMEOUT_MS)
        for chart in charts:
            for axis in ("xtick", "ytick"):
                boxes = page.evaluate(BOXES, [chart, axis])
                assert boxes, f"{title}: chart {chart} draws no {axis} labels"
                assert len(boxes) <= 40
                assert not overlapping(boxes), f"{title} at {n_tokens}: {axis} labels overlap"
        screenshot(page, f"ticks_{stem}_{n_tokens}")
