"""Head statistics and rollout/flow pages through app.py, asserting on the drawn numbers."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import analysis, trace
from tests import tolerance
from tests.app import new_app
from tests.figdata import array, spec

TEXT = "Bark is very cute and he is a dog"


def charts(at: AppTest) -> list[dict]:
    return [spec(c) for c in at.get("plotly_chart")]


def app_on(page: str, text: str = TEXT) -> AppTest:
    at = new_app().run()
    at.sidebar.text_area[0].set_value(text).run()
    at.switch_page(f"explorer/pages/{page}.py").run()
    return at


def test_statistics_grid_table_and_open_in_attention(minilm):
    at = app_on("statistics")
    at.selectbox(key="stats_statistic").set_value("previous").run()
    result = trace.run(minilm, TEXT, 128)
    stats = analysis.head_statistics(result.encoder_self.weights, result.source_tokens)
    grid = charts(at)[0]["data"][0]
    np.testing.assert_allclose(array(grid["z"]), stats["previous"])  # read off the diagonal: the same numbers
    labels = analysis.head_labels(stats, len(result.source_tokens))
    assert [list(r) for r in grid["customdata"]] == [list(r) for r in labels]
    table = at.dataframe[0].value
    assert len(table) == 6 * 12
    row = table[(table["layer"] == 3) & (table["head"] == 5)].iloc[0]
    # reduced by the run in float32 (explorer.run.reducers), not in float64 over the whole layers: each row's sum of
    # -w log w over its keys, every term within a product's rounding and float32 log's (at most 4 ulps) of its own
    entropy = stats["entropy"][2, 4]
    bound = tolerance.reordered(len(result.source_tokens) + 5, entropy)
    tolerance.assert_within(row.entropy, entropy, bound, "a head's entropy reduced in float32")
    assert row.label == labels[2, 4]
    at.selectbox(key="stats_layer").set_value(2).run()
    at.selectbox(key="stats_head").set_value(4).run()
    at.button(key="stats_open").click().run()
    assert at.selectbox(key="attention_layer").value == 2 and at.selectbox(key="attention_head").value == 4
    np.testing.assert_array_equal(array(charts(at)[0]["data"][0]["z"]), result.encoder_self.weights[2, 4])


def test_rollout_and_flow_at_token_and_word_level(minilm):
    text = "The embeddings attend"
    at = app_on("aggregation", text)
    result = trace.run(minilm, text, 128)
    weights = result.encoder_self.weights
    figs = charts(at)
    mean = weights[5].mean(0)  # the mean over 12 heads, which the page may sum in another order
    tolerance.assert_within(array(figs[0]["data"][0]["z"]), mean, tolerance.reordered(12, mean), "mean over heads")
    # the page's own float64 rollout and flow (the same operations in the same order), rounded to float32 for the figure
    rolled, flows = analysis.rollout(weights)[-1], analysis.flow(weights)
    np.testing.assert_array_equal(array(figs[1]["data"][0]["z"]), rolled.astype(np.float32))
    np.testing.assert_array_equal(array(figs[2]["data"][0]["z"]), flows.astype(np.float32))
    for fig in figs[:3]:  # each map's colours span its own 1st-99th percentile, named in its title
        z, heat = array(fig["data"][0]["z"]), fig["data"][0]
        assert (heat["zmin"], heat["zmax"]) == pytest.approx(tuple(np.percentile(z, [1, 99])), rel=1e-6)
        assert "1st-99th percentile" in fig["layout"]["title"]["text"]
    at.selectbox(key="aggregate_layer").set_value(1).run()
    rolled = analysis.rollout(weights[:2])[-1].astype(np.float32)  # the same float64 rollout, rounded for the figure
    np.testing.assert_array_equal(array(charts(at)[1]["data"][0]["z"]), rolled)
    at.toggle(key="aggregate_words").set_value(True).run()
    figs = charts(at)
    groups = analysis.word_groups(result.source_word_ids)
    assert len(groups) < len(result.source_tokens)  # some word is split into pieces
    words = analysis.merge_tokens(result.source_tokens, groups)
    assert list(figs[0]["layout"]["xaxis"]["ticktext"]) == words
    merged = analysis.merge_words(weights[1].mean(0), groups, groups)
    # the mean over 12 heads in any order, then a word's sum over its pieces and mean over its rows: the same
    # operations on numbers that differ, so each of those roundings can land apart by up to eps
    largest = max(len(g) for g in groups)
    bound = tolerance.reordered(12 + 2 * largest, merged)
    tolerance.assert_within(array(figs[0]["data"][0]["z"]), merged, bound, "word-level mean over heads")
    rolled = array(figs[1]["data"][0]["z"])  # float64 rows that sum to 1, each value rounded to float32
    # those roundings (u of each value: u in all) and numpy's float32 sum over the words
    bound = tolerance.reordered(rolled.shape[-1] + 1, 1.0)
    tolerance.assert_within(rolled.sum(-1), np.ones(len(rolled)), bound, "word-level rollout rows sum to 1")


def test_rollout_refuses_cross_attention_and_long_inputs_skip_flow():
    at = new_app().run()
    at.sidebar.selectbox[0].set_value("translate").run()
    at.switch_page("explorer/pages/aggregation.py").run()
    at.radio(key="aggregate_kind").set_value("cross").run()
    assert "pick a self-attention" in at.info[0].value
    long_text = " ".join(["word"] * 40)
    at = app_on("aggregation", long_text)
    assert "up to 32 tokens" in at.info[0].value and len(charts(at)) == 2


def test_reference_page_shows_per_head_differences_and_both_models(minilm):
    from attention_explorer.explorer.run import reference_view

    at = app_on("reference")
    result = trace.run(minilm, TEXT, 128)
    theirs = reference_view.attention(reference_view.load(), minilm, TEXT, 128)
    figs = charts(at)
    np.testing.assert_array_equal(
        array(figs[0]["data"][0]["z"]), reference_view.max_abs_difference(result.encoder_self.weights, theirs)
    )
    assert "(the project's bound is 1e-5)" in at.success[0].value
    at.selectbox(key="reference_layer").set_value(4).run()
    at.selectbox(key="reference_head").set_value(7).run()
    figs = charts(at)
    np.testing.assert_array_equal(array(figs[1]["data"][0]["z"]), result.encoder_self.weights[4, 7])
    np.testing.assert_array_equal(array(figs[2]["data"][0]["z"]), theirs[4, 7])


def test_reference_page_explains_models_without_a_twin():
    at = new_app().run()
    at.sidebar.selectbox[0].set_value("reverse").run()
    at.switch_page("explorer/pages/reference.py").run()
    assert "Only models read from Hugging Face files" in at.info[0].value and not at.exception


def test_a_long_rollout_is_the_block_means_of_the_whole_rollout_reduced_by_the_run(minilm, monkeypatch):
    """Past zoom.FULL tokens (forced to 8) the rollout is drawn from what the first run reduced: the block means of
    analysis.rollout through the picked layer, as an overview of the whole rollout would draw it."""
    from attention_explorer.explorer.figures import zoom
    from attention_explorer.explorer.run import blocks

    monkeypatch.setattr(zoom, "FULL", 8)
    monkeypatch.setattr(zoom, "OVERVIEW_CELLS", 4)
    text = "A rollout this long is reduced while the run holds each layer of it"  # a text no other test runs
    result = trace.run(minilm, text, 128)
    weights, n = result.encoder_self.weights, len(result.source_tokens)
    f = blocks.factor(n, 4)
    assert n > 8 and f > 1
    expected = {layer: blocks.block_means(analysis.rollout(weights[: layer + 1])[-1], f, f) for layer in (5, 1)}

    def refused(weights):
        raise AssertionError("the page computed the rollout")

    monkeypatch.setattr(analysis, "rollout", refused)  # the page draws what the run reduced
    at = app_on("aggregation", text)
    assert not at.exception
    for layer, rolled in expected.items():
        at.selectbox(key="aggregate_layer").set_value(layer).run()
        assert not at.exception
        figs = charts(at)
        # the run carries the rollout up in float32: each layer sums 12 heads, multiplies by the carried matrix (n
        # terms), divides by the mixed rows' sums (n more) and rounds four times; non-negative terms, so relative to
        # each value, adding up over the layers (the expected rollout is float64)
        bound = tolerance.reordered((layer + 1) * (12 + 2 * n + 4), rolled)
        tolerance.assert_within(array(figs[1]["data"][0]["z"]), rolled, bound, f"rollout through layer {layer}")
        assert f"each cell averages {f} x {f} weights" in figs[1]["layout"]["title"]["text"]
        raw = blocks.block_means(weights[layer].mean(0), f, f)
        # the mean over 12 heads in any order, then each cell's own rounding to float32
        bound = tolerance.reordered(12 + 1, raw)
        tolerance.assert_within(array(figs[0]["data"][0]["z"]), raw, bound, "overview of the mean over heads")
    at.toggle(key="aggregate_words").set_value(True).run()  # words: from every layer, for texts drawn whole only
    assert not at.exception
    assert "At word level the rollout is computed for inputs of up to 8 tokens" in at.info[0].value
    assert "aggregate_rollout" not in [c.key for c in at.get("plotly_chart")]


def test_statistics_are_what_the_run_reduced(minilm, monkeypatch):
    text = "Statistics of every head come from the run itself, read from no layer"  # a text no other test runs
    result = trace.run(minilm, text, 128)
    stats = analysis.head_statistics(result.encoder_self.weights, result.source_tokens, result.source_tokens)

    def refused(*args):
        raise AssertionError("the page passed over every layer")

    monkeypatch.setattr(analysis, "head_statistics", refused)
    at = app_on("statistics", text)
    assert not at.exception
    at.selectbox(key="stats_statistic").set_value("entropy").run()
    # each row's float32 sum of -w log w over its keys, every term within a product's and float32 log's (4 ulps)
    # rounding of its own; the mean over rows is float64
    bound = tolerance.reordered(len(result.source_tokens) + 5, stats["entropy"])
    tolerance.assert_within(array(charts(at)[0]["data"][0]["z"]), stats["entropy"], bound, "entropy reduced by the run")


def test_find_heads_on_a_long_text_reads_the_querys_rows_not_the_layers(minilm, monkeypatch):
    """Past trace.KEEP_ALL_BYTES a run keeps no layer: the ranking comes from the query's row of each layer."""
    from attention_explorer.explorer.run import layers

    text = " ".join(["the cat sat on the mat and then it slept"] * 30)  # about 300 tokens
    result = trace.run(minilm, text, 512)
    assert result.encoder_self.source.kept is None
    weights = result.encoder_self.weights
    query, key = 100, 40
    expected = np.stack([weights[i][:, query, key] for i in range(len(weights))])
    # the page computes each layer's row alone: its q is a product of another shape than the whole layer's (another
    # order of d_model terms), and so its scores and weights (tolerance.scores_bound: q and k each from a d_model sum)
    bound = np.empty_like(expected)
    for i in range(len(weights)):
        found = result.encoder_self.layer(i)
        dz = tolerance.scores_bound(found.q[:, query : query + 1], found.k, 2 * minilm.model.config.d_model)
        bound[i] = tolerance.probabilities_bound(found.weights[:, query], dz[:, 0])[:, key]
    layers.cache().clear()
    monkeypatch.setattr(layers.StackLayers, "_compute", lambda *args: pytest.fail("a layer was recomputed"))
    at = new_app().run()
    at.session_state[state.MAX_TOKENS] = 512
    at.sidebar.text_area[0].set_value(text).run()
    at.switch_page("explorer/pages/find_heads.py").run()
    at.selectbox(key="find_query").set_value(query).run()
    at.selectbox(key="find_key").set_value(key).run()
    assert not at.exception
    grid = next(spec(c) for c in at.get("plotly_chart") if c.key == "find_grid")
    tolerance.assert_within(array(grid["data"][0]["z"]), expected, bound, "a query's weight on a key, row by row")
    table = at.dataframe[0].value
    # sorted, each weight is within the largest bound of its rank's
    ranked = np.sort(expected.ravel())[::-1]
    tolerance.assert_within(table["weight"].to_numpy(), ranked, bound.max(), "the ranking's weights")
