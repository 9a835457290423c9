"""Draws docs/pictures/gemma3_window.png, the README's Gemma 3 picture: Gemma 3 270M's attention (mean of its heads)
on a text over 512 tokens, a local layer's band (window 512, what it hides grey, its edge dashed) beside a global
layer's triangle, each as figures.zoom.overview_heatmap draws it in the app. Run from the repository root:
`HF_HUB_OFFLINE=1 .venv/bin/python docs/pictures/gemma3_window.py` (loads the installed gemma3, about a minute)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from attention_explorer.explorer.experiments.sample import ENGLISH
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry

OUT = Path(__file__).with_name("gemma3_window.png")
WIDTH, HEIGHT = 800, 900  # each map; the two side by side: 1600 x 900
TEXT = " ".join(ENGLISH[:40])  # everyday prose, well over the window of 512 tokens


def main() -> None:
    loaded = registry.load("gemma3")
    run = trace.run(loaded, TEXT, 2048)
    attention = run.decoder_self
    tokens = list(run.readable(run.source_tokens))
    local = next(i for i, w in enumerate(attention.windows) if w is not None)
    whole = next(i for i, w in enumerate(attention.windows) if w is None)
    images = []
    for layer in (local, whole):
        window = attention.windows[layer]
        kind = "global" if window is None else f"local, window {window}"
        title = f"Layer {layer + 1} of {len(attention.windows)} ({kind}), {len(tokens)} tokens"
        figure = zoom.overview_heatmap(attention.layer(layer).weights.mean(0), tokens, tokens, title, window=window)
        figure.update_layout(width=WIDTH, height=HEIGHT, margin={"l": 10, "r": 10, "t": 10, "b": 10})
        images.append(Image.open(io.BytesIO(figure.to_image(format="png", width=WIDTH, height=HEIGHT))))
    joined = Image.new("RGB", (2 * WIDTH, HEIGHT), "white")
    for i, image in enumerate(images):
        joined.paste(image.convert("RGB"), (i * WIDTH, 0))
    joined.save(OUT)
    print(f"{OUT}: layers {local + 1} and {whole + 1}, {len(tokens)} tokens")


if __name__ == "__main__":
    main()
