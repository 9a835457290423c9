"""Server-side time from text to every figure of the attention and model-view pages, and their bytes."""

from __future__ import annotations

import statistics
import time

import plotly.io as pio
import torch

from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.model_view import THUMBNAIL, layer_heads, model_view
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from bench.inputs import ids_of, text_of

LENGTHS = (16, 64, 512)


def page_figures(result: trace.Trace) -> dict[str, list]:
    """The figures each page draws by default (layer 1, head 1), built by the functions the pages call."""
    a = result.attention("encoder_self")
    queries, keys = result.tokens_for("encoder_self")
    # each page builds its own heatmap, so it is built twice here too
    return {
        "attention": [head_heatmap(a.weights[0, 0], queries, keys, "Layer 1, head 1"), layer_heads(a.weights[0])],
        "model_view": [
            model_view(a.weights, THUMBNAIL, selected=(0, 0)),
            head_heatmap(a.weights[0, 0], queries, keys, "Layer 1, head 1"),
        ],
    }


def run(lengths=LENGTHS, repeats: int = 7, model: str = "minilm") -> list[dict]:
    loaded = registry.load(model)
    rows = []
    for tokens in lengths:
        text = text_of(loaded, tokens)
        ids = ids_of(loaded, tokens)

        def forward(ids=ids):
            with torch.inference_mode():
                loaded.model(ids)

        def figures(text=text, tokens=tokens):
            pages = page_figures(trace.run(loaded, text, tokens))
            # serialised as st.plotly_chart sends them
            return {name: sum(len(pio.to_json(f, validate=False)) for f in figs) for name, figs in pages.items()}

        forward(), figures()
        forward_ms, figures_ms = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            forward()
            forward_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            sizes = figures()
            figures_ms.append((time.perf_counter() - start) * 1000)
        f, g = statistics.median(forward_ms), statistics.median(figures_ms)
        rows.append(
            {
                "tokens": tokens,
                "forward_ms": round(f, 2),
                "figures_ms": round(g, 2),
                "ratio": round(g / f, 2),
                "bytes": sizes,
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'tokens':>6}  {'forward_ms':>10}  {'figures_ms':>10}  {'ratio':>6}  bytes per page"]
    for r in rows:
        sizes = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in r["bytes"].items())
        lines.append(
            f"{r['tokens']:>6}  {r['forward_ms']:>10.2f}  {r['figures_ms']:>10.2f}  {r['ratio']:>6.2f}  {sizes}"
        )
    return "\n".join(lines)
