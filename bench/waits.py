"""A long text's Q/K/V while it waits: the first screen as the page opens and again as a layer change recomputes one
layer, each screenshot taken while the page's own spinner (with its estimate) is on screen, at 1600 x 900.

`python -m bench.waits [--out DIR] [--tokens N]`"""

from __future__ import annotations

import argparse
from pathlib import Path

from attention_explorer.models import registry
from bench import harness
from bench.browser import sentence_session
from bench.inputs import text_of
from bench.shots import HEIGHT, WIDTH

SPINNER = '[data-testid="stSpinner"]'


def while_waiting(page, path: Path) -> str:
    """Once the page's spinner shows, its text and a screenshot of the screen with it in view."""
    spinner = page.locator(SPINNER).first
    spinner.wait_for(state="visible", timeout=harness.TIMEOUT_MS)
    said = spinner.evaluate("(e) => { e.scrollIntoView({block: 'center'}); return e.innerText; }")
    page.screenshot(path=str(path))
    return said


def run(out: Path, tokens: int = 2421, model: str = "smollm2") -> None:
    out.mkdir(parents=True, exist_ok=True)
    loaded = registry.load(model)
    with harness.app_server() as url, harness.chromium() as browser:
        page, _ = sentence_session(browser, url, model, text_of(loaded, tokens), tokens)
        page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        harness.menu_link(page, "4. Query, key and value").click()
        print("opening:", while_waiting(page, out / f"{model}_{tokens}_qkv_opening.png"), flush=True)
        page.locator(SPINNER).first.wait_for(state="detached", timeout=harness.TIMEOUT_MS)
        page.evaluate(harness.NEXT_FRAMES)
        page.screenshot(path=str(out / f"{model}_{tokens}_qkv_drawn.png"))
        main = page.get_by_test_id("stMain")
        main.get_by_test_id("stSelectbox").first.click()
        page.get_by_role("option").nth(3).click()
        print("layer change:", while_waiting(page, out / f"{model}_{tokens}_qkv_layer_change.png"), flush=True)
        page.locator(SPINNER).first.wait_for(state="detached", timeout=harness.TIMEOUT_MS)
        page.evaluate(harness.NEXT_FRAMES)
        page.screenshot(path=str(out / f"{model}_{tokens}_qkv_layer_drawn.png"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.ROOT / "artifacts" / "waits")
    parser.add_argument("--tokens", type=int, default=2421)
    args = parser.parse_args()
    run(args.out, args.tokens)
