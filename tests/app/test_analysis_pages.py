"""Head statistics and rollout/flow pages through app.py, asserting on the drawn numbers."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from explorer.run import analysis, trace
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
    np.testing.assert_allclose(array(grid["z"]), stats["previous"])
    labels = analysis.head_labels(stats, len(result.source_tokens))
    assert [list(r) for r in grid["customdata"]] == [list(r) for r in labels]
    table = at.dataframe[0].value
    assert len(table) == 6 * 12
    row = table[(table["layer"] == 3) & (table["head"] == 5)].iloc[0]
    assert row.entropy == stats["entropy"][2, 4] and row.label == labels[2, 4]
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
    np.testing.assert_allclose(array(figs[0]["data"][0]["z"]), weights[5].mean(0), rtol=1e-6)
    np.testing.assert_allclose(array(figs[1]["data"][0]["z"]), analysis.rollout(weights)[-1])
    np.testing.assert_allclose(array(figs[2]["data"][0]["z"]), analysis.flow(weights), atol=1e-9)
    for fig in figs[:3]:  # each map's colours span its own 1st-99th percentile, named in its title
        z, heat = array(fig["data"][0]["z"]), fig["data"][0]
        assert (heat["zmin"], heat["zmax"]) == pytest.approx(tuple(np.percentile(z, [1, 99])), rel=1e-6)
        assert "1st-99th percentile" in fig["layout"]["title"]["text"]
    at.selectbox(key="aggregate_layer").set_value(1).run()
    np.testing.assert_allclose(array(charts(at)[1]["data"][0]["z"]), analysis.rollout(weights[:2])[-1])
    at.toggle(key="aggregate_words").set_value(True).run()
    figs = charts(at)
    groups = analysis.word_groups(result.source_word_ids)
    assert len(groups) < len(result.source_tokens)  # some word is split into pieces
    words = analysis.merge_tokens(result.source_tokens, groups)
    assert list(figs[0]["layout"]["xaxis"]["ticktext"]) == words
    merged = analysis.merge_words(weights[1].mean(0), groups, groups)
    np.testing.assert_allclose(array(figs[0]["data"][0]["z"]), merged, rtol=1e-6)
    np.testing.assert_allclose(array(figs[1]["data"][0]["z"]).sum(-1), 1, atol=1e-6)


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
    from explorer.run import reference_view

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
