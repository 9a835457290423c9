"""Screenshots of Q/K/V step by step (MiniLM) and Decoding step by step (paper-random, at its last step) at 16, 128
and 512 tokens, with seconds to drawn and MB sent per page: `python -m bench.shots [OUT_DIR]`."""

from __future__ import annotations

import sys
from pathlib import Path

from bench import harness
from bench.browser import NEXT_FRAMES, open_timed, sentence_session
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


def run(out: Path, lengths=LENGTHS, pages=PAGES) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    minilm = registry.load("minilm")
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        for tokens in lengths:
            for model, name, title in pages:
                print("at", tokens, name, flush=True)
                page, received = sentence_session(browser, url, model, text_of(minilm, tokens), tokens)
                link = page.get_by_test_id("stSidebarNav").locator("a").filter(has_text=title).first
                seconds, mb = open_timed(page, link, received)
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
