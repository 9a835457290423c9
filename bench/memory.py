"""Resident memory of the app's process: after start-up with every model loaded, and after many distinct
sentences through the same cached calls the pages make; or, in the long-text mode (issue 31: `--model smollm2
--tokens 2048 --texts 100`), one model and many distinct long texts read one layer at a time. Run in a fresh
process, so nothing else is counted."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

from bench.harness import ROOT

TARGET_STARTUP_MB = 1024
TARGET_GROWTH_MB = 300
TARGET_LONG_MAX_MB = 3072  # issue 31: the process at most 3 GB while pages read 2,048-token texts of SmolLM2
LENGTHS = (16, 64, 128, 256, 512)  # token counts, in turn


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory now (VmRSS) or at its highest since start or since reset_peak (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Start VmHWM again from the resident memory now (Linux 4.0+: proc(5), /proc/pid/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _measure(sentences: int) -> dict:
    """In this process: load as the server does, then push `sentences` distinct sentences through the caches."""
    from streamlit.logger import set_log_level

    set_log_level("error")  # bare mode warns on every cached call, each of streamlit's loggers
    from attention_explorer.explorer.app import cached, compare_runs, store
    from attention_explorer.explorer.app.state import Choice
    from attention_explorer.explorer.figures.heatmap import head_heatmap
    from attention_explorer.explorer.figures.model_view import layer_heads
    from attention_explorer.explorer.run import memo
    from attention_explorer.models import registry
    from bench.inputs import text_of

    def serve(key: str, text: str, tokens: int, reference: bool) -> None:
        """What the heatmap and statistics pages compute for one sentence (and the reference page, sometimes)."""
        choice = Choice(key, text, tokens)
        result = cached.get_trace(choice)
        cached.get_statistics(choice, "encoder_self")
        weights, labels = result.encoder_self.weights, result.source_tokens
        head_heatmap(weights[0, 0], labels, labels).to_json()
        layer_heads(weights[0]).to_json()
        if reference:
            compare_runs.get_reference_difference(choice, 0, 0)  # as the page asks: the grid and a head

    # start-up as a server's: every model and the reference loaded, and the first page drawn once (plotly and torch
    # load parts of themselves on first use); the store emptied again, so the growth below starts from nothing
    for key in registry.MODELS:
        cached.get_model(key)
    cached.get_reference()
    serve("minilm", "The first page, drawn once at start-up", 16, reference=True)
    store.shared().clear()
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
    kept = store.shared()
    return {
        "startup_mb": round(startup, 1),
        "after_mb": round(after, 1),
        "growth_mb": round(after - startup, 1),
        "peak_mb": round(peak, 1),
        "after_trim_mb": round(trimmed, 1),
        "sentences": sentences,
        "store_mb": round(kept.bytes / 2**20, 1),
        "store_bound_mb": round(kept.max_bytes / 2**20, 1),
        "store_entries": len(kept),
        "target_startup_mb": TARGET_STARTUP_MB,
        "target_growth_mb": TARGET_GROWTH_MB,
    }


def _serve_long(key: str, text: str, tokens: int) -> None:
    """What the pages compute for one long text, reading one layer or head at a time (a long text's whole (L, H, T, T)
    weights are never held): the run, then three layers' heads side by side (the attention page's small multiples,
    pooled) and one head at full resolution (its heatmap); the next tokens come with the run."""
    from attention_explorer.explorer.app import cached
    from attention_explorer.explorer.app.state import Choice
    from attention_explorer.explorer.figures.heatmap import head_heatmap
    from attention_explorer.explorer.figures.model_view import layer_heads

    loaded = cached.get_model(key)
    kind = loaded.family.kinds[0]  # the attention that reads the text: BERT's encoder self, a decoder's masked self
    config = loaded.model.config
    n_layers = config.n_encoder_layers if kind == "encoder_self" else config.n_decoder_layers
    result = cached.get_trace(Choice(key, text, tokens))
    queries, keys = result.tokens_for(kind)
    for layer in sorted({0, n_layers // 2, n_layers - 1}):
        weights = result.attention(kind).layer(layer).weights  # (H, Tq, Tk)
        layer_heads(weights, layer).to_json()
        if layer == 0:
            head_heatmap(weights[0], list(queries), list(keys)).to_json()


def _measure_long(key: str, tokens: int, texts: int) -> dict:
    """In this process: load one model as the server does, then read `texts` distinct texts of `tokens` tokens."""
    from streamlit.logger import set_log_level

    set_log_level("error")  # as in _measure: stderr shows the progress alone
    from attention_explorer.explorer.app import cached, store
    from attention_explorer.explorer.run import layers, memo
    from bench.inputs import text_of

    # start-up: the model loaded and a short text through the same calls (plotly and torch load parts of themselves on
    # first use); the store and the recomputed layers emptied again, so what follows starts from nothing
    loaded = cached.get_model(key)
    _serve_long(key, loaded.example, min(16, tokens))
    store.shared().clear()
    layers.cache().clear()
    gc.collect()
    memo.release_memory()
    startup = rss_mb()
    reset_peak()  # the peak from here on: the texts', not the load's
    text = text_of(loaded, tokens)
    highest, first = startup, None
    for i in range(texts):
        _serve_long(key, f"{i} {text}", tokens)  # a different text each time: no cached run answers it
        now = rss_mb()
        highest, first = max(highest, now), now if first is None else first
        if (i + 1) % 10 == 0 or i + 1 == texts:
            print(f"{i + 1}/{texts} texts: {now:.0f} MB resident", file=sys.stderr, flush=True)
    gc.collect()
    after = rss_mb()
    kept, recomputed = store.shared(), layers.cache()
    return {
        "model": key,
        "tokens": tokens,
        "texts": texts,
        "startup_mb": round(startup, 1),
        "after_first_mb": round(first or startup, 1),
        "max_mb": round(highest, 1),  # resident after each text's calls, at its highest
        "peak_mb": round(rss_mb("VmHWM"), 1),  # resident at any moment, inside the calls too
        "after_mb": round(after, 1),
        "growth_mb": round(after - startup, 1),
        "growth_after_first_mb": round(after - (first or startup), 1),
        "store_mb": round(kept.bytes / 2**20, 1),
        "store_bound_mb": round(kept.max_bytes / 2**20, 1),
        "store_entries": len(kept),
        "layers_mb": round(recomputed.bytes / 2**20, 1),  # layers recomputed for the views, shared by every session
        "layers_bound_mb": round(recomputed.max_bytes / 2**20, 1),
        "target_max_mb": TARGET_LONG_MAX_MB,
        "target_growth_mb": TARGET_GROWTH_MB,
    }


def run(sentences: int = 500, model: str | None = None, tokens: int = 2048, texts: int = 100) -> dict:
    """The measurement in a fresh interpreter (imports and all), so the figures are the app's alone: many short
    sentences over every model, or with `model` its long-text mode (progress on stderr)."""
    from bench import folders

    folders.use([model] if model else [])  # a bench folder's variable travels to the fresh interpreter
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    short = f"_measure({int(sentences)})"
    call = short if model is None else f"_measure_long({model!r}, {int(tokens)}, {int(texts)})"
    code = f"import json; from bench.memory import _measure, _measure_long; print(json.dumps({call}))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True, timeout=4 * 3600
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(summary: dict) -> str:
    width = max(len(k) for k in summary)
    return "\n".join(f"{k:>{width}}  {v}" for k, v in summary.items())
