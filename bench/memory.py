"""Resident memory of the app's process: after start-up with every model loaded, and after many distinct
sentences through the same cached calls the pages make. Run in a fresh process, so nothing else is counted."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

from bench.harness import ROOT

TARGET_STARTUP_MB = 1024
TARGET_GROWTH_MB = 300
LENGTHS = (16, 64, 128, 256, 512)  # token counts, in turn


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _measure(sentences: int) -> dict:
    """In this process: load as the server does, then push `sentences` distinct sentences through the caches."""
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)  # bare mode warns on every cached call
    from bench.inputs import text_of
    from explorer.app import cached
    from explorer.figures.heatmap import head_heatmap
    from explorer.figures.model_view import layer_heads
    from explorer.run import memo
    from models import registry

    def serve(key: str, text: str, tokens: int, reference: bool) -> None:
        """What the heatmap and statistics pages compute for one sentence (and the reference page, sometimes)."""
        result = cached.get_trace(key, text, tokens)
        cached.get_statistics(key, text, tokens, "encoder_self")
        weights, labels = result.encoder_self.weights, result.source_tokens
        head_heatmap(weights[0, 0], labels, labels).to_json()
        layer_heads(weights[0]).to_json()
        if reference:
            cached.get_reference_difference(key, text, tokens, 0, 0)  # as the page asks: the grid and a head

    # start-up as a server's: every model and the reference loaded, and the first page drawn once (plotly and torch
    # load parts of themselves on first use); the store emptied again, so the growth below starts from nothing
    for key in registry.MODELS:
        cached.get_model(key)
    cached.get_reference()
    serve("minilm", "The first page, drawn once at start-up", 16, reference=True)
    cached.store().clear()
    gc.collect()
    memo.release_memory()
    startup = rss_mb()
    peak = startup
    models = ("minilm", "minilm-random")
    for i in range(sentences):
        key, tokens = models[i % 2], LENGTHS[i % len(LENGTHS)]
        text = f"{i} " + text_of(cached.get_model(key), tokens)
        serve(key, text, tokens, reference=i % 25 == 0 and key == "minilm")
        peak = max(peak, rss_mb())
    gc.collect()
    after = rss_mb()
    memo.release_memory()
    trimmed = rss_mb()
    store = cached.store()
    return {
        "startup_mb": round(startup, 1),
        "after_mb": round(after, 1),
        "growth_mb": round(after - startup, 1),
        "peak_mb": round(peak, 1),
        "after_trim_mb": round(trimmed, 1),
        "sentences": sentences,
        "store_mb": round(store.bytes / 2**20, 1),
        "store_bound_mb": round(store.max_bytes / 2**20, 1),
        "store_entries": len(store),
        "target_startup_mb": TARGET_STARTUP_MB,
        "target_growth_mb": TARGET_GROWTH_MB,
    }


def run(sentences: int = 500) -> dict:
    """The measurement in a fresh interpreter (imports and all), so the figures are the app's alone."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    code = f"import json; from bench.memory import _measure; print(json.dumps(_measure({int(sentences)})))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=3600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(summary: dict) -> str:
    return "\n".join(f"{k:>18}  {v}" for k, v in summary.items())
