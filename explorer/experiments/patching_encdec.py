"""Activation patching on an encoder-decoder (no streamlit; explorer.experiments.patching dispatches here): the clean
and the corrupted text are two sources; the decoder reads the same target in both runs, the clean run's greedy output
up to the first word where the two runs' outputs differ, and the measure is the logit difference at its last row.

The residual stream patched is the encoder's (the corruption is in the source): the state entering encoder layer l
(l = 0: after the embedding; l = L: the encoder's last layer, before its final norm) at one source position. Heads
are every head of every attention kind: the encoder's self-attention, the decoder's masked self-attention and the
cross-attention. The encoder reads in both directions, so no position is the same in both runs past the first layer:
every patched run is a whole forward (one batch row each), the toy models' few layers and tokens make that quick.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor

from attention_explorer.models import greedy
from attention_explorer.models.attention import HeadPatch, raw_scores_dropped
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import padding_mask

MODULES = {"decoder_self": "self_attn", "cross": "cross_attn"}  # a decoder layer's attention module, by kind


def target_row(loaded: LoadedModel, clean_ids: Sequence[int], corrupt_ids: Sequence[int]):
    """(the decoder's input: <bos> and the clean run's greedy output up to the first word where the two runs'
    outputs differ, the clean output's word there, the corrupted one's): when the outputs agree, the input runs to
    the clean output's last word and both words are the clean one's."""
    model = loaded.model
    budget = min(len(clean_ids) + 2, model.config.max_len - 1)
    written = [
        greedy.greedy_decode(
            model, torch.tensor([list(ids)], device=loaded.device), loaded.bos_id, loaded.eos_id, budget
        )
        for ids in (clean_ids, corrupt_ids)
    ]
    clean, corrupt = written
    for row, (a, b) in enumerate(zip(clean, corrupt, strict=False)):
        if a != b:
            return (loaded.bos_id, *clean[:row]), a, b
    return (loaded.bos_id, *clean[:-1]), clean[-1], clean[-1]


def _ids(loaded: LoadedModel, ids: Sequence[int], target: Sequence[int]) -> tuple[Tensor, Tensor]:
    """(src (1, S), tgt (1, T)) on the model's device."""
    return (torch.tensor([list(ids)], device=loaded.device), torch.tensor([list(target)], device=loaded.device))


def _layers(loaded: LoadedModel, src: Tensor, tgt: Tensor, patch_at=None, keep_weights=None):
    """A whole forward, layer by layer by the layers' own forward (as Transformer.forward runs them): the encoder
    states entering each layer, every head's output by kind, the decoder's last state before the final norm.
    `patch_at(stack, index, x)` -> (x, patches) lets a caller overwrite the state entering a layer (index L: the
    stack's output) and give the layer's head patches; `keep_weights` (kind, layer) also keeps those weights."""
    model = loaded.model
    assert model.encoder is not None and model.decoder is not None
    mask = padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    x = model.encoder.embeddings(src)  # (B, S, D)
    states, heads, kept = [], {"encoder_self": [], "decoder_self": [], "cross": []}, None
    with raw_scores_dropped():
        for index, layer in enumerate([*model.encoder.layers, None]):
            x, patches = patch_at("encoder", index, x) if patch_at else (x, None)
            states.append(x)
            if layer is None:
                break
            internals = layer(x, mask, patches)
            heads["encoder_self"].append(internals.self_attn.heads)
            if keep_weights == ("encoder_self", index):
                kept = internals.self_attn.weights
            x = internals.after_ffn
        memory = model.encoder.final_norm(x) if model.encoder.final_norm is not None else x
        y = model.decoder.embeddings(tgt).expand(src.size(0), -1, -1)  # (B, T, D)
        self_mask = model.decoder_mask(tgt)
        for index, layer in enumerate(model.decoder.layers):
            _, patches = patch_at("decoder", index, y) if patch_at else (y, None)
            internals = layer(y, memory, self_mask, mask, patches)
            for kind, name in MODULES.items():
                heads[kind].append(getattr(internals, name).heads)
                if keep_weights == (kind, index):
                    kept = getattr(internals, name).weights
            y = internals.after_ffn
    return SimpleNamespace(states=states, heads=heads, last=y[:, -1], weights=kept)


def tensors(loaded: LoadedModel, ids: Sequence[int], target: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
    """(the encoder's states (L + 1, S, D), each kind's heads as one dict of (L, H, T, Dh), the last decoder state
    (1, D)) of one source's run."""
    found = _layers(loaded, *_ids(loaded, ids, target))
    heads = {kind: torch.stack([h[0] for h in found.heads[kind]]) for kind in found.heads}
    return torch.stack([s[0] for s in found.states]), heads, found.last


@torch.inference_mode()
def patched_last(loaded: LoadedModel, setup, clean, corrupt, patches: Sequence) -> Tensor:
    """(B, D) the decoder's last state in each patched run, one batch row a patch: the encoder state entering a layer
    at one position, or one head's output (at every position, or at one) copied from the clean run."""
    config = loaded.model.config
    n = len(patches)
    src = torch.tensor([list(setup.corrupt_ids)], device=loaded.device).expand(n, -1)  # (B, S)
    tgt = torch.tensor([list(setup.decoder_input)], device=loaded.device)  # (1, T)

    def patch_at(stack: str, index: int, x: Tensor):
        if stack == "encoder":
            rows = [r for r, p in enumerate(patches) if p.head is None and p.layer == index]
            if rows:
                x = x.clone()
                for r in rows:
                    x[r, patches[r].position] = clean.states[index, patches[r].position]
        kinds = ("encoder_self",) if stack == "encoder" else tuple(MODULES)
        found = {}
        for kind in kinds:
            rows = [r for r, p in enumerate(patches) if p.head is not None and p.kind == kind and p.layer == index]
            if rows:
                tokens = clean.heads[kind].size(2)
                off = torch.zeros(n, config.n_heads, tokens, dtype=torch.bool, device=src.device)  # (B, H, T)
                for r in rows:
                    position = patches[r].position
                    off[r, patches[r].head, slice(None) if position is None else position] = True
                found["self_attn" if kind == "encoder_self" else MODULES[kind]] = HeadPatch(
                    off, clean.heads[kind][index]
                )
        return x, found or None

    return _layers(loaded, src, tgt, patch_at).last


@torch.inference_mode()
def weights(loaded: LoadedModel, ids: Sequence[int], target: Sequence[int], kind: str, layer: int) -> np.ndarray:
    """(H, Tq, Tk) one layer's attention weights of one kind in one source's run, the decoder reading `target`."""
    found = _layers(loaded, *_ids(loaded, ids, target), keep_weights=(kind, layer))
    return found.weights[0].cpu().numpy()
