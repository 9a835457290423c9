"""Our attention beside the `transformers` reference's, for a model read from pretrained files (the shipped MiniLM, a
local folder, a Hugging Face cache snapshot): the numbers that show the from-scratch implementation is exact."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attention_explorer.models import registry
from attention_explorer.models.device import model_device
from attention_explorer.models.gguf import package_gguf
from attention_explorer.models.pretrained import minilm_folder
from attention_explorer.models.reference import each_attention, load_reference, reference_class, run_reference
from attention_explorer.models.registry import LoadedModel


def folder_of(key: str) -> str | None:
    """The folder (or GGUF file) a registry model's weights are read from ("" = the shipped MiniLM), from which
    transformers reads the same folder; None for a model with none (random weights, toy tasks, models trained here)."""
    spec = registry.MODELS.get(key)
    if spec is not None and spec.weights == "gguf":
        return str(package_gguf(spec.source))
    return spec.source if spec is not None and spec.weights == "folder" else None


def load(folder: str = "") -> object:
    """transformers' model over the same files our model reads ("" = all-MiniLM-L6-v2's): BertModel,
    GPT2LMHeadModel or LlamaForCausalLM, by the folder's model_type."""
    return load_reference(folder or minilm_folder())


def class_name(folder: str = "") -> str:
    """The transformers class that reads the folder ("BertModel", "GPT2LMHeadModel", "LlamaForCausalLM")."""
    return reference_class(folder or minilm_folder())


def _ids(reference, loaded: LoadedModel, text: str, max_tokens: int) -> torch.Tensor:
    """(1, T) the text's token ids where the reference's weights are (the page runs both models on one device)."""
    return torch.tensor([loaded.tokenizer.encode(text, max_tokens).ids], device=model_device(reference))


def attention(reference, loaded: LoadedModel, text: str, max_tokens: int) -> np.ndarray:
    """The reference's attention weights on the same token ids: (L, H, T, T) (neither its hidden states nor its
    logits are asked for: the page shows none)."""
    ids = _ids(reference, loaded, text, max_tokens)
    ran = run_reference(reference, ids, hidden_states=False, logits=False)
    return torch.stack([a[0] for a in ran.attentions]).cpu().numpy()


def max_abs_difference(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per head, the largest |ours - reference| over every query and key: (..., H, T, T) x 2 -> (..., H).
    Subtracted in float32, the precision both models compute in: each difference is exact to within half a float32
    step of itself (a relative 6e-8), and 0 exactly where the two weights are the same number; a float64 pass over
    every weight (0.3-0.7 s at 512 tokens) would change no digit that is shown or checked against the 1e-5 bound."""
    if ours.shape != theirs.shape:
        raise ValueError(f"shapes differ: ours {ours.shape}, reference {theirs.shape}")
    ours, theirs = np.asarray(ours, np.float32), np.asarray(theirs, np.float32)
    return np.abs(ours - theirs).max(axis=(-2, -1)).astype(np.float64)


def compare(
    reference,
    loaded: LoadedModel,
    text: str,
    max_tokens: int,
    ours,
    layer: int,
    head: int,
    every: bool = True,
    step: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray | None, np.ndarray]:
    """One reference run, a layer at a time: (max |ours - reference| per head (L, H), or None when not `every`; the
    reference's weights of one head (T, T)). Each of the reference's layers is set against ours (`ours[i]`: a kept
    array, or a long text's layer recomputed) as it finishes and let go, so neither model's every head is ever held
    at once; without `every` the reference stops after `layer`. `step(done, total)` after each layer."""
    ids = _ids(reference, loaded, text, max_tokens)
    n_layers, n_heads = ours.shape[:2]
    last = n_layers - 1 if every else layer
    differences = np.zeros((n_layers, n_heads)) if every else None
    found: list[np.ndarray] = []

    def read(i: int, weights: torch.Tensor) -> bool:  # weights (1, H, T, T)
        theirs = weights[0].cpu().numpy()
        if differences is not None:
            differences[i] = max_abs_difference(ours[i], theirs)
        if i == layer:
            found.append(theirs[head].copy())
        if step is not None:
            step(i + 1, last + 1)
        return i >= last

    each_attention(reference, ids, read)
    return differences, found[0]
