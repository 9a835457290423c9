"""What the parity tests of today's families (Gemma 3, Qwen3, Mistral) share: every difference from transformers'
eager forward within a bound derived from the computation, and the window seen in the weights."""

from __future__ import annotations

import numpy as np
import torch

from attention_explorer.models.transformer import Transformer
from tests import tolerance
from tests.parity import assert_parity, differences

PARITY_BAR = 1e-5  # the project's bar with transformers (issue #40): no difference above it, logits included


def assert_close_to_transformers(model: Transformer, reference, ids: torch.Tensor) -> dict[str, float]:
    """assert_parity (every attention weight and hidden state within 1e-5, the same next token everywhere), and every
    difference, the logits' too, within both the parity bar and the bound a float32 forward's reordered sums allow
    (tests.tolerance: the chain of sums behind one logit, relative to the largest logit): the largest differences."""
    assert_parity(model, reference, ids)
    found = differences(model, reference, ids)
    with torch.inference_mode():
        logits = model(ids).logits
    chain = tolerance.forward_terms(model.config, ids.size(1))
    bound = min(PARITY_BAR, float(tolerance.probable(chain, float(logits.abs().max()))))
    assert max(found.values()) <= bound, (found, bound)
    return found


def assert_window_seen(model: Transformer, ids: torch.Tensor) -> None:
    """Each local layer puts no weight on a key at or before i - w, and each of its rows past the window sums to 1 over
    its last w keys; a global layer's late rows do reach back past the window."""
    with torch.inference_mode():
        out = model(ids)
    length = ids.size(1)
    for i, layer in enumerate(out.decoder.layers):
        weights = layer.self_attn.weights[0].numpy()  # (H, T, T)
        window = model.decoder.layers[i].self_attn.window
        queries, keys = np.arange(length)[:, None], np.arange(length)[None, :]
        if window is None:
            assert weights[:, -1, : length - model.config.sliding_window].sum() > 0
            continue
        assert length > window, "the text must be longer than the window"
        outside = keys <= queries - window
        assert outside.any() and (weights[:, outside] == 0).all()
        assert (layer.self_attn.mask[0, 0].numpy() == ((keys <= queries) & ~outside)).all()
