"""A long text's layer read for one head (attention.weights[layer, head], as the pages draw a head): on a device other
than the CPU, recomputed there and only that head copied back (explorer.run.device_layers.head). Here the CPU is
made to stand for such a device (device_layers.HOST emptied) and every copy back (device_layers.host) is counted."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import blocks, device_layers, device_reducers, trace
from attention_explorer.models import registry
from tests import tolerance
from tests.device_copies import count_copies


@pytest.fixture(scope="module")
def gpt2(gpt2_folder):
    (spec,) = registry.folder_specs(f"gpt2-heads={gpt2_folder}")
    return registry.build(spec)


def test_one_head_of_a_recomputed_layer_is_the_only_copy_back(gpt2, monkeypatch):
    result = trace.run(gpt2, gpt2.examples[0], keep_all=False)
    attention = result.attention("decoder_self")
    assert attention.source.kept is None and not attention.ready(1)  # the layer must be recomputed
    tq, tk = attention.mask.shape
    copied = count_copies(monkeypatch)
    head = attention.weights[1, 2]
    q = attention.q[1, -1]  # a head counted from the end
    assert copied == [(tq, tk), (tq, attention.d_head)]  # one head each, never (H, Tq, Tk)
    assert not attention.ready(1)  # the whole layer was neither copied nor cached
    np.testing.assert_array_equal(attention.weights[1, 2], head)  # the head is cached: read again, no copy
    assert len(copied) == 2
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    whole = attention.layer(1)  # the whole layer, recomputed and copied back as before
    # the same operations on the same numbers: the same bits
    np.testing.assert_array_equal(head, whole.weights[2])
    np.testing.assert_array_equal(q, whole.q[-1])
    with pytest.raises(IndexError):
        attention.weights[1, attention.n_heads]


def test_a_layer_at_hand_gives_its_head_without_recomputing(gpt2, monkeypatch):
    result = trace.run(gpt2, gpt2.examples[0], keep_all=False)
    attention = result.attention("decoder_self")
    whole = attention.layer(0)  # recomputed and cached whole
    monkeypatch.setattr(device_layers, "HOST", ())

    def no_copy(tensor):
        raise AssertionError("a layer at hand is not recomputed")

    monkeypatch.setattr(device_layers, "host", no_copy)
    assert attention.weights[0, 1] is not None
    np.testing.assert_array_equal(attention.weights[0, 1], whole.weights[1])


def test_the_model_views_thumbnails_of_recomputed_layers_are_reduced_before_the_copy_back(gpt2, monkeypatch):
    """The model view without the run's thumbnails (cached.get_thumbnails): each layer recomputed on the device and
    reduced there (device_reducers.thumbnails), only (H, tq, tk) copied back, equal to blocks.thumbnails."""
    from bench.inputs import text_of

    tokens = min(gpt2.max_tokens, 70)
    result = trace.run(gpt2, text_of(gpt2, tokens), tokens, keep_all=False)
    attention = result.attention("decoder_self")
    copied = count_copies(monkeypatch)
    found = np.stack(attention.reduced(blocks.thumbnails, device_reducers.thumbnails))
    cells = blocks.factor(attention.mask.shape[0], blocks.THUMBNAIL)
    tq, tk = (-(-n // cells) for n in attention.mask.shape)
    assert cells > 1 and copied == [(attention.n_heads, tq, tk)] * attention.n_layers
    assert not any(attention.ready(i) for i in range(attention.n_layers))  # no layer copied whole nor cached
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    expected = blocks.every_layer(attention.layer(i).weights for i in range(attention.n_layers))
    assert found.shape == expected.shape and found.dtype == np.float32
    # float64 sums of the same float32 weights in another order, then one float32 rounding each
    bound = tolerance.reordered64(cells * cells, expected) + tolerance.EPS32 * np.abs(expected)
    tolerance.assert_within(found, expected, bound, "thumbnails reduced on the device")


def test_head_statistics_of_recomputed_layers_are_reduced_on_the_device(gpt2, monkeypatch):
    """Head statistics of a run that did not reduce them (cached.get_statistics): on a device, each layer recomputed
    and reduced there (reduced.statistics_on_device), (statistics, H) copied back, equal to analysis's."""
    from attention_explorer.explorer.app import reduced
    from attention_explorer.explorer.run import analysis, reducers
    from bench.inputs import text_of
    from tests.explorer.test_reducers import statistic_bound

    tokens = min(gpt2.max_tokens, 70)
    result = trace.run(gpt2, text_of(gpt2, tokens), tokens, keep_all=False)
    assert reduced.statistics_on_device(result, "decoder_self") is None  # on the CPU: analysis reads the layers
    attention = result.attention("decoder_self")
    copied = count_copies(monkeypatch)
    found = reduced.statistics_on_device(result, "decoder_self")
    assert copied == [(len(reducers.NAMES), attention.n_heads)] * attention.n_layers
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    queries, keys = result.tokens_for("decoder_self")
    expected = analysis.head_statistics(attention.weights, keys, queries)
    assert set(found) == set(expected)
    for name, values in expected.items():
        assert np.isnan(found[name]).tolist() == np.isnan(values).tolist(), name
        tolerance.assert_within(found[name], values, statistic_bound(name, values, len(keys), False), name)


def test_the_qkv_walkthrough_of_a_recomputed_layer_copies_back_one_query_row(gpt2, monkeypatch):
    """The Q/K/V walkthrough (walkthrough.steps) reads one query's row of a layer: on a device, the row is selected
    there (device_layers.query_row), so no (H, Tq, Tk) comes back; the walkthrough is the same, bit for bit."""
    from attention_explorer.explorer.run import walkthrough

    result = trace.run(gpt2, gpt2.examples[0], keep_all=False)
    attention = result.attention("decoder_self")
    tq, tk = attention.mask.shape
    query = tq - 2
    copied = count_copies(monkeypatch)
    ours = walkthrough.steps(result, "decoder_self", 1, 2, query)
    h = attention.n_heads
    assert (h, 1, tk) in copied and not any(shape[-2:] == (tq, tk) for shape in copied)  # rows, never the map
    assert not attention.ready(1)
    monkeypatch.setattr(device_layers, "HOST", ("cpu",))
    expected = walkthrough.steps(result, "decoder_self", 1, 2, query)  # from the whole layer, as before
    assert attention.ready(1)
    for name, value in vars(expected).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(ours, name), value, err_msg=name)
        else:
            assert getattr(ours, name) == value, name
