"""The app's catalogue, built from specs without changing anything at import, and the seeded random builder."""

from __future__ import annotations

import torch

from attention_explorer.models import registry, tasks
from attention_explorer.models.config import TOY
from attention_explorer.models.tokenize import WordPieceTokenizer


def test_the_catalogue_is_the_built_in_models_then_the_environments_folders():
    assert list(registry.catalogue({})) == [
        "minilm",
        "smollm2",
        "gemma3",
        "minilm-random",
        "paper-random",
        "translate",
        "reverse",
        "induction",
    ]
    found = registry.catalogue({registry.FOLDERS_ENV: " mine = /a/b ; ;other=/c"})
    assert list(found)[-2:] == ["folder:mine", "folder:other"]
    mine = found["folder:mine"]
    assert (mine.title, mine.weights, mine.source) == ("mine (local folder)", "folder", "/a/b")
    assert "folder:mine" not in registry.catalogue({})  # nothing is left behind between calls


def test_seeded_weights_repeat_and_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b = registry.seeded(TOY), registry.seeded(TOY)
    assert torch.rand(1) == before
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert a.config.dropout == 0.0 and not a.training and not any(p.requires_grad for p in a.parameters())


def test_both_tokenizers_are_tokenizers(minilm):
    assert isinstance(minilm.tokenizer, WordPieceTokenizer) and isinstance(minilm.tokenizer, registry.Tokenizer)
    assert isinstance(tasks.get("reverse").source, registry.Tokenizer)
