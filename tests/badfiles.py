"""Broken model files made from good ones, each with one thing wrong."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from attention_explorer.models import train
from attention_explorer.models.pretrained import minilm_folder

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def bert_folder(path: Path, problem: str) -> Path:
    """A copy of the MiniLM folder (weights linked, not copied) with `problem`: truncated, no-tokenizer,
    wrong-layers, wrong-vocab, bad-json."""
    source = minilm_folder()
    path.mkdir(parents=True)
    for name in ("config.json", *TOKENIZER_FILES):
        shutil.copy(source / name, path / name)
    weights = source / "model.safetensors"
    if problem == "truncated":
        (path / "model.safetensors").write_bytes(weights.read_bytes()[: weights.stat().st_size // 3])
    else:
        (path / "model.safetensors").symlink_to(weights)
    config = json.loads((path / "config.json").read_text())
    if problem == "no-tokenizer":
        for name in TOKENIZER_FILES:
            (path / name).unlink()
    elif problem == "wrong-layers":
        config["num_hidden_layers"] = 7
    elif problem == "wrong-vocab":
        config["vocab_size"] = 1000
    elif problem == "bad-json":
        (path / "config.json").write_text('{"hidden_size": 384,')
        return path
    (path / "config.json").write_text(json.dumps(config))
    return path


def checkpoint_folder(path: Path, task: str, problem: str) -> Path:
    """A copy of a shipped toy checkpoint with `problem`: truncated, garbage, bad-json, wrong-shape."""
    path.mkdir(parents=True)
    weights, meta = train.checkpoint_paths(task)
    new_weights, new_meta = train.checkpoint_paths(task, path)
    data = weights.read_bytes()
    new_weights.write_bytes(
        data[: len(data) // 2] if problem == "truncated" else b"\x00" * 64 if problem == "garbage" else data
    )
    record = json.loads(meta.read_text())
    if problem == "wrong-shape":
        record["config"]["d_ff"] += 8
    new_meta.write_text('{"task": ' if problem == "bad-json" else json.dumps(record))
    return path
