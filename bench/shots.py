"""Screenshots of every page as a class would see it, at 1600 x 900: the first screen (what a projector shows) and
the whole page, for each model and length, with seconds to drawn and MB sent per page.

`python -m bench.shots [--out DIR] [--models KEY ...] [--lengths N ...] [--only PAGE ...]`"""

from __future__ import annotations

import argparse
from pathlib import Path

from attention_explorer.models import registry
from bench import harness
from bench.browser import NEXT_FRAMES, each_page, lengths_for, open_timed, sentence_session
from bench.inputs import text_of

WIDTH, HEIGHT = 1600, 900
LENGTHS = (3, 16, 128, 512)
MODELS = ("minilm", "minilm-random", "paper-random", "translate")


def shot(page, path: Path) -> None:
    """The first screen, then the whole page (the viewport made as tall as Streamlit's scrolling container)."""
    page.screenshot(path=str(path.with_suffix(".screen.png")))
    height = page.evaluate("""() => document.querySelector('[data-testid="stMain"]')?.scrollHeight || 900""")
    page.set_viewport_size({"width": WIDTH, "height": min(max(int(height), HEIGHT), 8000)})
    page.evaluate(NEXT_FRAMES)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})


def run(
    out: Path, models=MODELS, lengths=LENGTHS, only: tuple[str, ...] = (), env: dict | None = None, load=registry.load
) -> list[str]:
    """`env`: more of the server's environment (the folders it offers); `load`: how a model key is loaded here."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with harness.app_server(env=env) as url, harness.chromium() as browser:
        for model in models:
            loaded = load(model)
            for tokens in lengths_for(loaded.max_tokens, lengths):
                page, received = sentence_session(browser, url, model, text_of(loaded, tokens), tokens)
                page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
                for name, link in each_page(page, only):
                    seconds, mb = open_timed(page, link, received)
                    shot(page, out / f"{model}_{tokens}_{name}.png")
                    errors = page.get_by_test_id("stException").count()
                    rows.append(f"{model:<13} {tokens:>5} {name:<18} {seconds:>6.2f} s {mb:>6.2f} MB errors={errors}")
                    print(rows[-1], flush=True)
                page.context.close()
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.ROOT / "artifacts" / "shots")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS)
    parser.add_argument("--only", nargs="+", default=())
    args = parser.parse_args()
    run(args.out, args.models, args.lengths, tuple(args.only))
