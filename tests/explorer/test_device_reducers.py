"""The first run's reductions in torch on the layer's own device (explorer.run.device_reducers, reducers.Analysis on a
tensor off the CPU) equal the numpy pass's (reducers.one_pass) and analysis's functions of the whole layers: here the
torch pass is made to run on CPU tensors (reducers.HOST emptied), on random layers and on three models' runs."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch

from attention_explorer.explorer.app import reduced
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.run import analysis, blocks, device_reducers, reducers, starting, trace
from attention_explorer.models import registry
from attention_explorer.models.attention import raw_scores_dropped
from tests import tolerance
from tests.explorer.test_reducers import TOKENS, assert_rollout_overviews, softmax_layers, statistic_bound
from tests.folders import make_gemma3_folder

WANTED = ("thumbnails", "row_max", "statistics", "rollout")
EPS64 = float(np.finfo(np.float64).eps)


@pytest.fixture
def on_device(monkeypatch):
    """Every tensor's layer reduced by the torch pass, the CPU's included."""
    monkeypatch.setattr(reducers, "HOST", ())


def counted(causal: bool):
    def allowed(kind, queries, keys):
        return starting.counted(queries, keys, True, sink=causal)

    return allowed


def reduce_layers(weights, tokens, causal: bool, as_tensor: bool, device: str = "cpu") -> dict[str, list]:
    """Every reducer over each layer in order, as a run gives them; the layers as tensors (the torch pass where HOST
    does not hold their device) or as numpy (the numpy pass)."""
    kind = "decoder_self" if causal else "encoder_self"
    found = reducers.Analysis(8, 0, WANTED, thumbnail=8, allowed=counted(causal))
    out = {name: [] for name in WANTED}
    for layer in weights:
        given = torch.from_numpy(layer).to(device) if as_tensor else layer
        for name in WANTED:
            out[name].append(getattr(found, name)(kind, given, tokens, tokens))
    assert not found.done
    return out


def cell_rows(layer: np.ndarray, f_q: int, pieces: int | None) -> np.ndarray:
    """(H, tq, Tk) float32: each cell's f_q rows summed in float32 in row order, from 0 (the torch pass's index_add_
    on the CPU); with `pieces`, the numpy pass's: the rows in each block of `pieces` rows summed so, then those (at
    most two a cell, when f_q <= pieces: their order does not matter) added."""
    found = []
    for a in range(0, layer.shape[-2], f_q):
        b = min(a + f_q, layer.shape[-2])
        cuts = [a, b] if pieces is None else [a, *range((a // pieces + 1) * pieces, b, pieces), b]
        assert len(cuts) <= 3 or pieces is None
        parts = [functools.reduce(np.add, layer[:, i:j].transpose(1, 0, 2)) for i, j in itertools.pairwise(cuts)]
        found.append(functools.reduce(np.add, parts))
    return np.stack(found, axis=-2)


def assert_cells_rounded(got: np.ndarray, layer: np.ndarray, f_q: int, f_k: int, pieces: int | None = None) -> None:
    """A pass's thumbnails exactly: each cell's f_q rows summed in float32 (cell_rows), those sums over its f_k keys
    in float64 in any order and over its count (pooled_means_bound: f_k eps64 each way, and the division's), then one
    float32 rounding, IEEE's and monotone: so each cell is a float32 between the nearest to the two ends of that
    float64 interval (usually one number). A bound of those roundings (f_q + 1 of them) sat at 3-6x, as one
    rounding of a few is a large share of their worst case."""
    rows = cell_rows(layer, f_q, pieces)
    summed = blocks.block_sums(rows.astype(np.float32), f_k, -1)  # (H, tq, tk) float64
    counts = np.diff(blocks.edges(layer.shape[-2], f_q))[:, None] * np.diff(blocks.edges(layer.shape[-1], f_k))
    value = summed / counts
    near = tolerance.pooled_means_bound(f_k, value)
    low, high = np.float32(value - near), np.float32(value + near)
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, "thumbnails, the float32 of the cells' sums")


def assert_statistics_close(got: np.ndarray, numpy_pass: np.ndarray, n_keys: int, causal: bool) -> None:
    """Two passes, each within statistic_bound of the exact statistic, so within the sum of both bounds of each
    other (each bound taken at the larger of the two values)."""
    got, numpy_pass = reducers.as_statistics(got), reducers.as_statistics(numpy_pass)
    for name, values in numpy_pass.items():
        assert np.isnan(got[name]).tolist() == np.isnan(values).tolist(), name
        scale = np.fmax(np.abs(values), np.abs(got[name]))
        tolerance.assert_within(got[name], values, 2 * statistic_bound(name, scale, n_keys, causal), name)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [10, 37, 300])  # a short map drawn whole; cells of several rows, the last short
def test_the_torch_pass_equals_the_numpy_pass_and_the_reference(on_device, monkeypatch, causal, length):
    monkeypatch.setattr(device_reducers, "BLOCK_BYTES", 3 * 4 * length * 7)  # blocks of 7 rows: several, one short
    rng = np.random.default_rng(length)
    weights = softmax_layers(rng, 3, 3, length, length, causal)
    tokens = [TOKENS[i] for i in rng.integers(0, len(TOKENS), length)]
    ours = reduce_layers(weights, tokens, causal, as_tensor=True)
    theirs = reduce_layers(weights, tokens, causal, as_tensor=False)  # numpy arrays: the numpy pass
    # the row maxima are products with 1 or 0 and a max: the same bits, and so the same link
    np.testing.assert_array_equal(np.stack(ours["row_max"]), np.stack(theirs["row_max"]))
    for layer, rows in zip(weights, ours["row_max"], strict=True):
        link = starting.link_of_rows(torch.from_numpy(layer), rows, counted(causal)("", tokens, tokens))
        np.testing.assert_array_equal(link, starting.layer_link(layer, tokens, tokens, True, sink=causal))
    f_q = blocks.factor(length, 8)
    for got, layer in zip(ours["thumbnails"], weights, strict=True):
        expected = blocks.thumbnails(layer, cells=8)
        assert got.shape == expected.shape and got.dtype == np.float32
        if f_q == 1:  # drawn whole: the layer itself
            np.testing.assert_array_equal(got, expected)
        else:  # float32 sums of each cell's f_q rows (in row order, index_add_ on the CPU), float64 over its keys
            assert_cells_rounded(got, layer, f_q, blocks.factor(length, 8))
    stats = np.stack(ours["statistics"])
    assert stats.dtype == np.float64 and stats.shape == (3, len(reducers.NAMES), 3)  # (L, statistics, H)
    expected = analysis.head_statistics(weights, tokens, tokens)
    for name, values in expected.items():
        got = reducers.as_statistics(stats)[name]
        assert np.isnan(got).tolist() == np.isnan(values).tolist(), name
        # the torch pass's distance is w |i - j| directly, within the non-causal bound
        tolerance.assert_within(got, values, statistic_bound(name, values, length, False), name)
    assert_statistics_close(stats, np.stack(theirs["statistics"]), length, causal)
    assert_rollout_overviews(ours["rollout"], weights, cells=8)


def test_only_the_reduced_results_come_back_from_the_device(on_device, monkeypatch):
    """Every copy back of the torch pass (device_reducers.moved) is a reduction: at most a number a head and row (the
    row maxima), never the (H, T, T) layer."""
    shapes = []

    def counted_copy(tensor):
        shapes.append(tuple(tensor.shape))
        return tensor.detach().cpu().numpy()

    monkeypatch.setattr(device_reducers, "moved", counted_copy)
    weights = softmax_layers(np.random.default_rng(0), 2, 3, 300, 300, causal=True)
    tokens = [TOKENS[i] for i in np.random.default_rng(1).integers(0, len(TOKENS), 300)]
    reduce_layers(weights, tokens, True, as_tensor=True)
    assert shapes and max(int(np.prod(shape)) for shape in shapes) == 3 * 300  # the row maxima (H, T)
    assert (3, 300, 300) not in shapes


def test_a_cross_attention_and_a_short_text_reduce_as_the_numpy_pass(on_device):
    rng = np.random.default_rng(3)
    cross = softmax_layers(rng, 2, 2, 4, 6, causal=False)  # 4 target queries, 6 source keys
    found = reducers.Analysis(cells=8, longer_than=0)
    stats = [found.statistics("cross", torch.from_numpy(layer), TOKENS[:4], TOKENS[:6]) for layer in cross]
    rolled = [found.rollout("cross", torch.from_numpy(layer), TOKENS[:4], TOKENS[:6]) for layer in cross]
    expected = analysis.head_statistics(cross, TOKENS[:6])
    got = reducers.as_statistics(np.stack(stats))
    assert np.isnan(got["induction"]).all() and all(r.size == 0 for r in rolled)
    for name in ("entropy", "cls", "sep", "punctuation", "previous", "next", "self"):
        tolerance.assert_within(got[name], expected[name], statistic_bound(name, expected[name], 6, False), name)


def reduced_run(loaded, text: str, tokens: int) -> trace.Trace:
    return trace.run(loaded, text, tokens, keep_all=False, reduce=reduced.for_model(loaded))


@pytest.fixture(scope="module")
def gemma3_window(tmp_path_factory):
    """A tiny Gemma 3 folder whose layers read a sliding window of 5 keys but every third (reference_view's)."""
    path = make_gemma3_folder(tmp_path_factory.mktemp("gemma3") / "g", window=5, layers=3, pattern=3)
    (spec,) = registry.folder_specs(f"gemma3-window={path}")
    return registry.build(spec)


@pytest.mark.parametrize("fixture", ["minilm", "gpt2_folder", "gemma3_window"])
def test_a_models_first_run_reduces_on_the_device_as_on_the_cpu(request, monkeypatch, fixture):
    """What the app's first run reduces (reduced.for_model: thumbnails, the opening link, statistics and the rollout's
    overview, here reduced from the 9th token on) by the torch pass, against the numpy pass's, on one text."""
    from bench.inputs import text_of

    loaded = request.getfixturevalue(fixture)
    if not isinstance(loaded, registry.LoadedModel):  # a folder the engine reads
        (spec,) = registry.folder_specs(f"{fixture}={loaded}")
        loaded = registry.build(spec)
    monkeypatch.setattr(zoom, "FULL", 8)
    tokens = min(loaded.max_tokens, 70)  # more than THUMBNAIL: thumbnails of cells of 3 tokens
    text = text_of(loaded, tokens)
    result = reduced_run(loaded, text, tokens)
    theirs = result.reduced
    monkeypatch.setattr(reducers, "HOST", ())
    ours = reduced_run(loaded, text, tokens).reduced
    # the same forward kept whole: a run keeping no raw scores, as the reduced ones (a local layer on its band)
    with raw_scores_dropped():
        whole = trace.run(loaded, text, tokens, keep_all=True)
    config = loaded.model.config
    for kind, stats in theirs["statistics"].items():
        n_keys, causal = len(result.tokens_for(kind)[1]), kind == "decoder_self"
        assert_statistics_close(ours["statistics"][kind], stats, n_keys, causal)
        np.testing.assert_array_equal(ours["start"][kind], theirs["start"][kind])  # the same bits (above)
        expected = theirs["thumbnails"][kind]
        assert expected.shape[-1] < n_keys and ours["thumbnails"][kind].shape == expected.shape  # in cells
        # each pass exactly, from the layers themselves (the same forward kept whole: the same bits): the torch
        # pass's cells sum their rows in order, the numpy pass's in its blocks of ROWS rows (cell_rows)
        f_q, f_k = (blocks.factor(len(t), blocks.THUMBNAIL) for t in result.tokens_for(kind))
        layers = np.asarray(whole.attention(kind).weights)  # (L, H, Tq, Tk)
        for mine, numpy_pass, layer in zip(ours["thumbnails"][kind], expected, layers, strict=True):
            assert_cells_rounded(mine, layer, f_q, f_k)
            assert_cells_rounded(numpy_pass, layer, f_q, f_k, pieces=reducers.ROWS)
        rolled = theirs["rollout"][kind]
        assert rolled.shape[-1] > 8  # the rollout was reduced
        for layer in range(len(rolled)):  # both passes within the chain's bound of the exact rollout (test_reducers)
            terms = (layer + 1) * (rolled.shape[-1] + config.n_heads + 4) + 1
            bound = 2 * tolerance.probable(terms, rolled[layer])
            tolerance.assert_within(ours["rollout"][kind][layer], rolled[layer], bound, f"rollout, layer {layer}")
