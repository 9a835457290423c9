"""In headless Chromium: from pressing Ctrl+Enter on a new sentence to its heatmap being drawn."""

from __future__ import annotations

import statistics
import time
import urllib.parse

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
                harness.sentence_box(page).press(harness.RUN_KEY)
                harness.wait_for_tokens(page, list(expected.tokens))
                if attempt:
                    times.append(time.perf_counter() - start)
            rows.append({"tokens": tokens, "enter_to_drawn_s": round(statistics.median(times), 3)})
    return rows


def table(rows: list[dict]) -> str:
    return "\n".join(
        [f"{'tokens':>6}  enter_to_drawn_s"] + [f"{r['tokens']:>6}  {r['enter_to_drawn_s']:.3f}" for r in rows]
    )


PAGE_LENGTHS = (16, 128, 512)
NEXT_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def pages(lengths=PAGE_LENGTHS) -> list[dict]:
    """Every page of the sidebar opened after a sentence of each length (MiniLM, max tokens set to it): seconds from
    the click to the page's run finished and painted (the browser's own drawing included, since the page cannot
    answer while its main thread is busy), and the megabytes the server sent for it over the websocket."""
    loaded = registry.load("minilm")
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        for tokens in lengths:
            page = harness.new_page(browser)
            received = [0]

            def count(payload, received=received) -> None:
                received[0] += len(payload)

            page.on("websocket", lambda socket, count=count: socket.on("framereceived", count))
            page.goto(f"{url}/train", timeout=harness.TIMEOUT_MS)  # a page that reads no sentence, and is visited last
            page.wait_for_function(harness.SETTLED, arg=0, timeout=harness.TIMEOUT_MS)
            harness.set_max_tokens(page, tokens)
            harness.type_sentence(page, text_of(loaded, tokens))
            links = page.get_by_test_id("stSidebarNav").locator("a")
            for i in range(links.count()):
                link = links.nth(i)
                # the page's address, not the link's text (which carries its icon's ligature name too)
                title = urllib.parse.urlparse(link.get_attribute("href") or "").path.strip("/") or "overview"
                received[0] = 0
                start = time.perf_counter()
                with harness.rerun(page):
                    link.click()
                page.evaluate(NEXT_FRAMES)
                rows.append(
                    {
                        "tokens": tokens,
                        "page": title,
                        "seconds": round(time.perf_counter() - start, 2),
                        "mb": round(received[0] / 1e6, 2),
                        "error": page.get_by_test_id("stException").count() > 0,
                    }
                )
            page.context.close()
    return rows


def pages_table(rows: list[dict]) -> str:
    lines = [f"{'tokens':>6}  {'page':<28} {'seconds':>8} {'MB':>7}  error"]
    lines += [f"{r['tokens']:>6}  {r['page']:<28} {r['seconds']:>8.2f} {r['mb']:>7.2f}  {r['error']}" for r in rows]
    return "\n".join(lines)
