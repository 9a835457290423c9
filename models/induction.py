"""Induction heads (Olsson et al. 2022, "In-context Learning and Induction Heads"): per-head scores read off any
model's attention weights, and the repeated random sequences they are measured on.

An induction head completes [A][B] ... [A] -> [B]: at the second [A] it attends to the [B] that followed the first
one (and its output copies [B]). It needs a previous-token head in an earlier layer, which writes "the token before
me was [A]" into [B]'s position so that the second [A] can find it. Both scores take token ids, not words, so they
work on every model's trace (the toy task's words, GPT-2's byte-level BPE tokens).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attention_explorer.models.transformer import Transformer


def repeated_sequence(pool: int | Sequence[int], length: int, seed: int = 0, start: Sequence[int] = ()) -> list[int]:
    """`start`, then `length` distinct token ids drawn from `pool` (range(pool) when it is a size), then the same
    ids again: every token of the repeat has exactly one earlier occurrence."""
    ids = range(pool) if isinstance(pool, int) else list(pool)
    if length > len(ids):
        raise ValueError(f"cannot draw {length} distinct tokens from a pool of {len(ids)}")
    half = random.Random(seed).sample(ids, length)
    return [*start, *half, *half]


Ids = Int[np.ndarray, " T"] | Int[Tensor, " T"] | Sequence[int]
Weights = Float[np.ndarray, "L H T T"] | Float[Tensor, "L H T T"]


def _numpy(x: Tensor | np.ndarray | Sequence) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def induction_targets(ids: Ids) -> Bool[np.ndarray, "T T"]:
    """(query i, key k): True where k = j + 1 for some earlier j < i holding the same token as i: the keys an
    induction head at i attends to (the tokens that followed earlier copies of token i)."""
    ids = _numpy(ids)
    n = len(ids)
    earlier = (ids[:, None] == ids[None, :]) & np.tri(n, k=-1, dtype=bool)  # (T, T): [i, j] j < i, same token
    targets = np.zeros((n, n), dtype=bool)
    targets[:, 1:] = earlier[:, :-1]  # key j + 1 <= i, so the causal mask never hides it
    return targets


def induction_scores(weights: Weights, ids: Ids) -> Float[np.ndarray, "L H"]:
    """Per head, the attention weight a query puts on the token after the earlier occurrence(s) of its own token
    (summed over them, if the token occurred more than once), averaged over the queries whose token occurred
    before; NaN when no token repeats. 1 is a perfect induction head; a head that spreads evenly scores about 1/i."""
    weights = _numpy(weights)
    targets = induction_targets(ids)  # (T, T)
    if weights.shape[-2:] != targets.shape:
        raise ValueError(f"weights over {weights.shape[-2:]} positions, ids of {len(targets)} tokens")
    queries = targets.any(axis=1)  # (T,)
    if not queries.any():
        return np.full(weights.shape[:2], np.nan)
    on_targets = (weights * targets).sum(axis=-1)  # (L, H, T)
    return on_targets[..., queries].mean(axis=-1)


def previous_token_scores(weights: Weights) -> Float[np.ndarray, "L H"]:
    """Per head, the mean weight a query i puts on key i - 1, over queries 1..T-1 (the first has no previous
    token). 1 is a perfect previous-token head."""
    weights = _numpy(weights)
    if weights.shape[-1] < 2:
        return np.full(weights.shape[:2], np.nan)
    return np.diagonal(weights, offset=-1, axis1=-2, axis2=-1).mean(axis=-1)  # (L, H)


@torch.inference_mode()
def model_scores(
    model: Transformer, texts: Sequence[Sequence[int]]
) -> tuple[Float[np.ndarray, "L H"], Float[np.ndarray, "L H"]]:
    """A decoder-only model's (induction, previous-token) scores per head, averaged over token-id texts (each
    scored on its own attention, so texts of different lengths need no padding)."""
    if model.encoder is not None or model.decoder is None:
        raise ValueError("model_scores is for decoder-only models")
    induction, previous = [], []
    for ids in texts:
        out = model(torch.tensor([list(ids)], device=next(model.parameters()).device))
        assert out.decoder is not None
        weights = torch.stack([layer.self_attn.weights[0] for layer in out.decoder.layers])  # (L, H, T, T)
        induction.append(induction_scores(weights, ids))
        previous.append(previous_token_scores(weights))
    return np.nanmean(induction, axis=0), np.mean(previous, axis=0)
