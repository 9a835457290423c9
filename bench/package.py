"""The package's doors, timed (python -m bench package): the console command's export against `python -m explorer
export` in a new process each (import time included; target within 1.2x), `import attention_explorer` in a new warm
process (target under 2 s), and the notebook API's second `ae.run` in one process (the loaded model reused; target
under 1 s at 16 tokens)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from bench.harness import ROOT

# 16 MiniLM tokens with its two marks
TEXT = "The quick brown fox jumps over the lazy dog while the cat sleeps nearby"


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-2000:])
    return time.perf_counter() - start


def run(repeats: int = 5) -> dict:
    """Medians over interleaved repeats (the machine is noisy: each pair runs back to back)."""
    import attention_explorer as ae

    ae.run  # noqa: B018 -- the API imported before torch, as a notebook's `ae.run(...)` imports it
    from attention_explorer.models import registry

    tokens = len(registry.load("minilm").tokenizer.encode(TEXT, 512).ids)
    export = ["export", "--model", "minilm", "--text", TEXT]
    ours, theirs, imports = [], [], []
    _wall([sys.executable, "-m", "attention_explorer", *export])  # warm the file cache for both
    for _ in range(repeats):
        ours.append(_wall([sys.executable, "-m", "attention_explorer", *export]))
        theirs.append(_wall([sys.executable, "-m", "explorer", *export]))
        imports.append(_wall([sys.executable, "-c", "import attention_explorer"]))
    runs = []
    for model in ("minilm", "smollm2"):
        first = time.perf_counter()
        ae.run(model, TEXT)
        first = time.perf_counter() - first
        again = []
        for _ in range(repeats):
            start = time.perf_counter()
            ae.run(model, TEXT)
            again.append(time.perf_counter() - start)
        runs.append({"model": model, "first_s": first, "again_s": statistics.median(again)})
    return {
        "tokens": tokens,
        "export_console_s": statistics.median(ours),
        "export_module_s": statistics.median(theirs),
        "export_ratio": statistics.median(o / t for o, t in zip(ours, theirs, strict=True)),
        "import_s": statistics.median(imports),
        "api": runs,
    }


def table(found: dict) -> str:
    lines = [
        f"export, MiniLM at {found['tokens']} tokens, a new process each: attention-explorer "
        f"{found['export_console_s']:.2f} s, python -m explorer {found['export_module_s']:.2f} s, "
        f"ratio {found['export_ratio']:.2f}x (target at most 1.2x)",
        f"import attention_explorer in a new process: {found['import_s']:.2f} s (target under 2 s)",
    ]
    for r in found["api"]:
        lines.append(
            f"ae.run({r['model']!r}, ...) at about {found['tokens']} tokens: first {r['first_s']:.2f} s (the model "
            f"loads), again {r['again_s']:.3f} s (target under 1 s)"
        )
    return "\n".join(lines)
