"""What a run reduces every layer to for the analysis pages (explorer.run.reducers) equals analysis's functions of the
whole layers read afterwards, and one query's rows (explorer.run.rows) equal the recomputed layers' rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.lesson import starting
from attention_explorer.explorer.run import analysis, blocks, layers, reducers, rows, trace
from attention_explorer.explorer.run.blocks import block_means, factor
from tests.explorer.test_layers import folder

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


def assert_statistics_equal(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for name, values in expected.items():
        assert np.isnan(got[name]).tolist() == np.isnan(values).tolist(), name
        np.testing.assert_allclose(got[name], values, rtol=2e-5, atol=1e-7, err_msg=name)


def assert_rollout_overviews(rolled: list, weights: np.ndarray, cells: int) -> None:
    """Each layer's reduced overview: blocks.block_means of analysis.rollout through that layer."""
    whole = analysis.rollout(weights)  # (L, T, T) float64
    f = factor(weights.shape[-1], cells)
    for layer, found in enumerate(rolled):
        expected = block_means(whole[layer], f, f)
        assert found.shape == expected.shape and found.dtype == np.float32
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-7 * expected.max())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [10, 37, 300])  # within one block of rows; several, the last one short
def test_one_pass_statistics_and_rollout_equal_the_reference_on_random_layers(causal, length):
    rng = np.random.default_rng(length)
    weights = softmax_layers(rng, 3, 2, length, length, causal)
    tokens = [TOKENS[i] for i in rng.integers(0, len(TOKENS), length)]
    found = reducers.Analysis(cells=8, longer_than=0)
    stats, rolled = reduced_by(found, "decoder_self" if causal else "encoder_self", weights, tokens, tokens)
    assert_statistics_equal(stats, analysis.head_statistics(weights, tokens, tokens))
    assert_rollout_overviews(rolled, weights, cells=8)


def test_hand_made_heads_get_the_references_statistics_and_labels():
    n = len(TOKENS)
    previous, uniform, sink = np.eye(n, k=-1), np.full((n, n), 1 / n), np.zeros((n, n))
    previous[0, 0] = 1
    sink[:, 0] = 1
    weights = np.stack([previous, uniform, sink]).astype(np.float32)[None]  # (1, 3, T, T)
    stats = reducers.as_statistics(reducers.layer_statistics(weights[0], TOKENS, TOKENS)[None])
    expected = analysis.head_statistics(weights, TOKENS, TOKENS)
    assert_statistics_equal(stats, expected)
    assert stats["entropy"][0, 0] == 0 and stats["entropy"][0, 1] == pytest.approx(np.log(n))
    assert analysis.head_labels(stats, n).tolist() == analysis.head_labels(expected, n).tolist()


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
        np.testing.assert_allclose(thumbnails, expected, rtol=1e-5, atol=1e-7)
        link = starting.link_of_rows(layer, rows, counted(kind, tokens, tokens))
        np.testing.assert_array_equal(link, starting.layer_link(layer, tokens, tokens, True, sink=causal))
    assert not found.done  # every reducer took every layer's results
    assert_statistics_equal(reducers.as_statistics(np.stack(stats)), analysis.head_statistics(weights, tokens, tokens))


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
    assert_statistics_equal(stats, analysis.head_statistics(cross, TOKENS[:6]))
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
        assert_statistics_equal(reducers.as_statistics(result.reduced["statistics"][kind]), expected)
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
    assert_statistics_equal(reducers.as_statistics(result.reduced["statistics"]["decoder_self"]), expected)
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
            np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(rows.query_rows(attention, query), expected)  # the layers now held
    first = result.attention(result.kinds[0])
    with pytest.raises(IndexError):
        rows.query_rows(first, first.mask.shape[0])
