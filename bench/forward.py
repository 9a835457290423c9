"""Ours against transformers' eager forward on the same weights and ids, in one process, two ways:
- first run (issue 31): the app's first run of a new text, `explorer.run.trace.run` with the pages' reductions, against
  transformers' plain forward (eager attention, no attention or hidden states returned; next-token logits, as the
  trace's top tokens);
- capture: our forward returning every internal of every layer against transformers' with output_attentions and
  output_hidden_states (both hold every head's (T, T) weights: only up to `capture_up_to` tokens)."""

from __future__ import annotations

import statistics
import time

import torch

from attention_explorer.explorer.app import reduced
from attention_explorer.explorer.run import trace
from attention_explorer.explorer.run.reference_view import folder_of
from attention_explorer.models import registry
from attention_explorer.models.pretrained import minilm_folder
from attention_explorer.models.reference import load_reference, run_reference
from bench import folders
from bench.inputs import lengths_for, text_of

LENGTHS = (16, 128, 512)
CAPTURE_UP_TO = 512  # SmolLM2's (L, H, T, T) weights alone: 0.3 GB at 512 tokens, 4.5 GB at 2,048 (and the scores)


def repeats_for(tokens: int) -> int:
    """Timed pairs at a length when none is asked for: 25 up to 128 tokens, then fewer as a run takes longer (6 at
    512, 3 from 1,024: SmolLM2's first run of 2,048 tokens takes seconds)."""
    return max(3, min(25, 25 * 128 // tokens))


def _time_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _timed(pairs: list[tuple], repeats: int, warmup: int) -> list[dict]:
    """Median milliseconds of each side of each (ours, theirs) pair and the median per-pair ratio; every repeat runs
    each pair back to back, alternating which side goes first, so machine noise and drift hit both alike."""
    for _ in range(warmup):
        for ours, theirs in pairs:
            ours(), theirs()
    times = [([], []) for _ in pairs]
    for i in range(repeats):
        for (ours, theirs), (ours_ms, ref_ms) in zip(pairs, times, strict=True):
            order = (ours, theirs) if i % 2 == 0 else (theirs, ours)  # neither always runs on a warmer cache
            took = {fn: _time_ms(fn) for fn in order}
            ours_ms.append(took[ours])
            ref_ms.append(took[theirs])
    return [
        {
            "ours_ms": round(statistics.median(ours_ms), 3),
            "reference_ms": round(statistics.median(ref_ms), 3),
            # the median of the per-pair ratios: each pair ran back to back, so drift common to both cancels
            "ratio": round(statistics.median(a / b for a, b in zip(ours_ms, ref_ms, strict=True)), 3),
        }
        for ours_ms, ref_ms in times
    ]


def run(
    lengths=LENGTHS,
    repeats: int | None = None,
    warmup: int | None = None,
    model: str = "minilm",
    capture_up_to: int = CAPTURE_UP_TO,
) -> list[dict]:
    """One row per length (a length past the model's maximum read as that maximum): the first-run comparison
    (first_*) and, up to `capture_up_to` tokens, the capture one (capture_*; None above). `model`: a registry key
    whose weights transformers reads too (minilm, smollm2, a folder, folder:gpt2-small). repeats / warmup: None scales
    them down with the length (repeats_for; one warm-up from 1,024 tokens, else three)."""
    folders.use([model])
    loaded = registry.load(model)
    reference = load_reference(folder_of(model) or minilm_folder())
    rows = []
    for tokens in lengths_for(loaded.max_tokens, lengths):  # GPT-2 small reads at most 1,024 tokens
        text = text_of(loaded, tokens)
        ids = torch.tensor([loaded.tokenizer.encode(text, tokens).ids])  # what trace.run reads from the text
        mask = torch.ones_like(ids)

        def first_run(text=text, tokens=tokens):
            # as cached.get_trace calls it: tokenizing, numpy copies and the pages' reductions of every layer included
            return trace.run(loaded, text, tokens, reduce=reduced.for_model(loaded))

        def plain(ids=ids, mask=mask):
            return run_reference(reference, ids, mask, hidden_states=False, attentions=False)

        @torch.inference_mode()
        def capture(ids=ids):
            return loaded.model(ids)  # every internal of every layer comes back

        def with_attentions(ids=ids, mask=mask):
            return run_reference(reference, ids, mask)

        pairs = [(first_run, plain)] + ([(capture, with_attentions)] if tokens <= capture_up_to else [])
        n = repeats or repeats_for(tokens)
        timed = _timed(pairs, n, warmup if warmup is not None else (1 if tokens >= 1024 else 3))
        first, captured = timed[0], timed[1] if len(timed) > 1 else dict.fromkeys(timed[0])
        row = {"model": model, "tokens": tokens, "repeats": n} | {f"first_{k}": v for k, v in first.items()}
        rows.append(row | {f"capture_{k}": v for k, v in captured.items()})
    return rows


def _cell(value, width: int, digits: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def table(rows: list[dict]) -> str:
    """first: trace.run / transformers' plain forward (issue 31's target: at most 1.5); capture: our forward with every
    internal / transformers' with attentions and hidden states ('-' past the capture limit)."""
    width = max([8, *(len(r["model"]) for r in rows)])
    head = f"{'model':>{width}}  {'tokens':>6}  {'n':>3}  {'trace_ms':>10}  {'plain_ms':>10}  {'first':>6}"
    lines = [head + f"  {'capture_ms':>10}  {'attns_ms':>10}  {'capture':>7}"]
    for r in rows:
        lines.append(
            f"{r['model']:>{width}}  {r['tokens']:>6}  {r['repeats']:>3}  {r['first_ours_ms']:>10.1f}  "
            f"{r['first_reference_ms']:>10.1f}  {r['first_ratio']:>6.3f}  {_cell(r['capture_ours_ms'], 10, 1)}  "
            f"{_cell(r['capture_reference_ms'], 10, 1)}  {_cell(r['capture_ratio'], 7, 3)}"
        )
    return "\n".join(lines)
