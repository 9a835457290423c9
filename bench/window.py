"""A sliding-window layer on its band (models.attention.banded_attention) against the dense masked path and against
the same model in float64, on a real model over a text longer than its window (issue 51): per layer, the largest
attention-weight difference and the largest hidden-state difference relative to the state's largest magnitude, for
band vs dense, dense vs float64 and band vs float64; the seconds of each forward; and our first run (the band: a long
text's run keeps no raw scores) against transformers' eager forward, with the band's weights against transformers'.

    python -m bench window [--lengths 2048] [--model gemma3] [--no-reference]

The dense path is transformers' eager computation bit for bit (tests/models/test_convert_*); both float32 paths are
float32 roundings of the same eq. (1), which the float64 run shows: a layer deep in Gemma 3, where its residual
stream reaches |h| ~ 1e5, moves the weights of either by ~1e-4 from the float64 result."""

from __future__ import annotations

import contextlib
import copy
import gc
import time

import torch

from attention_explorer.explorer.app import reduced
from attention_explorer.explorer.run import trace
from attention_explorer.explorer.run.layers import drop_attention
from attention_explorer.explorer.run.reference_view import folder_of
from attention_explorer.models import registry
from attention_explorer.models.attention import (
    banded_attention,
    dense_windows,
    raw_scores_dropped,
    scaled_dot_product_attention,
    window_mask,
)
from attention_explorer.models.reference import load_reference, run_reference
from bench.inputs import ids_of, text_of

LENGTHS = (2048,)


def _forward(model, ids, band: bool, keep=drop_attention):
    """One forward keeping no raw scores (as a long text's run), its local layers on their band or (band False,
    dense_windows) dense and masked; `keep` sees each layer's internals."""
    with torch.inference_mode(), raw_scores_dropped(), contextlib.nullcontext() if band else dense_windows():
        return model(ids, logits=False, keep=keep)


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _kept(weights: list, states: list):
    """A keep function that copies each layer's (H, T, T) weights (float64 for a comparison) and its output."""

    def keep(internals):
        weights.append(internals.self_attn.weights[0].to(torch.float64))
        states.append(internals.after_ffn[0].to(torch.float64))
        return drop_attention(internals)

    return keep


def attention_ms(model, tokens: int, repeats: int = 5) -> dict:
    """One local layer's attention alone (q, k, v of the model's shape, random), dense masked vs on its band, keeping
    no raw scores: the fastest of `repeats` alternating runs each, in milliseconds (a whole forward's seconds on a
    busy machine swing by more than the difference)."""
    layer = next(layer.self_attn for layer in model.decoder.layers if layer.self_attn.window is not None)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, layer.n_heads, tokens, layer.d_head, generator=generator) for _ in range(3))
    causal = torch.ones(tokens, tokens, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
    mask = causal & window_mask(0, tokens, tokens, layer.window)
    runs = {
        "dense": lambda: scaled_dot_product_attention(q, k, v, mask, layer.scaling),
        "band": lambda: banded_attention(q, k, v, mask, layer.window, 0, layer.scaling),
    }
    found = {name: [] for name in runs}
    with torch.inference_mode(), raw_scores_dropped():
        for i in range(repeats + 1):
            for name in ("dense", "band") if i % 2 == 0 else ("band", "dense"):
                took = _seconds(runs[name]) * 1000
                if i:  # the first of each: a warm-up
                    found[name].append(took)
    return {f"layer_{name}_ms": min(times) for name, times in found.items()}


def run(lengths=LENGTHS, model: str = "gemma3", reference: bool = True, repeats: int = 2) -> list[dict]:
    """One row per layer and length: window, band_dense, dense_f64, band_f64 (largest |weight| difference),
    h_band_dense, h_dense_f64, h_band_f64 (largest |state| difference / the float64 state's largest |h|), and per
    length the seconds of dense, band (median of `repeats`, alternating) and float64 forwards, and with `reference`
    our first run against transformers' eager forward and the band's weights against transformers'."""
    loaded = registry.load(model)
    ours = loaded.model.eval()
    windows = [layer.self_attn.window for layer in ours.decoder.layers]
    rows = []
    for tokens in lengths:
        ids = ids_of(loaded, tokens)
        _forward(ours, ids[:, :16], True)  # torch's first-use buffers
        timed = {"dense": [], "band": []}
        for i in range(repeats):
            for name in ("dense", "band") if i % 2 == 0 else ("band", "dense"):
                timed[name].append(_seconds(lambda name=name, ids=ids: _forward(ours, ids, name == "band")))
        found = {}
        for name in ("dense", "band"):
            weights, states = [], []
            _forward(ours, ids, name == "band", _kept(weights, states))
            found[name] = (weights, states)
        exact_model = copy.deepcopy(ours).double()
        exact_weights, exact_states = [], []
        start = time.perf_counter()
        with torch.inference_mode(), raw_scores_dropped(), dense_windows():
            exact_model(ids, logits=False, keep=_kept(exact_weights, exact_states))
        f64_seconds = time.perf_counter() - start
        del exact_model
        gc.collect()
        (dw, ds), (bw, bs) = found["dense"], found["band"]
        for i, window in enumerate(windows):
            top = float(exact_states[i].abs().max())
            rows.append(
                {
                    "tokens": tokens,
                    "layer": i,
                    "window": window,
                    "band_dense": float((bw[i] - dw[i]).abs().max()),
                    "dense_f64": float((dw[i] - exact_weights[i]).abs().max()),
                    "band_f64": float((bw[i] - exact_weights[i]).abs().max()),
                    "h_band_dense": float((bs[i] - ds[i]).abs().max()) / top,
                    "h_dense_f64": float((ds[i] - exact_states[i]).abs().max()) / top,
                    "h_band_f64": float((bs[i] - exact_states[i]).abs().max()) / top,
                    "max_h": top,
                }
            )
        summary = {
            "tokens": tokens,
            "dense_s": min(timed["dense"]),
            "band_s": min(timed["band"]),
            "f64_s": f64_seconds,
        } | attention_ms(ours, tokens)
        del found, exact_weights, exact_states, dw, ds, bs
        gc.collect()
        if reference:
            summary |= _against_reference(loaded, model, tokens, ids, bw)
        rows.append(summary)
        del bw
        gc.collect()
    return rows


def _against_reference(loaded, model: str, tokens: int, ids, band_weights) -> dict:
    """Our first run (trace.run with the pages' reductions: the band) against transformers' eager forward without
    attentions (as bench forward's first-run pair), and the band's weights against transformers' own."""
    start = time.perf_counter()
    reference = load_reference(folder_of(model))
    load_s = time.perf_counter() - start
    text = text_of(loaded, tokens)
    first = _seconds(lambda: trace.run(loaded, text, tokens, reduce=reduced.for_model(loaded)))
    with torch.inference_mode():
        plain = _seconds(lambda: run_reference(reference, ids, hidden_states=False, attentions=False))
        first2 = _seconds(lambda: trace.run(loaded, text, tokens, reduce=reduced.for_model(loaded)))
        plain2 = _seconds(lambda: run_reference(reference, ids, hidden_states=False, attentions=False))
        out = run_reference(reference, ids, hidden_states=False, logits=False)
    theirs = [a[0].to(torch.float64) for a in out.attentions]
    return {
        "reference_load_s": load_s,
        "first_run_s": min(first, first2),
        "transformers_s": min(plain, plain2),
        "first_ratio": min(first, first2) / min(plain, plain2),
        "band_vs_transformers": [float((b - t).abs().max()) for b, t in zip(band_weights, theirs, strict=True)],
    }


def table(rows: list[dict]) -> str:
    """Per layer: the three weight differences and the three relative state differences; then the seconds."""
    lines = [
        "tokens layer window |  band-dense   dense-f64    band-f64 | h: band-dense   dense-f64    band-f64   max|h|"
    ]
    for r in rows:
        if "layer" in r:
            lines.append(
                f"{r['tokens']:>6} {r['layer']:>5} {str(r['window']):>6} | {r['band_dense']:>10.2e}  "
                f"{r['dense_f64']:>10.2e}  {r['band_f64']:>10.2e} | {r['h_band_dense']:>13.2e}  "
                f"{r['h_dense_f64']:>10.2e}  {r['h_band_f64']:>10.2e}  {r['max_h']:>7.3g}"
            )
        else:
            lines.append(
                f"{r['tokens']} tokens: dense {r['dense_s']:.1f} s, band {r['band_s']:.1f} s "
                f"({r['band_s'] / r['dense_s']:.2f}x), float64 {r['f64_s']:.1f} s; one local layer's attention: "
                f"dense {r['layer_dense_ms']:.0f} ms, band {r['layer_band_ms']:.0f} ms "
                f"({r['layer_band_ms'] / r['layer_dense_ms']:.2f}x)"
            )
            if "first_run_s" in r:
                worst = max(r["band_vs_transformers"])
                lines.append(
                    f"  first run (band) {r['first_run_s']:.1f} s vs transformers eager {r['transformers_s']:.1f} s: "
                    f"{r['first_ratio']:.3f}x; band vs transformers' weights: largest {worst:.2e} "
                    f"(layer {r['band_vs_transformers'].index(worst)}); "
                    f"transformers' load {r['reference_load_s']:.0f} s"
                )
    return "\n".join(lines)
