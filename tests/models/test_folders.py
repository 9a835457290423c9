"""tests/folders.py builds a tiny folder of every family the engine reads: adding a family to models/families without
its builder fails here, and each builder's folder loads through its own family's converter."""

from __future__ import annotations

import json

import pytest

from attention_explorer.models.pretrained import FAMILIES, load_path
from attention_explorer.models.reference import load_reference
from tests.folders import BUILDERS


def test_every_family_has_a_tiny_folder_builder():
    assert set(BUILDERS) == set(FAMILIES)


@pytest.mark.parametrize("model_type", sorted(BUILDERS))
def test_each_builder_writes_its_familys_folder(tmp_path, model_type):
    folder = BUILDERS[model_type](tmp_path / model_type)
    assert json.loads((folder / "config.json").read_text()).get("model_type", "bert") == model_type
    model, tokenizer, family = load_path(folder)
    assert family.name == FAMILIES[model_type].family(model.config, tokenizer).name
    assert type(load_reference(folder)).__name__ == FAMILIES[model_type].REFERENCE_CLASS
    assert tokenizer.vocab_size == model.config.vocab_size
