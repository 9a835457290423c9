"""From-scratch forward with full capture vs transformers' eager forward with output_attentions, same weights."""

from __future__ import annotations

import statistics
import time

import torch

from bench.inputs import ids_of
from explorer.run.reference_view import folder_of
from models import registry
from models.pretrained import minilm_folder
from models.reference import load_reference, run_reference

LENGTHS = (16, 128, 512)


def _time_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def run(lengths=LENGTHS, repeats: int = 25, warmup: int = 3, model: str = "minilm") -> list[dict]:
    """Median milliseconds of each and the median paired ratio, interleaved so machine noise hits both alike; `model`:
    a registry key whose weights transformers reads too (minilm, smollm2, a folder)."""
    loaded = registry.load(model)
    reference = load_reference(folder_of(model) or minilm_folder())
    rows = []
    for tokens in lengths:
        ids = ids_of(loaded, tokens)
        mask = torch.ones_like(ids)

        @torch.inference_mode()
        def ours(ids=ids):
            return loaded.model(ids)  # every internal of every layer comes back

        def theirs(ids=ids, mask=mask):
            return run_reference(reference, ids, mask)

        for _ in range(warmup):
            ours(), theirs()
        ours_ms, ref_ms = [], []
        for i in range(repeats):
            # alternate which goes first, so neither always runs on a warmer cache
            pair = (ours, theirs) if i % 2 == 0 else (theirs, ours)
            times = {fn: _time_ms(fn) for fn in pair}
            ours_ms.append(times[ours])
            ref_ms.append(times[theirs])
        o, r = statistics.median(ours_ms), statistics.median(ref_ms)
        # ratio: median of the per-pair ratios; each pair ran back to back, so drift common to both cancels
        ratio = statistics.median(a / b for a, b in zip(ours_ms, ref_ms, strict=True))
        row = {"model": model, "tokens": tokens, "ours_ms": round(o, 3), "reference_ms": round(r, 3)}
        rows.append(row | {"ratio": round(ratio, 3)})
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'model':>8}  {'tokens':>6}  {'ours_ms':>9}  {'reference_ms':>12}  {'ratio':>6}"]
    lines += [
        f"{r['model']:>8}  {r['tokens']:>6}  {r['ours_ms']:>9.2f}  {r['reference_ms']:>12.2f}  {r['ratio']:>6.3f}"
        for r in rows
    ]
    return "\n".join(lines)
