"""Word level and attention flow of a run's recomputed layers: on a device other than the CPU, each layer is merged
into words (device_reducers.merge_words) or reduced to its residual-mixed (T, T) (device_reducers.residual_mixed)
there, and only that comes back, never the (H, T, T) layer. Here the CPU stands for such a device
(device_layers.HOST emptied) and every copy back (device_layers.host) is counted, as in test_device_heads.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import analysis, device_layers, device_reducers, trace
from attention_explorer.models import registry
from tests import tolerance
from tests.device_copies import count_copies

TEXT = "Unbelievably, the extraordinarily tokenized sentence reconsiders its misunderstandings."


@pytest.fixture(scope="module")
def gpt2(gpt2_folder):
    (spec,) = registry.folder_specs(f"gpt2-words={gpt2_folder}")
    return registry.build(spec)


@pytest.fixture
def copied(monkeypatch) -> list[tuple[int, ...]]:
    """The shapes copied back from the (stand-in) device, in order."""
    return count_copies(monkeypatch)


def test_word_level_of_recomputed_layers_is_merged_on_the_device(gpt2, copied, monkeypatch):
    result = trace.run(gpt2, TEXT, keep_all=False)
    attention = result.attention("decoder_self")
    weights, queries, keys = analysis.at_word_level(result, "decoder_self")
    query_groups, key_groups = analysis.groups_for(result, "decoder_self")
    assert max(len(g) for g in key_groups) > 1  # some word is more than one token: the merge does something
    words = [weights[i] for i in range(attention.n_layers)]
    n_words = (len(query_groups), len(key_groups))
    assert copied == [(attention.n_heads, *n_words)] * attention.n_layers  # the words' map, never (H, T, T)
    assert not any(attention.ready(i) for i in range(attention.n_layers))  # no layer copied whole nor cached
    assert (len(queries), len(keys)) == n_words
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    expected = [analysis.merge_words(attention.layer(i).weights, query_groups, key_groups) for i in range(len(words))]
    pieces = max(len(g) for g in key_groups) + max(len(g) for g in query_groups)
    for found, want in zip(words, expected, strict=True):
        assert found.dtype == want.dtype == np.float32 and found.shape == want.shape
        # float32 sums of the same weights over a word's pieces in another order, then one division each
        bound = tolerance.reordered(pieces, want) + tolerance.EPS32 * np.abs(want)
        tolerance.assert_within(found, want, bound, "words merged on the device")


def test_the_device_merge_refuses_groups_that_are_not_a_partition():
    with pytest.raises(ValueError, match="once each"):
        device_reducers.merge_words(torch.ones(1, 3, 3), [[0], [1, 2]], [[0, 1], [1, 2]])


def test_attention_flow_reads_each_layer_reduced_on_the_device(gpt2, copied, monkeypatch):
    """cached.get_flow's work: each layer reduced to its residual-mixed (T, T) where it was made (the max-flow is
    scipy's, on the CPU), only (T, T) a layer copied back; the flows equal analysis.flow of the whole layers."""
    result = trace.run(gpt2, TEXT, keep_all=False)
    attention = result.attention("decoder_self")
    through = attention.n_layers - 1
    mixed = attention.reduced(analysis.residual_mixed, device_reducers.residual_mixed, range(through))
    (length, _) = attention.mask.shape
    assert copied == [(length, length)] * through and not any(attention.ready(i) for i in range(attention.n_layers))
    flows = analysis.flow_of(mixed)
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    heads = np.stack([attention.layer(i).weights for i in range(through)])
    want_mixed = [analysis.residual_mixed(layer) for layer in heads]
    for found, want in zip(mixed, want_mixed, strict=True):
        assert found.dtype == np.float64
        # float64 means over heads in another order (H terms), then the row sums (T terms) and one division
        bound = tolerance.reordered64(attention.n_heads + length, want) + tolerance.EPS64 * np.abs(want)
        tolerance.assert_within(found, want, bound, "residual-mixed on the device")
    # each capacity rounds to a unit of 1 / FLOW_SCALE: a capacity a last bit apart may round one unit apart, and a
    # max-flow is a min cut's capacity, whose edges are at most all the graph's (L T^2)
    expected = analysis.flow(heads)
    edges = through * length * length
    tolerance.assert_within(flows, expected, np.full_like(expected, edges / analysis.FLOW_SCALE), "flow")


def test_the_aggregation_page_reads_its_raw_map_and_rollout_reduced_on_the_device(gpt2, copied, monkeypatch):
    """The Rollout and flow page's raw map (one layer's mean over heads) and a short text's rollout (each layer's
    residual-mixed map, multiplied on the CPU): only (T, T) a layer copied back; equal to the whole layers' numbers."""
    result = trace.run(gpt2, TEXT, keep_all=False)
    attention = result.attention("decoder_self")
    last = attention.n_layers - 1
    raw = attention.reduced(lambda heads: heads.mean(axis=0), lambda heads: heads.mean(0), [last])[0]
    mixed = attention.reduced(analysis.residual_mixed, device_reducers.residual_mixed, range(last + 1))
    (length, _) = attention.mask.shape
    assert copied == [(length, length)] * (attention.n_layers + 1)
    assert not any(attention.ready(i) for i in range(attention.n_layers))
    rolled = analysis.rollout_of(mixed)
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    heads = np.stack([attention.layer(i).weights for i in range(attention.n_layers)])
    want_raw = heads[last].mean(axis=0)
    # float32 sums of the same H non-negative weights in another order (H eps their sum), then one division each
    bound = tolerance.reordered(attention.n_heads, want_raw) + tolerance.EPS32 * np.abs(want_raw)
    tolerance.assert_within(raw, want_raw, bound, "raw mean of heads")
    want = analysis.rollout(heads)
    # each layer's mixed map is row-stochastic, its entries off by at most (H + T) eps64 of their row's sum (1) from
    # the means and the renormalisation; a product of row-stochastic maps passes a factor's error on at most whole
    # (its rows sum to 1) and adds T eps64 of its own: L layers, each (H + 2T) eps64
    layers = attention.n_layers
    bound = np.full_like(want, layers * (attention.n_heads + 2 * length) * tolerance.EPS64)
    tolerance.assert_within(rolled, want, bound, "rollout from reduced layers")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_random_layers_merged_and_mixed_on_the_gpu_equal_numpys():
    rng = np.random.default_rng(3)
    weights = rng.random((4, 50, 50)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    groups = analysis.word_groups([i // 3 for i in range(50)])  # words of three pieces (the last of two)
    on_gpu = torch.from_numpy(weights).to("cuda")
    want = analysis.merge_words(weights, groups, groups)
    found = device_reducers.merge_words(on_gpu, groups, groups).cpu().numpy()
    bound = tolerance.reordered(6, want) + tolerance.EPS32 * np.abs(want)
    tolerance.assert_within(found, want, bound, "words merged on the GPU")
    want = analysis.residual_mixed(weights)
    found = device_reducers.residual_mixed(on_gpu).cpu().numpy()
    bound = tolerance.reordered64(4 + 50, want) + tolerance.EPS64 * np.abs(want)
    tolerance.assert_within(found, want, bound, "residual-mixed on the GPU")
