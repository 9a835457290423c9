"""Figure builders: the data drawn is the data given, and token labels are escaped."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures.heatmap import head_heatmap
from tests.figdata import array


def test_heatmap_draws_the_weights_with_distinct_repeated_tokens():
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=3).astype(np.float32)
    fig = head_heatmap(weights, ["the", "cat", "the"], ["a", "the", "the", "."], "Layer 1, head 2").to_dict()
    heat = fig["data"][0]
    np.testing.assert_array_equal(array(heat["z"]), weights)
    assert list(heat["y"]) == ["0: the", "1: cat", "2: the"]  # one category per position: the two "the" stay apart
    assert list(fig["layout"]["yaxis"]["ticktext"]) == ["the", "cat", "the"]
    assert list(fig["layout"]["xaxis"]["ticktext"]) == ["a", "the", "the", "."]
    assert (heat["zmin"], heat["zmax"]) == (0, 1)


def test_hostile_tokens_are_escaped_in_ticks_and_hover():
    tokens = ["<b>", "<img src=x onerror=alert(1)>", "&amp;"]
    fig = head_heatmap(np.eye(3, dtype=np.float32), tokens, tokens).to_dict()
    ticks = list(fig["layout"]["xaxis"]["ticktext"])
    assert ticks == ["&lt;b&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&amp;amp;"]
    assert list(fig["data"][0]["x"]) == ["0: &lt;b&gt;", "1: &lt;img src=x onerror=alert(1)&gt;", "2: &amp;amp;"]
    assert all("<" not in t for t in ticks)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="do not match"):
        head_heatmap(np.zeros((2, 3)), ["a", "b"], ["a", "b"])
