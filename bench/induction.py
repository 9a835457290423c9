"""`python -m bench.induction [--steps 800] [--every 50]`: the Train page's run of the induction task, timed in
this process as the page runs it (explorer.experiments.training.Run: every training step and every snapshot), with
the step where the induction head forms.

Printed per snapshot: seconds so far, the loss (mean of the last 20 steps), and the highest induction score in
layer 2 and previous-token score in layer 1 on the probe text. The head "forms" at the first snapshot whose
highest induction score reaches 0.5. The target of issue 21: the whole run within 5 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run(steps: int, every: int) -> dict:
    import numpy as np

    from attention_explorer.explorer.experiments.training import Run
    from attention_explorer.models import tasks

    task = tasks.get("induction")
    started = time.perf_counter()
    training = Run("induction", steps, every, task.example)
    rows = []
    while not training.finished:
        training.advance(every)
        snapshot = training.snapshots[-1]
        induction, previous = snapshot.scores
        losses = [p.loss for p in training.trainer.history[-20:]]
        rows.append(
            {
                "step": training.step,
                "seconds": round(time.perf_counter() - started, 1),
                "loss": round(float(np.mean(losses)), 3),
                "induction_layer2": round(float(np.nanmax(induction[-1])), 3),
                "previous_layer1": round(float(np.nanmax(previous[0])), 3),
            }
        )
    formed = next((row["step"] for row in rows if row["induction_layer2"] >= 0.5), None)
    return {"steps": steps, "seconds": rows[-1]["seconds"], "formed_at": formed, "snapshots": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.induction", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.steps, args.every)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'step':>5} {'seconds':>8} {'loss':>7} {'induction L2':>13} {'previous L1':>12}")
    for row in result["snapshots"]:
        print(
            f"{row['step']:>5} {row['seconds']:>8} {row['loss']:>7} {row['induction_layer2']:>13} "
            f"{row['previous_layer1']:>12}"
        )
    print(f"{result['steps']} steps in {result['seconds']} s; the induction head formed at step {result['formed_at']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
