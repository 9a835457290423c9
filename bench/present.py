"""Presenter mode, step by step: for each lesson page opened with ?present=1 at 1600 x 900, where its first figure
sits on the first screen (top and bottom in px; it fits when its bottom is within the screen), the smallest body
text in px, and a screenshot of that first screen. --normal measures the same pages without ?present=1.

`python -m bench.present [--out DIR] [--models KEY ...] [--lengths N ...] [--text TEXT] [--normal]`"""

from __future__ import annotations

import argparse
import re
import urllib.parse
from pathlib import Path

from attention_explorer.explorer import navigation
from attention_explorer.models import registry
from bench import harness
from bench.browser import CHARTS_DRAWN
from bench.inputs import text_of
from bench.shots import HEIGHT, WIDTH

# the first chart's box on screen, and the computed size of the main area's paragraphs
MEASURE = """() => {
    const chart = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    const box = chart ? chart.getBoundingClientRect() : null;
    const sizes = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdownContainer"] p')]
        .map(p => parseFloat(getComputedStyle(p).fontSize));
    return {top: box && box.top, bottom: box && box.bottom, text: sizes.length ? Math.min(...sizes) : null};
}"""


# steps whose figure comes once the class's answer is revealed
ANSWERED = ("tokens", "scores", "why_attention", "turn_off", "layer_predictions")


def measure(browser, url: str, path: Path, answer: bool = False) -> dict:
    page = harness.new_page(browser, WIDTH, HEIGHT)
    try:
        page.goto(url, timeout=harness.TIMEOUT_MS)  # not open_app: a page may draw no chart (Train, before a run)
        page.wait_for_function(harness.SETTLED, arg=0, timeout=harness.TIMEOUT_MS)
        # the run's end: a first screen can show part of a page before its links and style sheet
        links = page.get_by_role("link", name=re.compile("^(Start|Next|Previous): "))
        links.first.wait_for(timeout=harness.TIMEOUT_MS)
        # a step that offers another model instead (MiniLM's decoder steps) asks nothing
        if answer and page.get_by_test_id("stMain").get_by_role("combobox", name="Your class's answer").count():
            harness.reveal(page)
            links.first.wait_for(timeout=harness.TIMEOUT_MS)
        page.wait_for_function(CHARTS_DRAWN, timeout=harness.TIMEOUT_MS)
        page.evaluate(harness.NEXT_FRAMES)
        page.screenshot(path=str(path))
        found = page.evaluate(MEASURE)
        found["errors"] = page.get_by_test_id("stException").count()
        return found
    finally:
        page.context.close()


def run(
    out: Path, models=(navigation.TRANSLATE, "minilm"), lengths=(16,), present: bool = True, text: str = ""
) -> list[str]:
    """`text`: a sentence of the class's own instead of the bench's at each length (its pictures named 'text')."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with harness.app_server() as url, harness.chromium() as browser:
        for model in models:
            loaded = registry.load(model)
            for tokens in ("text",) if text else lengths:
                typed = text or (
                    navigation.TRANSLATE_EXAMPLE if model == navigation.TRANSLATE else text_of(loaded, tokens)
                )
                query = urllib.parse.urlencode({"model": model, "text": typed, **({"present": "1"} if present else {})})
                for page in navigation.LESSON:
                    address = f"{url}/{'' if page is navigation.OVERVIEW else page.stem}?{query}"
                    found = measure(browser, address, out / f"{model}_{tokens}_{page.stem}.png", page.stem in ANSWERED)
                    fits = found["bottom"] is not None and found["bottom"] <= HEIGHT
                    where = "no figure" if found["top"] is None else f"{found['top']:>5.0f}..{found['bottom']:>5.0f}"
                    verdict = "" if found["top"] is None else "fits" if fits else "BELOW THE SCREEN"
                    rows.append(
                        f"{model:<10} {tokens!s:>4} {page.label:<42} figure {where} px  "
                        f"{verdict}  text >= {found['text']} px  "
                        f"errors={found['errors']}"
                    )
                    print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.ROOT / "artifacts" / "present")
    parser.add_argument("--models", nargs="+", default=(navigation.TRANSLATE, "minilm"))
    parser.add_argument("--lengths", nargs="+", type=int, default=(16,))
    parser.add_argument("--text", default="", help="one sentence of your own instead of the bench's at each length")
    parser.add_argument("--normal", action="store_true", help="without ?present=1: the page as a student opens it")
    args = parser.parse_args()
    run(args.out, tuple(args.models), tuple(args.lengths), present=not args.normal, text=args.text)
