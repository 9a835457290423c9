"""The dequantized cache stays under its bound: the least recently used folders go first, a model bigger than the
bound is not kept, clear() empties it, and nothing but the cache's own folders is ever touched."""

from __future__ import annotations

import os

import pytest

from attention_explorer.models import cache
from attention_explorer.models.pretrained import load_path
from tests.folders import make_llama_folder
from tests.gguf_file import write_gguf

SMALL = dict(hidden_size=64, heads=4, kv_heads=2, intermediate=96, layers=1)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Three different tiny GGUF files (three seeds) and an empty cache of the test's own."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return [
        write_gguf(make_llama_folder(tmp_path / f"m{seed}", seed=seed, **SMALL), tmp_path / f"m{seed}.gguf")
        for seed in range(3)
    ]


def names() -> list[str]:
    return sorted(p.name.rpartition("-")[0] for p in cache.entries())


def test_the_least_recently_used_folder_goes_when_a_new_one_would_pass_the_bound(files, monkeypatch):
    load_path(files[0])
    (one,) = cache.entries()
    size = sum(f.stat().st_size for f in one.iterdir())
    monkeypatch.setenv(cache.MAX_GB_ENV, str(2.5 * size / 1e9))  # room for two
    load_path(files[1])
    past = one.stat().st_mtime - 100
    os.utime(cache.entries()[-1], (past, past))  # m1 written long ago ...
    load_path(files[0])  # ... and m0 read from the cache just now: m1 is the least recently used
    assert names() == ["m0", "m1"]
    load_path(files[2])
    assert names() == ["m0", "m2"]
    assert sum(f.stat().st_size for p in cache.entries() for f in p.iterdir()) <= cache.max_bytes()


def test_a_model_bigger_than_the_bound_loads_and_is_not_kept(files, monkeypatch):
    load_path(files[0])
    monkeypatch.setenv(cache.MAX_GB_ENV, "0")
    model, _, _ = load_path(files[1])
    assert model.config.d_model == 64
    assert names() == ["m0"]  # nothing removed for a folder that would never fit
    assert not [p for p in cache.root().iterdir() if p.name.startswith(".")]  # and no half-written one left


def test_clear_removes_the_caches_folders_only(files):
    for path in files[:2]:
        load_path(path)
    mine = cache.root() / "notes-0123456789abcdef"  # named like a cache folder, but not one (no model.safetensors)
    mine.mkdir()
    (cache.root() / "readme.txt").write_text("kept")
    freed = cache.clear()
    assert freed > 2 * 64 * 400 * 4  # two embeddings of float32 at least
    assert cache.entries() == [] and mine.is_dir() and (cache.root() / "readme.txt").is_file()
    model, _, _ = load_path(files[0])  # read from the file again
    assert names() == ["m0"]


@pytest.mark.parametrize(("value", "expected"), [("0.5", 5 * 10**8), ("0", 0), ("many", None), ("-1", None)])
def test_the_bound_is_read_from_the_environment(value, expected):
    default = int(cache.DEFAULT_MAX_GB * 1e9)
    assert cache.max_bytes({cache.MAX_GB_ENV: value}) == (default if expected is None else expected)
    assert cache.max_bytes({}) == default
