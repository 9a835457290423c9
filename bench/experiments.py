"""`python -m bench.experiments [--repeats 3] [--json]`: every head turned off alone
(explorer.experiments.ablate.effects, one batch row per head) on each model's example, timed in this process
against one clean forward of the same model on the same input, and against the naive loop (one forward per head).

Printed per model: its tokens (source / decoder rows), heads, the best of `repeats` seconds for one clean forward,
for effects (all heads, batched) and for the naive loop, with the ratios effects / forward and loop / effects. The
targets: every head of a toy model within 1 s, the paper's base model (random weights) at 32 tokens within 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# the paper-random case: an English sentence cut to 32 tokens (MiniLM's WordPiece: [CLS] ... [SEP])
LONG_SENTENCE = (
    "The agreement on the European Economic Area was signed in August 1992 by the twelve member states of the "
    "European Community and the seven countries of the European Free Trade Association, after long negotiations."
)
CASES = (  # (model key, text or None for its example, max tokens or None, target seconds for every head)
    ("translate", None, None, 1.0),
    ("reverse", None, None, 1.0),
    ("induction", None, None, 1.0),
    ("paper-random", LONG_SENTENCE, 32, 10.0),
)


def _best(fn, repeats: int) -> float:
    """The fastest of `repeats` timed calls (after one untimed warm-up), in seconds."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run(repeats: int = 3, loop: bool = True) -> list[dict]:
    import torch

    from attention_explorer.explorer.experiments import ablate, lens
    from attention_explorer.explorer.run import trace
    from attention_explorer.models import ablation, registry

    rows = []
    for key, text, max_tokens, target in CASES:
        loaded = registry.load(key)
        answer = ablate.answer(loaded, trace.run(loaded, text or loaded.example, max_tokens))
        shapes = ablate.model_shapes(loaded)
        _, heads = ablation.each_head(shapes)

        @torch.inference_mode()
        def forward(loaded=loaded, answer=answer):
            return lens.run_on(loaded, answer)  # one clean forward, every internal kept, as effects' rows are

        def batched(loaded=loaded, answer=answer):
            return ablate.effects(loaded, answer)

        @torch.inference_mode()
        def naive(loaded=loaded, answer=answer, heads=heads, shapes=shapes):
            for head in heads:  # one forward per head: what the batched rows replace
                lens.run_on(loaded, answer, ablation.heads_off([head], shapes))

        one = _best(forward, repeats)
        every = _best(batched, repeats)
        each = _best(naive, max(1, repeats // 3)) if loop else float("nan")
        rows.append(
            {
                "model": key,
                "source_tokens": len(answer.source_ids),
                "decoder_rows": len(answer.decoder_input or ()),
                "heads": len(heads),
                "forward_s": round(one, 4),
                "effects_s": round(every, 4),
                "effects_per_forward": round(every / one, 1),
                "loop_s": round(each, 4),
                "loop_per_effects": round(each / every, 2),
                "target_s": target,
                "within_target": every <= target,
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        f"{'model':<13} {'tokens':>7} {'heads':>5} {'forward s':>10} {'effects s':>10} {'x forward':>9} "
        f"{'loop s':>8} {'loop/eff':>8} {'target s':>8}  ok"
    ]
    for r in rows:
        tokens = f"{r['source_tokens']}/{r['decoder_rows']}"
        lines.append(
            f"{r['model']:<13} {tokens:>7} {r['heads']:>5} {r['forward_s']:>10.4f} {r['effects_s']:>10.4f} "
            f"{r['effects_per_forward']:>9.1f} {r['loop_s']:>8.3f} {r['loop_per_effects']:>8.2f} "
            f"{r['target_s']:>8.1f}  {'yes' if r['within_target'] else 'NO'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-loop", action="store_true", help="skip the naive one-forward-per-head loop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.repeats, not args.no_loop)
    print(json.dumps(rows) if args.json else table(rows))
    return 0 if all(r["within_target"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
