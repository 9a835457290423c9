"""In headless Chromium: from pressing Enter on a new sentence to its heatmap being drawn."""

from __future__ import annotations

import statistics
import time

from bench import harness
from bench.inputs import text_of
from models import registry

LENGTHS = (16, 64, 512)


def run(lengths=LENGTHS, repeats: int = 3) -> list[dict]:
    loaded = registry.load("minilm")
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        page = harness.new_page(browser)
        harness.open_app(page, f"{url}/attention")  # the heatmap: chart 0 is what is timed
        for tokens in lengths:
            harness.set_max_tokens(page, tokens)
            times = []
            for attempt in range(repeats + 1):  # the first is a warm-up
                # a different sentence each time, so no cached trace answers it
                text = f"{attempt} " + text_of(loaded, tokens)
                expected = loaded.tokenizer.encode(text, tokens)
                harness.type_sentence(page, text, press_enter=False)
                start = time.perf_counter()
                page.get_by_test_id("stTextInputField").first.press("Enter")
                harness.wait_for_tokens(page, list(expected.tokens))
                if attempt:
                    times.append(time.perf_counter() - start)
            rows.append({"tokens": tokens, "enter_to_drawn_s": round(statistics.median(times), 3)})
    return rows


def table(rows: list[dict]) -> str:
    return "\n".join(
        [f"{'tokens':>6}  enter_to_drawn_s"] + [f"{r['tokens']:>6}  {r['enter_to_drawn_s']:.3f}" for r in rows]
    )
