"""The README's pictures: the first 1600 x 900 screen of the Overview, three lesson steps and presenter mode, on the
toy translation model, and SmolLM2 completing a sentence and reading it layer by layer, drawn by a live app in headless
Chromium.

`python -m bench.pictures [--out docs/pictures] [--only NAME ...]`"""

from __future__ import annotations

import argparse
import urllib.parse
from pathlib import Path

from PIL import Image

from attention_explorer.explorer import navigation
from bench import harness
from bench.browser import CHARTS_DRAWN
from bench.shots import HEIGHT, WIDTH

QUERY = urllib.parse.urlencode({"model": navigation.TRANSLATE, "text": navigation.TRANSLATE_EXAMPLE})
PAYOFF_TEXT = "The Eiffel Tower is located in the city of"
# picture name -> the address it shows (the Overview is the root address)
# the pictures whose step asks the class first: answered and revealed, so the picture shows the model's numbers
ANSWERED = ("scores", "payoff")
PICTURES = {
    "overview": f"/?{QUERY}",
    "scores": f"/scores?{QUERY}",
    "model_view": f"/model_view?{QUERY}",
    "decoding": f"/decoding?{QUERY}",
    "presenter": f"/query_key_value?{QUERY}&present=1",
    # a real language model completes a sentence: SmolLM2's next-token distribution after "The capital of France is"
    "real_model": "/final_linear?" + urllib.parse.urlencode({"model": "smollm2", "text": "The capital of France is"}),
    # the lesson's payoff in presenter mode: at the text's last position, the layer where " Paris" first ranks first
    "payoff": "/layer_predictions?" + urllib.parse.urlencode({"model": "smollm2", "text": PAYOFF_TEXT, "present": "1"}),
}
MAX_BYTES = 400_000  # the repository carries these files: a larger one is saved with a 256-colour palette


def picture(browser, url: str, path: Path, answer: bool = False) -> int:
    """Open the address in a new session, wait until its run is over and every chart drawn and painted, and save the
    first screen; returns the file's size in bytes."""
    page = harness.new_page(browser, WIDTH, HEIGHT)  # device scale 1: 1600 x 900 pixels
    try:
        if answer:  # its charts come with the answer
            page.goto(url, timeout=harness.TIMEOUT_MS)
            page.wait_for_function(harness.SETTLED, arg=0, timeout=harness.TIMEOUT_MS)
            harness.reveal(page)
            page.wait_for_selector(".js-plotly-plot", timeout=harness.TIMEOUT_MS)
        else:
            harness.open_app(page, url)
        page.wait_for_function(CHARTS_DRAWN, timeout=harness.TIMEOUT_MS)
        page.evaluate(harness.NEXT_FRAMES)
        if page.get_by_test_id("stException").count():
            print(f"  {path.name}: the page shows an error", flush=True)
        page.screenshot(path=str(path))
    finally:
        page.context.close()
    if path.stat().st_size > MAX_BYTES:
        with Image.open(path) as image:
            paletted = image.convert("RGB").quantize(colors=256)
        paletted.save(path, optimize=True)
    return path.stat().st_size


def run(out: Path, only: tuple[str, ...] = ()) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with harness.app_server() as url, harness.chromium() as browser:
        for name, address in PICTURES.items():
            if only and name not in only:
                continue
            path = out / f"{name}.png"
            size = picture(browser, url + address, path, name in ANSWERED)
            print(f"{path}  {size / 1000:.0f} KB  {address}", flush=True)
            written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.ROOT / "docs" / "pictures")
    parser.add_argument("--only", nargs="+", default=(), help="these pictures only, by name")
    args = parser.parse_args()
    run(args.out, tuple(args.only))
