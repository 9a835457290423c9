"""Our attention beside the `transformers` reference's, for the pretrained model: the numbers that show the
from-scratch implementation is exact."""

from __future__ import annotations

import numpy as np
import torch

from models.pretrained import minilm_folder
from models.reference import load_reference, run_reference
from models.registry import LoadedModel

REFERENCE_MODELS = ("minilm",)  # models with a transformers twin loaded from the same local files


def load() -> object:
    """transformers' BertModel over the same all-MiniLM-L6-v2 files our model reads."""
    return load_reference(minilm_folder())


def attention(reference, loaded: LoadedModel, text: str, max_tokens: int) -> np.ndarray:
    """The reference's attention weights on the same token ids: (L, H, T, T)."""
    ids = torch.tensor([loaded.tokenizer.encode(text, max_tokens).ids])
    return torch.stack([a[0] for a in run_reference(reference, ids).attentions]).numpy()


def max_abs_difference(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per head, the largest |ours - reference| over every query and key: (L, H, T, T) x 2 -> (L, H)."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes differ: ours {ours.shape}, reference {theirs.shape}")
    return np.abs(ours.astype(np.float64) - theirs.astype(np.float64)).max(axis=(-2, -1))
