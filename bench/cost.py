"""The memory model of admission against real runs (issue 45): each first run as the app makes it (the pages'
reductions, in a fresh process after the model is loaded), its peak resident memory above what the process held
before it, and its time, beside explorer.run.cost's estimates. MiniLM at 128-512 tokens, SmolLM2 at 512-8,192 by
default (SmolLM2 at 8,192 tokens: about 3 minutes and 7 GB on a 2-core machine)."""

from __future__ import annotations

import json
import subprocess
import sys

RUNS = (("minilm", 128), ("minilm", 256), ("minilm", 512), *(("smollm2", n) for n in (512, 1024, 2048, 4096, 8192)))
MiB = 2**20


def measure(key: str, tokens: int) -> dict:
    """In this process: load `key`, run a short text (torch's first-use buffers), then the measured run."""
    import time

    from attention_explorer.explorer.app import reduced
    from attention_explorer.explorer.run import cost, memo, trace
    from attention_explorer.models import registry
    from bench.inputs import text_of
    from bench.memory import reset_peak, rss_mb

    memo.limit_malloc_arenas()  # as the app's process
    loaded = registry.load(key)
    text = text_of(loaded, tokens)
    trace.run(loaded, text_of(loaded, 8), 8, reduce=reduced.for_model(loaded))
    memo.release_memory()
    before = rss_mb()
    reset_peak()
    start = time.perf_counter()
    trace.run(loaded, text, tokens, reduce=reduced.for_model(loaded))
    seconds = time.perf_counter() - start
    added = rss_mb("VmHWM") - before
    config, logits = loaded.model.config, loaded.family.next_token_head
    band = not trace.short(loaded, tokens)  # a long text's first run keeps no raw scores
    estimate = cost.forward_bytes(config, tokens, 1, logits, band) / MiB
    guess = cost.forward_seconds(config, tokens, 1, logits, band)
    return {
        "model": key,
        "tokens": tokens,
        "peak_added_mb": round(added),
        "estimate_mb": round(estimate),
        "memory_error": round(estimate / added - 1, 3),
        "seconds": round(seconds, 2),
        "estimate_s": round(guess, 2),
    }


def run(runs=RUNS) -> list[dict]:
    """Each run in its own process, so that no run's peak is another's."""
    rows = []
    for key, tokens in runs:
        found = subprocess.run(
            [sys.executable, "-m", "bench.cost", key, str(tokens)], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(found.stdout.strip().splitlines()[-1]))
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'model':8} {'tokens':>6} {'peak MB':>8} {'est MB':>7} {'error':>7} {'s':>7} {'est s':>7}"]
    for r in rows:
        lines.append(
            f"{r['model']:8} {r['tokens']:6} {r['peak_added_mb']:8} {r['estimate_mb']:7} {r['memory_error']:+7.0%} "
            f"{r['seconds']:7.1f} {r['estimate_s']:7.1f}"
        )
    errors = [r["memory_error"] for r in rows]
    lines.append(f"memory model error: {min(errors):+.0%} .. {max(errors):+.0%}")
    return "\n".join(lines)


if __name__ == "__main__":  # one measurement: python -m bench.cost KEY TOKENS
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]))))
