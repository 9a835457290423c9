"""What a run reduces every layer to for the analysis pages (explorer.run.reducers) equals analysis's functions of the
whole layers read afterwards, and one query's rows (explorer.run.rows) equal the recomputed layers' rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import analysis, blocks, layers, reducers, rows, starting, trace
from attention_explorer.explorer.run.blocks import block_means, factor
from tests import tolerance
from tests.explorer.test_layers import folder

EPS64 = float(np.finfo(np.float64).eps)
TOKENS = ["[CLS]", "the", "cat", ",", "sat", "[SEP]", ".", "the", "cat", "sat"]


def softmax_layers(rng, n_layers: int, n_heads: int, tq: int, tk: int, causal: bool) -> np.ndarray:
    """(L, H, Tq, Tk) softmax rows of random scores, masked as the models mask (finfo.min, so exact zeros)."""
    scores = torch.from_numpy(rng.normal(size=(n_layers, n_heads, tq, tk)).astype(np.float32) * 3)
    if causal:
        scores = scores.masked_fill(~torch.ones(tq, tk, dtype=torch.bool).tril(), torch.finfo(torch.float32).min)
    return scores.softmax(-1).numpy()


def reduced_by(found: reducers.Analysis, kind: str, weights, queries, keys) -> tuple[dict, list]:
    """Both reducers over every layer in order, as a run gives them (statistics first, as reduced.for_model lists)."""
    stats, rolled = [], []
    for layer in weights:
        stats.append(found.statistics(kind, layer, queries, keys))
        rolled.append(found.rollout(kind, layer, queries, keys))
    return reducers.as_statistics(np.stack(stats)), rolled


def statistic_bound(name: str, expected: np.ndarray, n_keys: int, causal: bool) -> np.ndarray:
    """How far one_pass's float32 row sums (then a float64 mean over rows) can be from analysis's float64 statistics
    of the same weights: each row a float32 sum of n_keys terms of one sign (tests/tolerance.py), so within
    reordered(n_keys) of the statistic itself, the mean of the rows' bounds being the bound of the mean."""
    if name == "entropy":  # -w log w: the float32 log (within an ulp) and the product round too
        return tolerance.reordered(n_keys + 2, expected)
    if name == "distance":  # w |i - j|: |i - j| exact; causal: w (first - j) of both signs, |.| summing to at most
        # the distance and ROWS, plus (i - first) < ROWS times the row's sum (reducers.one_pass)
        return tolerance.reordered(n_keys + 1, expected + (2 * reducers.ROWS if causal else 0))
    if name in ("previous", "next", "self"):  # float64 means of the same float32 weights, perhaps in another order
        return n_keys * EPS64 * np.abs(expected)
    return tolerance.reordered(n_keys, expected)  # key shares and induction: float32 sums of weights >= 0


def assert_statistics_equal(got: dict, expected: dict, n_keys: int, causal: bool) -> None:
    assert set(got) == set(expected)
    for name, values in expected.items():
        assert np.isnan(got[name]).tolist() == np.isnan(values).tolist(), name
        tolerance.assert_within(got[name], values, statistic_bound(name, values, n_keys, causal), name)


def assert_rollout_overviews(rolled: list, weights: np.ndarray, cells: int) -> None:
    """Each layer's reduced overview: blocks.block_means of analysis.rollout through that layer."""
    whole = analysis.rollout(weights)  # (L, T, T) float64
    f = factor(weights.shape[-1], cells)
    for layer, found in enumerate(rolled):
        expected = block_means(whole[layer], f, f)
        assert found.shape == expected.shape and found.dtype == np.float32
        # every number of the carried rollout is >= 0, so each float32 rounding is relative to the entry itself: a
        # layer's mean over H heads, the mixing and its division (H + 4 terms) and the product over T keys, the errors
        # of the layers below carried through a row-stochastic product without growing; a chain of (layer + 1)
        # (T + H + 4) terms (probable: long), then the block mean's float32 rounding
        n_heads, n_keys = weights.shape[1], weights.shape[-1]
        bound = tolerance.probable((layer + 1) * (n_keys + n_heads + 4) + 1, expected)
        tolerance.assert_within(found, expected, bound, f"rollout overview through layer {layer}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [10, 37, 300])  # within one block of rows; several, the last one short
def test_one_pass_statistics_and_rollout_equal_the_reference_on_random_layers(causal, length):
    rng = np.random.default_rng(length)
    weights = softmax_layers(rng, 3, 2, length, length, causal)
    tokens = [TOKENS[i] for i in rng.integers(0, len(TOKENS), length)]
    found = reducers.Analysis(cells=8, longer_than=0)
    stats, rolled = reduced_by(found, "decoder_self" if causal else "encoder_self", weights, tokens, tokens)
    assert_statistics_equal(stats, analysis.head_statistics(weights, tokens, tokens), length, causal)
    assert_rollout_overviews(rolled, weights, cells=8)


def test_hand_made_heads_get_the_references_statistics_and_labels():
    n = len(TOKENS)
    previous, uniform, sink = np.eye(n, k=-1), np.full((n, n), 1 / n), np.zeros((n, n))
    previous[0, 0] = 1
    sink[:, 0] = 1
    weights = np.stack([previous, uniform, sink]).astype(np.float32)[None]  # (1, 3, T, T)
    stats = reducers.as_statistics(reducers.layer_statistics(weights[0], TOKENS, TOKENS)[None])
    expected = analysis.head_statistics(weights, TOKENS, TOKENS)
    assert_statistics_equal(stats, expected, n, False)
    assert stats["entropy"][0, 0] == 0  # one-hot rows: log 1 = 0, exactly
    # n weights 1/n, each rounded to float32, against log n: the weights' rounding, the log, the product and the sum
    tolerance.assert_within(stats["entropy"][0, 1], np.log(n), tolerance.reordered(n + 3, np.log(n)), "uniform")
    assert analysis.head_labels(stats, n).tolist() == analysis.head_labels(expected, n).tolist()


def assert_thumbnails_exact(got: np.ndarray, layer: np.ndarray, f_q: int, causal: bool) -> None:
    """The one pass's thumbnails exactly: each cell's rows summed in float32 as reducers.one_pass adds them (within
    each block of ROWS rows a cell's rows by numpy's sum, added into that thread's float32 cell, the threads' cells
    then added in order), then over its f_k keys in float64 in any order and over its count (pooled_means_bound), then
    one float32 rounding, IEEE's and monotone: the float32 between the nearest to that interval's ends (one number)."""
    n_heads, tq, tk = layer.shape
    firsts = range(0, tq, reducers.ROWS)
    parts = [firsts[i :: reducers.THREADS] for i in range(reducers.THREADS)] if tq >= reducers.THREADED else [firsts]
    total = None
    for part in parts:
        row_sums = np.zeros((n_heads, -(-tq // f_q), tk), np.float32)
        for first in part:
            last = min(tq, first + reducers.ROWS)
            width = min(tk, last) if causal else tk
            block = layer[:, first:last, :width]
            for cell in range(first // f_q, (last - 1) // f_q + 1):
                start, stop = max(first, cell * f_q) - first, min(last, (cell + 1) * f_q) - first
                row_sums[:, cell, :width] += block[:, start:stop].sum(1)
        total = row_sums if total is None else total + row_sums
    f_k = blocks.factor(tk, 8)
    counts = np.diff(blocks.edges(tq, f_q))[:, None] * np.diff(blocks.edges(tk, f_k))[None, :]
    value = blocks.block_sums(total, f_k, -1) / counts
    near = tolerance.pooled_means_bound(f_k, value)
    low, high = (value - near).astype(np.float32), (value + near).astype(np.float32)
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, "thumbnails from the one pass, the float32 of a value")


@pytest.mark.parametrize("threaded", [False, True])  # one thread, or the blocks shared between threads
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [10, 37, 300])  # drawn whole (a short map is its own thumbnail); in blocks
def test_one_pass_also_gives_the_thumbnails_and_the_link(monkeypatch, threaded, causal, length):
    """The model view's thumbnails (blocks.thumbnails) and the opening head's link (starting.layer_link), from the
    same pass as the statistics and the rollout."""
    monkeypatch.setattr(reducers, "THREADED", 0 if threaded else 10**9)
    rng = np.random.default_rng(length)
    weights = softmax_layers(rng, 2, 3, length, length, causal)
    tokens = [TOKENS[i] for i in rng.integers(0, len(TOKENS), length)]
    kind = "decoder_self" if causal else "encoder_self"

    def counted(kind, queries, keys):
        return starting.counted(queries, keys, True, sink=causal)

    wanted = ("thumbnails", "row_max", "statistics", "rollout")
    found = reducers.Analysis(8, 0, wanted, thumbnail=8, allowed=counted)
    stats = []
    for layer in weights:
        thumbnails = found.thumbnails(kind, layer, tokens, tokens)
        rows = found.row_max(kind, layer, tokens, tokens)
        stats.append(found.statistics(kind, layer, tokens, tokens))
        found.rollout(kind, layer, tokens, tokens)
        expected = blocks.thumbnails(layer, cells=8)
        assert thumbnails.shape == expected.shape and thumbnails.dtype == np.float32
        # float32 sums of each cell's f_q rows, as the pass adds them, then float64 over its keys: exactly (a bound of
        # those f_q + 1 roundings against the float64 means sat at 3x)
        f_q = blocks.factor(length, 8)
        assert_thumbnails_exact(thumbnails, layer, f_q, causal)
        link = starting.link_of_rows(layer, rows, counted(kind, tokens, tokens))
        np.testing.assert_array_equal(link, starting.layer_link(layer, tokens, tokens, True, sink=causal))
    assert not found.done  # every reducer took every layer's results
    expected = analysis.head_statistics(weights, tokens, tokens)
    assert_statistics_equal(reducers.as_statistics(np.stack(stats)), expected, length, causal)


def test_a_reducer_the_analysis_was_not_made_for_is_refused():
    found = reducers.Analysis(8, 0)  # statistics and rollout
    with pytest.raises(ValueError, match="thumbnails"):
        found.thumbnails(
            "encoder_self", softmax_layers(np.random.default_rng(0), 1, 1, 4, 4, False)[0], TOKENS[:4], TOKENS[:4]
        )


def test_cross_attention_and_short_maps_get_statistics_but_no_rollout():
    rng = np.random.default_rng(0)
    cross = softmax_layers(rng, 2, 2, 4, 6, causal=False)
    found = reducers.Analysis(cells=8, longer_than=5)
    stats, rolled = reduced_by(found, "cross", cross, TOKENS[:4], TOKENS[:6])
    assert_statistics_equal(stats, analysis.head_statistics(cross, TOKENS[:6]), 6, False)
    assert np.isnan(stats["induction"]).all()  # its queries are not its keys
    assert all(r.size == 0 for r in rolled)
    short = softmax_layers(rng, 2, 2, 5, 5, causal=True)
    assert all(r.size == 0 for r in reduced_by(found, "decoder_self", short, TOKENS[:5], TOKENS[:5])[1])


@pytest.mark.parametrize("keep_all", [False, True])
def test_what_a_run_reduces_equals_the_reference_of_the_layers_read_later(translate, keep_all):
    """Every kind of an encoder-decoder: encoder self-attention, masked (causal) decoder self-attention, cross."""
    found = reducers.Analysis(cells=4, longer_than=0)
    result = trace.run(
        translate,
        translate.examples[0],
        keep_all=keep_all,
        reduce={"statistics": found.statistics, "rollout": found.rollout},
    )
    assert result.reduced is not None
    for kind in result.kinds:
        attention, (queries, keys) = result.attention(kind), result.tokens_for(kind)
        weights = np.stack([attention.layer(i).weights for i in range(attention.n_layers)])
        expected = analysis.head_statistics(weights, keys, queries if kind != "cross" else None)
        reduced = reducers.as_statistics(result.reduced["statistics"][kind])
        assert_statistics_equal(reduced, expected, weights.shape[-1], kind == "decoder_self")
        if kind == "cross":
            assert result.reduced["rollout"][kind].size == 0
        else:
            assert_rollout_overviews(list(result.reduced["rollout"][kind]), weights, cells=4)


@pytest.mark.slow
def test_smollm2_reduces_its_statistics_and_rollout_overview_at_600_tokens(smollm2):
    """A real causal model past the length drawn whole (zoom.FULL), as the app reduces it (reduced.for_model)."""
    from attention_explorer.explorer.figures import zoom
    from bench.inputs import text_of

    found = reducers.Analysis(zoom.OVERVIEW_CELLS, longer_than=zoom.FULL)
    result = trace.run(
        smollm2, text_of(smollm2, 600), 600, reduce={"statistics": found.statistics, "rollout": found.rollout}
    )
    attention, (queries, keys) = result.attention("decoder_self"), result.tokens_for("decoder_self")
    assert len(keys) > zoom.FULL and attention.source.kept is None
    weights = np.stack([attention.layer(i).weights for i in range(attention.n_layers)])  # (30, 9, T, T): 1.4 GB
    expected = analysis.head_statistics(weights, keys, queries)
    assert not np.isnan(expected["induction"]).any()  # a real text repeats tokens
    reduced = reducers.as_statistics(result.reduced["statistics"]["decoder_self"])
    assert_statistics_equal(reduced, expected, weights.shape[-1], True)
    assert_rollout_overviews(list(result.reduced["rollout"]["decoder_self"]), weights, cells=zoom.OVERVIEW_CELLS)


@pytest.mark.parametrize("fixture", ["minilm", "translate", "llama_folder"])
def test_a_querys_rows_equal_the_recomputed_layers_rows(fixture, request):
    """Encoder self-attention, a decoder's masked self-attention and cross-attention (read from its layer), rotary
    positions with shared key/value heads."""
    loaded = request.getfixturevalue(fixture)
    if fixture == "llama_folder":
        loaded = folder(loaded, fixture)
    result = trace.run(loaded, loaded.examples[0], keep_all=False)
    for kind in result.kinds:
        attention = result.attention(kind)
        for query in (0, attention.mask.shape[0] // 2, attention.mask.shape[0] - 1):
            layers.cache().clear()  # computed from the kept stream, not read from a recomputed layer
            found = rows.query_rows(attention, query)
            expected = np.stack([attention.layer(i).weights[:, query] for i in range(attention.n_layers)])
            # one query row computed alone from the kept input, against the layer's batched products: its scores from
            # q and k, each a norm's two d_model sums and a projection's d_model more, through the softmax
            d_model = loaded.model.config.d_model
            for i in range(attention.n_layers):
                layer = attention.layer(i)
                dz = tolerance.scores_bound(layer.q[:, query : query + 1], layer.k, 3 * d_model)[:, 0]  # (H, 1)
                bound = tolerance.probabilities_bound(expected[i], dz)
                tolerance.assert_within(found[i], expected[i], bound, f"{kind} layer {i} row {query}")
            np.testing.assert_array_equal(rows.query_rows(attention, query), expected)  # the layers now held
    first = result.attention(result.kinds[0])
    with pytest.raises(IndexError):
        rows.query_rows(first, first.mask.shape[0])
