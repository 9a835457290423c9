"""The single-head views at real-model lengths, in headless Chromium: seconds to drawn and MB sent per page, and
screenshots. Models with real models' layer x head shapes and small widths are built here (random weights, tiny BPE),
so that 1,024 and 2,048 tokens fit in memory; `--models smollm2` measures the real one.

`python -m bench.long_views [--models gpt2-shape llama-shape ...] [--lengths N ...] [--only PAGE ...] [--out DIR]`"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from attention_explorer.models import registry
from bench import harness, shots

PAGES = ("attention", "model_view", "head_view", "qkv", "query_key_value", "scores")
LENGTHS = (1024, 2048)


def shaped_folders(root: Path) -> dict[str, Path]:
    """GPT-2 small's 12 layers x 12 heads at 1,024 positions; SmolLM2's 9 query heads sharing 3 key/value heads at
    2,048 positions (4 layers of its 30: what a page draws is one layer or head, and four keep the run in memory)."""
    from tests.folders import make_gpt2_folder, make_llama_folder

    return {
        "gpt2-shape": make_gpt2_folder(root / "gpt2-shape", n_embd=96, n_head=12, n_layer=12, n_positions=1024),
        "llama-shape": make_llama_folder(
            root / "llama-shape", hidden_size=72, heads=9, kv_heads=3, layers=4, positions=2048
        ),
    }


def run(out: Path, models: tuple[str, ...], lengths=LENGTHS, only: tuple[str, ...] = PAGES) -> list[str]:
    """bench.shots on these pages, with the shaped folders offered to the server (a registry key is used as is)."""
    with tempfile.TemporaryDirectory() as folder:
        folders = shaped_folders(Path(folder))
        env = {registry.FOLDERS_ENV: ";".join(f"{name}={path}" for name, path in folders.items())}
        catalogue = registry.catalogue(env)
        keys = [name if name in registry.MODELS else f"folder:{name}" for name in models]  # a folder's catalogue key

        def load(key: str):
            return registry.load(key) if key in registry.MODELS else registry.build(catalogue[key])

        return shots.run(out, keys, lengths, only, env=env, load=load)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.ROOT / "artifacts" / "long_views")
    parser.add_argument("--models", nargs="+", default=("gpt2-shape", "llama-shape"))
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS)
    parser.add_argument("--only", nargs="+", default=PAGES)
    args = parser.parse_args()
    run(args.out, tuple(args.models), tuple(args.lengths), tuple(args.only))
