"""Model folders the benchmarks build here once and offer to the app as "folder:<name>" (EXPLORER_MODEL_FOLDERS): a
GPT-2-small-sized folder with random weights, for issue 31's long texts at 1,024 tokens."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from attention_explorer.models import registry
from bench.harness import ROOT

CACHE = ROOT / "artifacts" / "bench-folders"  # artifacts/ is ignored by git: the folders are built, never committed
# name -> make_gpt2_folder's settings. gpt2-small: GPT-2 small's shape and vocabulary (124M parameters, tied output;
# 500 MB of float32 safetensors), random weights, read with tests/folders.py's tiny BPE padded to 50,257 tokens
SHAPES = {"gpt2-small": dict(n_embd=768, n_head=12, n_layer=12, n_positions=1024, vocab_size=50257)}
PREFIX = "folder:"


def _built(path: Path, settings: dict) -> bool:
    """Whether `path` holds a whole folder of these settings (a build is renamed into place only once finished)."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    files = ("model.safetensors", "tokenizer.json")
    return all(config.get(k) == v for k, v in settings.items()) and all((path / f).is_file() for f in files)


def folder(name: str) -> Path:
    """The bench folder `name` (a SHAPES key) in CACHE, built on first use (GPT-2 small: 8 s, 500 MB), then reused."""
    from tests.folders import make_gpt2_folder  # the tests' builder: transformers' own GPT2LMHeadModel, saved

    settings = SHAPES[name]
    path = CACHE / name
    if _built(path, settings):
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    # built beside it, then renamed: an interrupted build never leaves a folder that looks finished
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{name}-") as building:
        made = make_gpt2_folder(Path(building) / name, **settings)
        shutil.rmtree(path, ignore_errors=True)  # an older shape's folder
        made.rename(path)
    return path


def names(models: Iterable[str]) -> list[str]:
    """The bench folders among registry keys ("folder:gpt2-small" -> "gpt2-small"); other keys are passed over."""
    return [key.removeprefix(PREFIX) for key in models if key.startswith(PREFIX) and key.removeprefix(PREFIX) in SHAPES]


def environment(models: Iterable[str]) -> dict[str, str]:
    """EXPLORER_MODEL_FOLDERS naming the folders the environment already names and the bench folders among `models`
    (each built if need be); {} when `models` has none."""
    wanted = names(models)
    if not wanted:
        return {}
    named = os.environ.get(registry.FOLDERS_ENV, "")
    known = {spec.key for spec in registry.folder_specs(named)}
    entries = [named, *(f"{name}={folder(name)}" for name in wanted if PREFIX + name not in known)]
    return {registry.FOLDERS_ENV: ";".join(e for e in entries if e)}


def use(models: Iterable[str]) -> dict[str, str]:
    """Offer the bench folders among `models` in this process (the registry's catalogue read again) and in every
    process it starts (the server of harness.app_server, a fresh interpreter); returns the variables set."""
    env = environment(models)
    if env:
        os.environ.update(env)
        registry.MODELS = registry.catalogue()
    return env
