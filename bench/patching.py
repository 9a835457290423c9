"""`python -m bench patching [--repeats 3] [--json]`: activation patching of every head of SmolLM2
(explorer.experiments.patching: one batch row per head, each from its own layer up, over the changed window) on a
20-token name-swap text, timed in this process against one clean forward of the same text, and against the naive
way (one whole forward of the corrupted text per head, a head's output overwritten: timed for one layer's heads and
scaled to all).

Two corruptions: the name swap in the second clause (the first change at position 15 of 20) and a change of the
first name (position 1: the window is almost the whole text, the slowest case). The target: every head at 20 tokens
within 10 s.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CLEAN = "When Mary and John went to the little store on a warm sunny afternoon, John gave a drink to"
CASES = (  # (name, corrupted text, right answer, wrong answer)
    (
        "name swap (late change)",
        "When Mary and John went to the little store on a warm sunny afternoon, Mary gave a drink to",
        "Mary",
        "John",
    ),
    (
        "first name changed (early change)",
        "When Anna and John went to the little store on a warm sunny afternoon, John gave a drink to",
        "Mary",
        "Anna",
    ),
)
TARGET_SECONDS = 10.0


def run(repeats: int = 3) -> list[dict]:
    import torch

    from attention_explorer.explorer.experiments import patching
    from attention_explorer.models import registry
    from attention_explorer.models.ablation import Ablation
    from bench.experiments import _best

    loaded = registry.load("smollm2")
    config = loaded.model.config
    rows = []
    for name, corrupt, answer, wrong in CASES:
        setup = patching.setup(loaded, CLEAN, corrupt, answer, wrong, 512)
        clean, corrupted = (patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
        heads = patching.head_patches(loaded)
        ids = torch.tensor([setup.clean_ids])

        def forward(ids=ids):
            with torch.inference_mode():
                loaded.model(ids)

        def every_head(setup=setup, clean=clean, corrupted=corrupted, heads=heads):
            patching.measure(loaded, setup, clean, corrupted, heads)

        def one_layer_naive(setup=setup, clean=clean):
            tokens = len(setup.clean_ids)
            with torch.inference_mode():
                for head in range(config.n_heads):
                    off = torch.zeros(1, config.n_decoder_layers, config.n_heads, dtype=torch.bool)
                    off[0, 0, head] = True
                    ablation = Ablation({"decoder_self": off}, {"decoder_self": clean.heads["decoder_self"]}, 1)
                    loaded.model(torch.tensor([setup.corrupt_ids]), ablation=ablation)
            return tokens

        seconds = _best(every_head, repeats)
        one = _best(forward, repeats)
        naive = _best(one_layer_naive, 1) * config.n_decoder_layers
        rows.append(
            {
                "case": name,
                "tokens": len(setup.clean_ids),
                "first_change": setup.start,
                "heads": len(heads),
                "every_head_s": round(seconds, 3),
                "forward_s": round(one, 4),
                "ratio_to_forward": round(seconds / one, 1),
                "naive_s": round(naive, 2),
                "naive_over_ours": round(naive / seconds, 1),
                "target_s": TARGET_SECONDS,
                "met": seconds <= TARGET_SECONDS,
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "case | tokens | first change | heads | every head (s) | one forward (s) | ratio | naive (s) | naive/ours | "
        "target"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']} | {r['tokens']} | {r['first_change']} | {r['heads']} | {r['every_head_s']} | "
            f"{r['forward_s']} | {r['ratio_to_forward']}x | {r['naive_s']} | {r['naive_over_ours']}x | "
            f"<= {r['target_s']} s: {'met' if r['met'] else 'MISSED'}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.patching")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = run(args.repeats)
    print(json.dumps(found) if args.json else table(found))
