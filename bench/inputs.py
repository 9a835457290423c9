"""The sentence every benchmark runs, cut to an exact number of tokens."""

from __future__ import annotations

import torch

from attention_explorer.models.registry import LoadedModel

TEXT = "The animal didn't cross the street because it was too tired, so it lay down under a tree. "


def text_of(loaded: LoadedModel, tokens: int) -> str:
    """A text that tokenizes to exactly `tokens` tokens ([CLS] and [SEP], or <eos>, included) once cut to that
    length. A toy model reads only its task's words: its examples, one after another, as often as needed."""
    if loaded.task is not None:
        words = " ".join(loaded.task.examples).split()
        text = " ".join(words * (tokens // len(words) + 1))
    else:
        # ~22 tokens a repeat (SmolLM2 at 2,048 tokens: 11,700 characters; the sidebar takes state.MAX_TEXT, 100,000)
        text = TEXT * (tokens // 16 + 2)
    assert len(loaded.tokenizer.encode(text, tokens)) == tokens
    return text


def lengths_for(max_tokens: int, lengths) -> tuple[int, ...]:
    """The lengths a model is run at: each asked-for length, a length past the model's maximum as that maximum."""
    return tuple(sorted({min(n, max_tokens) for n in lengths}))


def ids_of(loaded: LoadedModel, tokens: int) -> torch.Tensor:
    """(1, tokens) ids of that text."""
    return torch.tensor([loaded.tokenizer.encode(text_of(loaded, tokens), tokens).ids])
