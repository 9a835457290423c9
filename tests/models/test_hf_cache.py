"""Models already in the local Hugging Face cache are offered as "hf:org/name", found by reading folders only (never
downloading), with anything incomplete or foreign in the cache passed over."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from attention_explorer.models import hf_cache, registry
from attention_explorer.models.pretrained import minilm_folder
from tests.folders import make_gpt2_folder

BUILT_IN = [spec.key for spec in registry.BUILT_IN]


def cached_repo(cache: Path, repo: str, files: Path, revision: str = "0" * 40, main: bool = True) -> Path:
    """The hub cache's layout: models--org--name/blobs/<file>, snapshots/<revision>/<file> -> blobs, refs/main."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir(exist_ok=True)
    for source in files.iterdir():
        if source.is_file():
            blob = root / "blobs" / f"{revision[:8]}-{source.name}"
            blob.write_bytes(source.read_bytes())
            (snapshot / source.name).symlink_to(os.path.relpath(blob, snapshot))
    if main:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory) -> Path:
    return make_gpt2_folder(tmp_path_factory.mktemp("files") / "gpt2")


def test_the_cache_folder_is_found_as_huggingface_hub_finds_it(tmp_path):
    from huggingface_hub import constants

    assert hf_cache.hf_cache_dir(os.environ) == Path(constants.HF_HUB_CACHE)
    assert hf_cache.hf_cache_dir({"HF_HUB_CACHE": str(tmp_path), "HF_HOME": "/elsewhere"}) == tmp_path
    assert hf_cache.hf_cache_dir({"HF_HOME": str(tmp_path)}) == tmp_path / "hub"
    assert hf_cache.hf_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "huggingface" / "hub"
    assert hf_cache.hf_cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "huggingface" / "hub"
    assert hf_cache.hf_cache_dir({}) is None


def test_cached_models_of_known_families_are_offered_and_load(tmp_path, gpt2_files, monkeypatch):
    cache = tmp_path / "hub"
    snapshot = cached_repo(cache, "openai-community/gpt2", gpt2_files)
    cached_repo(cache, "tiny-gpt2", gpt2_files)  # a repo without an organisation
    cached_repo(cache, "sentence-transformers/all-MiniLM-L6-v2", minilm_folder())
    environ = {"HF_HUB_CACHE": str(cache), registry.FOLDERS_ENV: f"mine={gpt2_files}"}
    found = registry.catalogue(environ)
    hf = ["hf:openai-community/gpt2", "hf:sentence-transformers/all-MiniLM-L6-v2", "hf:tiny-gpt2"]
    assert list(found) == [*BUILT_IN, *hf, "folder:mine"]
    spec = found["hf:openai-community/gpt2"]
    assert (spec.title, spec.weights, spec.source) == (
        "openai-community/gpt2 (Hugging Face cache)",
        "folder",
        str(snapshot),
    )
    assert "nothing is downloaded" in spec.description
    monkeypatch.setattr(registry, "MODELS", found)
    loaded = registry.load("hf:openai-community/gpt2")
    mine = registry.load("folder:mine")
    assert loaded.family.kinds == ("decoder_self",) and loaded.family.origin == "from a folder"  # random weights here
    ids = torch.tensor([loaded.tokenizer.encode("the cat sat on the mat", 64).ids])
    torch.testing.assert_close(loaded.model(ids).logits, mine.model(ids).logits, atol=0, rtol=0)
    assert registry.load("hf:sentence-transformers/all-MiniLM-L6-v2").family.kinds == ("encoder_self",)


def test_anything_incomplete_or_foreign_in_the_cache_is_passed_over(tmp_path, gpt2_files):
    cache = tmp_path / "hub"
    good = cached_repo(cache, "org/good", gpt2_files)

    def broken(repo: str, change) -> None:
        change(cached_repo(cache, repo, gpt2_files))

    def config(text: str | bytes):
        def write(snapshot: Path) -> None:
            (snapshot / "config.json").unlink()
            data = text if isinstance(text, bytes) else text.encode()
            (snapshot / "config.json").write_bytes(data)

        return write

    hf_config = json.loads((gpt2_files / "config.json").read_text())
    broken("org/falcon", config(json.dumps({**hf_config, "model_type": "falcon"})))
    broken("org/no-type", config(json.dumps({k: v for k, v in hf_config.items() if k != "model_type"})))
    broken("org/not-json", config('{"model_type": "gpt2",'))
    broken("org/binary", config(b"\xff\xfe\x00garbage"))
    broken("org/a-list", config("[1, 2]"))
    broken("org/no-config", lambda s: (s / "config.json").unlink())
    broken("org/no-tokenizer", lambda s: (s / "tokenizer.json").unlink())
    broken("org/half-downloaded", lambda s: (s / "model.safetensors").resolve().unlink())  # a dangling link
    broken("org/sharded", lambda s: (s / "model.safetensors").rename(s / "model-00001-of-00002.safetensors"))
    (cache / "models--org--no-snapshots").mkdir()
    (cache / "models--org--a-file").write_text("not a folder")
    (cache / "datasets--org--data" / "snapshots" / "x").mkdir(parents=True)
    (cache / ".locks").mkdir()
    (cache / "version.txt").write_text("1")
    specs = registry.hf_cache_specs({"HF_HUB_CACHE": str(cache)})
    assert [(s.key, s.source) for s in specs] == [("hf:org/good", str(good))]
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(tmp_path / "nowhere")}) == ()
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(good / "config.json")}) == ()  # a file, not a folder
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(cache), hf_cache.HF_CACHE_ENV: "0"}) == ()


def test_the_snapshot_main_names_is_chosen_else_the_newest_whole_one(tmp_path, gpt2_files):
    cache = tmp_path / "hub"
    older = cached_repo(cache, "org/model", gpt2_files, revision="a" * 40)
    newer = cached_repo(cache, "org/model", gpt2_files, revision="b" * 40, main=False)
    os.utime(older, (1_000_000, 1_000_000))
    (cache / "models--org--model" / "refs" / "main").write_text("a" * 40)
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(cache)})[0].source == str(older)
    (cache / "models--org--model" / "refs" / "main").write_text("c" * 40)  # names a snapshot that is not there
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(cache)})[0].source == str(newer)
    (newer / "tokenizer.json").unlink()  # the newest is incomplete: the older whole one is offered
    assert registry.hf_cache_specs({"HF_HUB_CACHE": str(cache)})[0].source == str(older)
