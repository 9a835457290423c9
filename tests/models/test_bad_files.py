"""Missing, truncated, corrupt and mismatched model files each give one clear message naming the problem."""

from __future__ import annotations

import pytest

from attention_explorer.models import registry, train
from attention_explorer.models.pretrained import ModelFolderError, load_bert_folder
from tests.badfiles import bert_folder, checkpoint_folder


@pytest.mark.parametrize(
    ("problem", "named"),
    [
        ("truncated", "cannot read model.safetensors"),
        ("no-tokenizer", "cannot read the tokenizer"),
        ("wrong-layers", "does not fit the BERT encoder"),
        ("wrong-vocab", "does not fit"),
        ("bad-json", "config.json"),
    ],
)
def test_a_broken_model_folder_is_named(tmp_path, problem, named):
    folder = bert_folder(tmp_path / problem, problem)
    with pytest.raises((ModelFolderError, ValueError), match=named):
        load_bert_folder(folder)


@pytest.mark.parametrize(
    ("problem", "named"),
    [
        ("truncated", "cannot load reverse.safetensors"),
        ("garbage", "cannot load reverse.safetensors"),
        ("wrong-shape", "cannot load reverse.safetensors"),
        ("bad-json", "cannot read reverse.json"),
    ],
)
def test_a_broken_checkpoint_is_named(tmp_path, problem, named):
    folder = checkpoint_folder(tmp_path / problem, "reverse", problem)
    with pytest.raises(train.CheckpointError, match=named):
        train.load("reverse", folder)


def test_the_registry_turns_every_file_problem_into_one_error(tmp_path, monkeypatch):
    folders = f"mine={bert_folder(tmp_path / 'mine', 'truncated')}; gone={tmp_path / 'nowhere'}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: folders}))
    with pytest.raises(registry.ModelLoadError, match=r"mine \(local folder\) could not be loaded: cannot read model"):
        registry.load("folder:mine")
    with pytest.raises(registry.ModelLoadError, match="no model folder at"):
        registry.load("folder:gone")


def test_a_good_local_folder_loads_like_the_shipped_model(tmp_path, monkeypatch, minilm):
    folders = f"copy={bert_folder(tmp_path / 'copy', 'none')}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: folders}))
    loaded = registry.load("folder:copy")
    ids = minilm.tokenizer.encode("a copy of the weights", 32).ids
    assert loaded.tokenizer.encode("a copy of the weights", 32).ids == ids
    assert loaded.title == "copy (local folder)"
