"""The benchmarks' model folders: built once into a cache folder, offered to the registry and to processes started
after, as the app's EXPLORER_MODEL_FOLDERS offers any folder (a tiny shape here; the bench's own is GPT-2 small)."""

from __future__ import annotations

import json
import os

import pytest

from attention_explorer.models import registry
from bench import folders
from bench.inputs import text_of

TINY = dict(n_embd=32, n_head=2, n_layer=1, n_positions=32, vocab_size=500)


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    monkeypatch.setattr(folders, "SHAPES", {"tiny": TINY})
    monkeypatch.setattr(folders, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(registry, "MODELS", registry.MODELS)  # use() replaces it: put back afterwards
    monkeypatch.setenv(registry.FOLDERS_ENV, "mine=/a/b")  # use() sets the variable: put back afterwards
    return tmp_path / "cache" / "tiny"


def test_only_bench_folders_are_named_and_built(tiny):
    assert folders.names(["smollm2", "folder:tiny", "folder:mine", "tiny"]) == ["tiny"]
    assert folders.environment(["minilm", "folder:mine"]) == {}
    assert not tiny.exists()


def test_a_bench_folder_is_offered_beside_the_folders_already_named(tiny):
    env = folders.use(["minilm", "folder:tiny"])
    assert env == {registry.FOLDERS_ENV: f"mine=/a/b;tiny={tiny}"}
    assert os.environ[registry.FOLDERS_ENV] == env[registry.FOLDERS_ENV]  # for the processes started after
    assert {"folder:mine", "folder:tiny"} <= set(registry.MODELS)
    loaded = registry.load("folder:tiny")
    assert (loaded.max_tokens, loaded.tokenizer.vocab_size, loaded.model.config.d_model) == (32, 500, 32)
    assert len(loaded.tokenizer.encode(text_of(loaded, 32), 32).ids) == 32
    assert folders.use(["folder:tiny"]) == env  # named once, however often it is asked for


def test_a_folder_is_built_once_and_again_only_for_another_shape(tiny, monkeypatch):
    weights = folders.folder("tiny") / "model.safetensors"
    built = weights.stat().st_mtime_ns
    assert folders.folder("tiny") == tiny and weights.stat().st_mtime_ns == built
    monkeypatch.setattr(folders, "SHAPES", {"tiny": TINY | {"n_layer": 2}})
    assert json.loads((folders.folder("tiny") / "config.json").read_text())["n_layer"] == 2
    assert [p.name for p in tiny.parent.iterdir()] == ["tiny"]  # no half-built folder left beside it
