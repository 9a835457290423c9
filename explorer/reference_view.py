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
    """The reference's attention weights on the same token ids: (L, H, T, T) (its hidden states are not asked for:
    the page shows none)."""
    ids = torch.tensor([loaded.tokenizer.encode(text, max_tokens).ids])
    return torch.stack([a[0] for a in run_reference(reference, ids, hidden_states=False).attentions]).numpy()


def max_abs_difference(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per head, the largest |ours - reference| over every query and key: (L, H, T, T) x 2 -> (L, H).
    Subtracted in float32, the precision both models compute in: each difference is exact to within half a float32
    step of itself (a relative 6e-8), and 0 exactly where the two weights are the same number; a float64 pass over
    every weight (0.3-0.7 s at 512 tokens) would change no digit that is shown or checked against the 1e-5 bound."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes differ: ours {ours.shape}, reference {theirs.shape}")
    ours, theirs = np.asarray(ours, np.float32), np.asarray(theirs, np.float32)
    return np.abs(ours - theirs).max(axis=(-2, -1)).astype(np.float64)


def compare(
    reference, loaded: LoadedModel, text: str, max_tokens: int, ours: np.ndarray, layer: int, head: int
) -> tuple[np.ndarray, np.ndarray]:
    """One reference run: (max |ours - reference| per head (L, H), the reference's weights of one head (T, T)), the
    head copied out so that the rest of the reference's attention can be freed."""
    theirs = attention(reference, loaded, text, max_tokens)
    return max_abs_difference(ours, theirs), theirs[layer, head].copy()
