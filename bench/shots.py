"""Screenshots of Q/K/V step by step (MiniLM) and Decoding step by step (paper-random, at its last step) at 16, 128
and 512 tokens, with seconds to drawn and MB sent per page: `python -m bench.shots [OUT_DIR]`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench import harness
from bench.browser import CHARTS_DRAWN, NEXT_FRAMES
from bench.inputs import text_of
from models import registry

LENGTHS = (16, 128, 512)
PAGES = (("minilm", "qkv", "Q/K/V"), ("paper-random", "decoding", "Decoding"))


def shot(page, path: Path) -> None:
    """The whole page: the viewport made as tall as Streamlit's scrolling container first."""
    height = page.evaluate("""() => document.querySelector('[data-testid="stMain"]')?.scrollHeight || 1000""")
    page.set_viewport_size({"width": 1400, "height": min(max(int(height), 1000), 8000)})
    page.evaluate(NEXT_FRAMES)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1400, "height": 1000})


def timed_click(page, title: str, received: list[int]) -> tuple[float, float]:
    """Open a page from the sidebar (the sentence stays): seconds to its run finished and painted, MB sent."""
    received[0] = 0
    start = time.perf_counter()
    with harness.rerun(page):
        page.get_by_test_id("stSidebarNav").locator("a").filter(has_text=title).first.click()
    page.wait_for_function(CHARTS_DRAWN, timeout=harness.TIMEOUT_MS)
    page.evaluate(NEXT_FRAMES)
    return round(time.perf_counter() - start, 2), round(received[0] / 1e6, 2)


def run(out: Path, lengths=LENGTHS, pages=PAGES) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    minilm = registry.load("minilm")
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        for tokens in lengths:
            for model, name, title in pages:
                print("at", tokens, name, flush=True)
                page = harness.new_page(browser)
                received = [0]

                def count(payload, received=received) -> None:
                    received[0] += len(payload)

                page.on("websocket", lambda socket, count=count: socket.on("framereceived", count))
                page.goto(f"{url}/train?model={model}", timeout=harness.TIMEOUT_MS)
                page.wait_for_function(harness.SETTLED, arg=0, timeout=harness.TIMEOUT_MS)
                box = page.get_by_test_id("stSidebar").get_by_test_id("stNumberInputField").first
                if box.input_value() != str(tokens):  # the same value again would start no run to wait for
                    harness.set_max_tokens(page, tokens)
                harness.type_sentence(page, text_of(minilm, tokens))
                seconds, mb = timed_click(page, title, received)
                if name == "decoding" and page.get_by_test_id("stSlider").count():  # its last step: the longest
                    track = page.get_by_test_id("stSlider").first.get_by_role("slider").bounding_box()
                    with harness.rerun(page):
                        page.mouse.click(track["x"] + track["width"] / 2, track["y"] + track["height"] / 2)
                        page.keyboard.press("End")
                shot(page, out / f"{name}_{tokens}.png")
                errors = page.get_by_test_id("stException").count()
                rows.append(f"{tokens:>5} {name:<9} {seconds:>6.2f} s {mb:>6.2f} MB errors={errors}")
                page.context.close()
    return rows


if __name__ == "__main__":
    print("\n".join(run(Path(sys.argv[1]) if len(sys.argv) > 1 else harness.ROOT / "artifacts" / "shots")))
