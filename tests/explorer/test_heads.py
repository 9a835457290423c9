"""One head or the mean over a layer's heads: the weights and the name every head picker shows."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.run.heads import MEAN, head_or_mean, head_title


def test_a_head_is_its_own_slice_and_the_mean_averages_the_layers_heads():
    weights = np.random.default_rng(0).random((3, 4, 5, 6))
    np.testing.assert_array_equal(head_or_mean(weights, 1, 2), weights[1, 2])
    np.testing.assert_array_equal(head_or_mean(weights, 2, MEAN), weights[2].mean(axis=0))
    assert head_or_mean(weights, 0, MEAN).shape == (5, 6)


def test_titles_count_from_one():
    assert head_title(0, 2, 12) == "layer 1, head 3"
    assert head_title(4, MEAN, 12) == "layer 5, mean over 12 heads"
