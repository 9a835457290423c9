"""A run of a model with local layers (a tiny Gemma 3 folder) carries what the views draw: each layer's window
(AttentionTrace.windows), its own mask (mask_of: the causal mask narrowed to the window, exactly where the weights are
zero), the scores' own scale, and q and k before QK-norm."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests.folders import make_gemma3_folder


def test_a_run_carries_each_layers_window_and_mask(tmp_path):
    folder = make_gemma3_folder(tmp_path / "gemma3", window=5, layers=3, pattern=3, query_pre_attn_scalar=24)
    loaded = registry.from_path(folder, "gemma3")
    found = trace.run(loaded, "the cat sat on the mat because it was tired and the dog sat", 64).decoder_self
    n = found.mask.shape[0]
    assert n > 5 and found.windows == (5, 5, None)
    queries, keys = np.arange(n)[:, None], np.arange(n)[None, :]
    for i, window in enumerate(found.windows):
        layer, mask = found.layer(i), found.mask_of(i)
        expected = (keys <= queries) & (keys > queries - window) if window else keys <= queries
        np.testing.assert_array_equal(mask, expected)
        assert (layer.weights[:, ~mask] == 0).all() and (layer.weights[:, mask] > 0).all()
        assert layer.window == window and layer.scaling == 24**-0.5
        np.testing.assert_array_equal(layer.scaled_scores, layer.raw_scores * np.float32(24**-0.5))
        assert layer.q_before_norm.shape == layer.q.shape and layer.k_before_norm.shape == layer.k.shape
