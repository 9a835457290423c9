"""Corpus statistics (explorer.run.corpus) against transformers' own batched forward over the same texts: 1,000 texts
of 20-40 tokens on MiniLM and 200 on SmolLM2 by default, the same batches (same texts together, same padding, same
batch size) on both sides; transformers with eager attention and output_attentions on, its body only (no output
layer, as ours runs none). Each model in its own process, so that its resident memory growth is its own: measured
over our first whole run, before transformers' copy of the model is loaded."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time

RUNS = (("minilm", 1000), ("smollm2", 200))
SHORTEST, LONGEST = 20, 40  # tokens a text
REPEATS = 3
TARGET_RATIO = 1.5
TARGET_GROWTH_MB = 300


def texts_of(loaded, n: int, seed: int = 0) -> list[str]:
    """`n` texts of SHORTEST..LONGEST tokens each (markers included), runs of words from the app's sample texts
    starting at random places, each grown a word at a time until it reaches a length drawn for it."""
    from attention_explorer.explorer.experiments import sample

    words = " ".join(sample.ENGLISH).split()
    draw = random.Random(seed)
    found = []
    for _ in range(n):
        want, start = draw.randint(SHORTEST, LONGEST), draw.randrange(len(words))
        stream = words[start:] + words[:start]
        end = 1
        while len(loaded.tokenizer.encode(" ".join(stream[:end]), 10_000)) < want:
            end += 1
        found.append(" ".join(stream[:end]))
    return found


def measure(key: str, n: int, repeats: int = REPEATS, batch_size: int = 32) -> dict:
    """In this process: our run's memory growth first, then `repeats` timed pairs, ours and transformers' back to
    back, alternating which goes first."""
    import torch

    from attention_explorer.explorer.run import corpus, corpus_input, memo
    from attention_explorer.explorer.run.reference_view import folder_of
    from attention_explorer.models import registry
    from attention_explorer.models.pretrained import minilm_folder
    from attention_explorer.models.reference import load_reference, run_reference
    from bench.memory import reset_peak, rss_mb

    loaded = registry.load(key)
    start = time.perf_counter()
    prepared = corpus_input.prepare(loaded, corpus_input.from_texts(texts_of(loaded, n)), LONGEST)
    tokenized = time.perf_counter() - start
    lengths = [len(e) for e in prepared.encodings]
    corpus.run(loaded, corpus_input.prepare(loaded, corpus_input.from_texts(["A short warm-up text."])))
    memo.release_memory()
    before = rss_mb()
    reset_peak()
    corpus.run(loaded, prepared, batch_size)
    growth = rss_mb("VmHWM") - before

    reference = load_reference(folder_of(key) or minilm_folder())
    batches = corpus.batches(prepared, batch_size, corpus.reading_stack(loaded).layers[0].self_attn.n_heads)
    inputs = []
    for batch in batches:
        ids, lengths_b = corpus.padded(batch)
        mask = (torch.arange(ids.size(1))[None] < lengths_b[:, None]).long()
        inputs.append((ids, mask))

    def ours() -> None:
        corpus.run(loaded, prepared, batch_size)

    def theirs() -> None:
        for ids, mask in inputs:
            run_reference(reference, ids, mask, hidden_states=False, logits=False, attentions=True)

    ours(), theirs()  # warm-up
    mine, others = [], []
    for i in range(repeats):
        for fn in (ours, theirs) if i % 2 == 0 else (theirs, ours):
            began = time.perf_counter()
            fn()
            (mine if fn is ours else others).append(time.perf_counter() - began)
    ratio = statistics.median(a / b for a, b in zip(mine, others, strict=True))
    return {
        "model": key,
        "texts": len(prepared.encodings),
        "tokens": sum(lengths),
        "shortest": min(lengths),
        "longest": max(lengths),
        "batch_size": batch_size,
        "batches": len(batches),
        "repeats": repeats,
        "tokenize_s": round(tokenized, 3),
        "ours_s": round(statistics.median(mine), 3),
        "transformers_s": round(statistics.median(others), 3),
        "ratio": round(ratio, 3),
        "growth_mb": round(growth, 1),
        "estimate_s": round(corpus.corpus_cost(loaded, prepared, batch_size).seconds, 2),
        "estimate_mb": round(corpus.corpus_cost(loaded, prepared, batch_size).bytes / 2**20, 1),
    }


def run(runs=RUNS, repeats: int = REPEATS, batch_size: int = 32) -> list[dict]:
    """Each model in its own process (python -m bench.corpus KEY N REPEATS BATCH)."""
    rows = []
    for key, n in runs:
        command = [sys.executable, "-m", "bench.corpus", key, str(n), str(repeats), str(batch_size)]
        found = subprocess.run(command, capture_output=True, text=True, check=True)
        rows.append(json.loads(found.stdout.strip().splitlines()[-1]))
    return rows


def table(rows: list[dict]) -> str:
    """ours / transformers (target: at most TARGET_RATIO) and our run's resident memory growth (under 300 MB)."""
    lines = [
        f"{'model':8} {'texts':>5} {'tokens':>6} {'batch':>5} {'ours s':>7} {'hf s':>7} {'ratio':>6} {'growth MB':>9} "
        f"{'est s':>6} {'est MB':>6}"
    ]
    for r in rows:
        lines.append(
            f"{r['model']:8} {r['texts']:5} {r['tokens']:6} {r['batch_size']:5} {r['ours_s']:7.2f} "
            f"{r['transformers_s']:7.2f} {r['ratio']:6.3f} {r['growth_mb']:9.1f} {r['estimate_s']:6.1f} "
            f"{r['estimate_mb']:6.1f}"
        )
    ok = all(r["ratio"] <= TARGET_RATIO for r in rows) and all(r["growth_mb"] < TARGET_GROWTH_MB for r in rows)
    lines.append(f"targets (ratio <= {TARGET_RATIO}, growth < {TARGET_GROWTH_MB} MB): {'met' if ok else 'NOT met'}")
    return "\n".join(lines)


if __name__ == "__main__":  # one model: python -m bench.corpus KEY TEXTS [REPEATS] [BATCH]
    argv = sys.argv[1:]
    print(json.dumps(measure(argv[0], int(argv[1]), *(int(a) for a in argv[2:4]))))
