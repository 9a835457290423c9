"""One head, or the mean over a layer's heads: the choice every head picker offers, its weights and its name."""

from __future__ import annotations

import numpy as np

MEAN = -1  # the head pickers' "mean over heads" choice (never a head's index)
MEAN_NAME = "mean over heads"


def head_or_mean(weights: np.ndarray, layer: int, head: int) -> np.ndarray:
    """(L, H, ...) -> the chosen head's (...), or the layer's mean over its heads."""
    return weights[layer].mean(axis=0) if head == MEAN else weights[layer, head]


def head_title(layer: int, head: int, n_heads: int) -> str:
    """'layer 3, head 2' or 'layer 3, mean over 12 heads' (numbered from 1, as the app shows them)."""
    return f"layer {layer + 1}, " + (f"mean over {n_heads} heads" if head == MEAN else f"head {head + 1}")
