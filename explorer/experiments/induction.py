"""Induction heads on any model: a head's induction score on a repeated random sequence of the model's own tokens
(models.induction scores it), for when the sidebar's sentence repeats no token (no streamlit here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.models import induction
from attention_explorer.models.registry import LoadedModel

REPEAT_LENGTH = 20  # tokens in each half of the random sequence
SEED = 0


@dataclass(frozen=True)
class Repeat:
    """A repeated random sequence and every head's scores on it, for the self-attention that reads the text."""

    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    weights: np.ndarray  # (L, H, T, T)
    induction: np.ndarray  # (L, H)
    previous: np.ndarray  # (L, H)


def _frame(loaded: LoadedModel) -> tuple[list[int], list[int]]:
    """The marker tokens the tokenizer puts (before, after) every text: [CLS] / [SEP], <bos>, or none (GPT-2)."""
    encoding = loaded.tokenizer.encode(loaded.example, loaded.max_tokens)
    words = [w is not None for w in encoding.word_ids]
    first = words.index(True) if True in words else 0
    last = len(words) - words[::-1].index(True) if True in words else len(words)
    return list(encoding.ids[:first]), list(encoding.ids[last:])


def _pool(loaded: LoadedModel) -> list[int]:
    """Token ids a text can hold: the vocabulary without the tokenizer's markers and bracketed placeholders."""
    specials = set(loaded.family.specials)
    vocabulary = loaded.tokenizer
    found = []
    for i in range(vocabulary.vocab_size):
        token = vocabulary.id_to_token(i)
        if token in specials or (token.startswith(("[", "<")) and token.endswith(("]", ">"))):
            continue
        found.append(i)
    return found


@torch.inference_mode()
def random_repeat(loaded: LoadedModel, length: int = REPEAT_LENGTH, seed: int = SEED) -> Repeat:
    """The model's own markers around `length` distinct random tokens drawn twice in a row, run through the stack
    that reads the text (an encoder's self-attention, or a decoder-only model's masked self-attention)."""
    before, after = _frame(loaded)
    pool = _pool(loaded)
    length = min(length, len(pool), (loaded.max_tokens - len(before) - len(after)) // 2)
    ids = [*induction.repeated_sequence(pool, length, seed, before), *after]
    model = loaded.model
    stack = (
        model.encoder(torch.tensor([ids], device=loaded.device), None)
        if model.encoder is not None
        else model(torch.tensor([ids], device=loaded.device), logits=False).decoder
    )
    assert stack is not None
    weights = torch.stack([layer.self_attn.weights[0] for layer in stack.layers]).cpu().numpy()  # (L, H, T, T)
    tokens = tuple(loaded.tokenizer.id_to_token(i) for i in ids)
    return Repeat(
        tokens, tuple(ids), weights, induction.induction_scores(weights, ids), induction.previous_token_scores(weights)
    )
