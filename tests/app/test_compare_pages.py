"""Compare, reference, word level and the shareable address, through app.py, asserting on the drawn numbers."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.labels import escape_tokens
from attention_explorer.explorer.run import analysis, compare, starting, trace
from attention_explorer.explorer.run.compare import MINIMAL_PAIRS
from attention_explorer.explorer.run.heads import head_or_mean
from attention_explorer.models import registry
from tests import tolerance
from tests.app import new_app
from tests.figdata import array, plain, spec

TEXT = "The embeddings attend to tokens"


def charts(at: AppTest) -> dict[str, dict]:
    """Every drawn figure by its chart key."""
    return {c.key: spec(c) for c in at.get("plotly_chart")}


def z(figure: dict) -> np.ndarray:
    return array(figure["data"][0]["z"])


def opened(page: str = "attention", **params: str) -> AppTest:
    """A new session opened at /page?params, as a copied address would open it."""
    at = new_app(page)
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


@pytest.fixture(scope="module")
def minilm_random():
    return registry.load("minilm-random")


def test_address_restores_model_sentence_layer_head_and_token(minilm):
    at = opened("head_view", model="minilm", text=TEXT, layer="3", head="5", token="2")
    assert not at.exception and not at.warning
    assert at.sidebar.text_area[0].value == TEXT
    assert at.selectbox(key="head_layer").value == 2 and at.selectbox(key="head_focus").value == 2
    assert dict(at.query_params) == {"model": "minilm", "text": TEXT, "layer": "3", "token": "2"}
    at = opened(model="minilm", text=TEXT, layer="3", head="5")
    result = trace.run(minilm, TEXT, 128)
    np.testing.assert_array_equal(z(charts(at)["attention_heatmap"]), result.encoder_self.weights[2, 4])
    assert at.query_params["head"] == "5"


def test_bad_address_values_fall_back_with_visible_notices(minilm):
    at = opened(model="gpt-9", text=TEXT, layer="99", head="x")
    assert not at.exception
    warnings = plain(" ".join(w.value for w in at.warning))
    assert "unknown model 'gpt-9'" in warnings and "head 'x'" in warnings and "layer 99" in warnings
    result = trace.run(minilm, TEXT, 128)
    link = starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)
    assert f"showing layer {link.layer + 1}" in warnings  # the sentence's starting head, not a guess
    drawn = z(charts(at)["attention_heatmap"])
    np.testing.assert_array_equal(drawn, result.encoder_self.weights[link.layer, link.head])
    at.selectbox(key="attention_head").set_value(3).run()  # the notices were for opening; now the user's choice
    assert not at.warning and at.query_params["layer"] == str(link.layer + 1) and at.query_params["head"] == "4"


def test_word_level_toggle_on_the_attention_page(minilm):
    at = opened(model="minilm", text=TEXT)
    at.toggle(key="attention_words").set_value(True).run()
    result = trace.run(minilm, TEXT, 128)
    groups = analysis.word_groups(result.source_word_ids)
    figure = charts(at)["attention_heatmap"]
    assert list(figure["layout"]["xaxis"]["ticktext"]) == analysis.merge_tokens(result.source_tokens, groups)
    assert "embeddings" in figure["layout"]["xaxis"]["ticktext"]
    link = starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)
    merged = analysis.merge_words(result.encoder_self.weights[link.layer, link.head], groups, groups)
    np.testing.assert_allclose(z(figure), merged, rtol=1e-6)
    # each token's row sums to 1 within softmax's sum over its n keys; the words regroup those terms and numpy adds the
    # drawn row's words again in float32: two more sums of at most n terms
    n = len(result.source_tokens)
    rows = z(figure).sum(-1)
    tolerance.assert_within(rows, np.ones_like(rows), tolerance.reordered(3 * n, 1.0), "word-level rows sum to 1")


def test_pretrained_beside_random_weights(minilm, minilm_random):
    at = opened("compare", model="minilm", text=TEXT, layer="2", head="7")
    figures = charts(at)
    ours = trace.run(minilm, TEXT, 128).encoder_self.weights
    random = trace.run(minilm_random, TEXT, 128).encoder_self.weights
    np.testing.assert_array_equal(z(figures["compare_minilm"]), ours[1, 6])
    np.testing.assert_array_equal(z(figures["compare_minilm-random"]), random[1, 6])
    assert not np.allclose(ours[1, 6], random[1, 6], atol=0.05)
    entropy = z(figures["compare_entropy_minilm-random"])
    assert entropy.shape == (6, 12) and entropy.mean() > z(figures["compare_entropy_minilm"]).mean()
    # which heads training changed most: per head the model's own max |pretrained - random|, every cell a link
    trained = figures["compare_trained"]
    np.testing.assert_array_equal(z(trained), np.abs(ours - random).max(axis=(-2, -1)))
    for key in ("compare_trained", "compare_entropy_minilm", "compare_entropy_minilm-random"):
        cells = figures[key]["data"][1]
        assert cells["meta"] == CLICKS and [list(c[:2]) for c in cells["customdata"]][13] == [1, 1]


def test_sentence_a_against_sentence_b_by_word(minilm):
    at = opened("compare_sentences")
    at.selectbox(key="compare_pair").set_value(0).run()
    a_text, b_text = MINIMAL_PAIRS[0]
    assert at.sidebar.text_area[0].value == a_text and at.text_input(key="compare_b").value == b_text
    at.radio(key="compare_align").set_value("word").run()
    at.selectbox(key="compare_layer").set_value(4).run()
    at.selectbox(key="compare_head").set_value(10).run()
    a, b = trace.run(minilm, a_text, 128), trace.run(minilm, b_text, 128)
    wa, la, _ = analysis.at_word_level(a, "encoder_self")
    wb, lb, _ = analysis.at_word_level(b, "encoder_self")
    alignment = compare.by_word(la, lb)
    assert "cat / cats" in alignment.labels and len(alignment.labels) == len(la)
    figures = charts(at)
    difference = figures["compare_difference"]
    np.testing.assert_allclose(z(difference), (wa - wb)[4, 10], atol=1e-7)
    assert difference["data"][0]["zmid"] == 0 and difference["data"][0]["zmin"] == -difference["data"][0]["zmax"]
    assert "cat / cats" in difference["layout"]["xaxis"]["ticktext"]
    np.testing.assert_allclose(z(figures["compare_changed"]), np.abs(wa - wb).max(axis=(-2, -1)), atol=1e-7)


def test_sentence_b_that_cannot_be_read_gets_a_message():
    at = opened("compare_sentences", model="reverse", text="alpha bravo")
    at.text_input(key="compare_b").set_value("alpha tree").run()
    assert not at.exception and "Sentence B" in at.info[0].value and "tree" in at.info[0].value


def test_reference_page_table_and_difference_heatmap(minilm):
    at = opened("reference", model="minilm", text=TEXT, layer="6", head="12")
    table = at.dataframe[0].value
    assert len(table) == 72 and table["max |ours - reference|"].max() <= 1e-5
    figure = charts(at)["reference_difference"]
    ours = trace.run(minilm, TEXT, 128).encoder_self.weights[5, 11].astype(np.float64)
    theirs = ours - z(figure)
    np.testing.assert_allclose(theirs, z(charts(at)["reference_theirs"]), atol=1e-12)
    assert figure["data"][0]["zmid"] == 0


def test_statistics_at_word_level_count_the_previous_word(minilm):
    at = opened("statistics", model="minilm", text=TEXT)
    at.toggle(key="stats_words").set_value(True).run()
    at.selectbox(key="stats_statistic").set_value("previous").run()
    result = trace.run(minilm, TEXT, 128)
    groups = analysis.word_groups(result.source_word_ids)
    merged = analysis.merge_words(result.encoder_self.weights, groups, groups)
    expected = analysis.head_statistics(merged, analysis.merge_tokens(result.source_tokens, groups))["previous"]
    np.testing.assert_allclose(z(charts(at)["stats_grid"]), expected, rtol=1e-6)
    assert charts(at)["stats_grid"]["layout"]["title"]["text"] == "Weight on previous token, every head"  # exports too
    at.button(key="stats_open").click().run()
    assert at.toggle(key="attention_words").value is True


def test_pretrained_beside_random_past_the_overview_length_draws_block_means(minilm, minilm_random):
    from attention_explorer.explorer.figures.model_view import pool  # noqa: PLC0415
    from bench.inputs import text_of  # noqa: PLC0415

    text = text_of(minilm, 300)
    at = opened("compare", model="minilm", text=text, layer="2", head="7")
    at.sidebar.number_input[0].set_value(300).run()
    assert not at.exception
    figures = charts(at)
    for key, loaded in (("minilm", minilm), ("minilm-random", minilm_random)):
        weights = trace.run(loaded, text, 300).encoder_self.weights[1, 6]
        np.testing.assert_allclose(z(figures[f"compare_{key}"]), pool(weights, 256), rtol=1e-6)
    assert "each cell averages 2 x 2 weights" in figures["compare_minilm"]["layout"]["title"]["text"]  # 300 = 150 x 2


def test_compare_sentences_with_an_encoder_decoder_draws_bs_encoder_from_its_own_run():
    at = opened("compare_sentences", model="reverse", text="alpha bravo charlie")
    at.text_input(key="compare_b").set_value("alpha bravo delta").run()
    assert not at.exception
    loaded = registry.load("reverse")
    a, b = trace.run(loaded, "alpha bravo charlie", 32), trace.run(loaded, "alpha bravo delta", 32)
    layer, head = at.selectbox(key="compare_layer").value, at.selectbox(key="compare_head").value
    figures = charts(at)
    np.testing.assert_array_equal(z(figures["compare_b_map"]), head_or_mean(b.encoder_self.weights, layer, head))
    a_weights, b_weights = a.encoder_self.weights, b.encoder_self.weights
    expected = head_or_mean(a_weights - b_weights, layer, head)
    # a head's difference is the same subtraction; the mean over heads of the differences against the difference of
    # the means: two sums over the heads in another order, relative to the magnitudes summed
    n_heads = a_weights.shape[1]
    magnitudes = head_or_mean(np.abs(a_weights) + np.abs(b_weights), layer, head)
    bound = tolerance.reordered(2 * n_heads, magnitudes) if head == -1 else 0.0
    tolerance.assert_within(z(figures["compare_difference"]), expected, bound, "A - B, one head or the mean")


TWENTY_WORDS = "the small cat sat on the warm mat and watched the big dog run across the green field every day"


@pytest.mark.parametrize(
    ("page", "maps"),
    [
        ("compare", ("compare_minilm", "compare_minilm-random")),
        ("compare_sentences", ("compare_a", "compare_b_map")),
        ("aggregation", ("aggregate_raw", "aggregate_rollout", "aggregate_flow")),
    ],
)
def test_twenty_words_name_every_key_on_the_side_by_side_maps(minilm, page, maps):
    """At 20 words (22 tokens with [CLS] and [SEP]) half the page has room for every other key's label only: the maps
    go one under another at full width, each key named by its own token (they thin only past ~40 tokens)."""
    assert len(TWENTY_WORDS.split()) == 20
    at = opened(page, model="minilm", text=TWENTY_WORDS)
    tokens = trace.run(minilm, TWENTY_WORDS, 128).source_tokens
    assert len(tokens) == 22
    if page == "compare_sentences":  # sentence B: the page's own twin of the sentence, as long
        b_tokens = trace.run(minilm, at.text_input(key="compare_b").value, 128).source_tokens
        assert len(b_tokens) > 20
    figures = charts(at)
    for key in maps:
        keys = b_tokens if key == "compare_b_map" else tokens
        axis = figures[key]["layout"]["xaxis"]
        assert list(axis["ticktext"]) == escape_tokens(keys), key
        assert len(axis["tickvals"]) == len(keys)
    # the maps are drawn full width, not in two columns
    in_columns = {c.key for column in at.columns for c in column.get("plotly_chart")}
    assert not in_columns & set(maps), page


@pytest.mark.parametrize("line_up", ["position", "word"])
def test_sentence_a_against_b_reads_a_long_texts_layers_one_at_a_time(minilm, monkeypatch, line_up):
    """With every run recomputing its layers and any read of every layer at once refused (as for a 2,048-token
    text), the page still draws A - B: the model's own numbers, a layer at a time."""
    from attention_explorer.explorer.run import layers

    monkeypatch.setattr(trace, "KEEP_ALL_BYTES", 0)
    monkeypatch.setattr(layers, "WHOLE_BYTES", 0)
    a_text, b_text = "The quiet river bends past the mill", "The quiet rivers bend past the mills"
    at = opened("compare_sentences", model="minilm", text=a_text)
    at.text_input(key="compare_b").set_value(b_text).run()
    at.radio(key="compare_align").set_value(line_up).run()
    at.selectbox(key="compare_layer").set_value(2).run()
    at.selectbox(key="compare_head").set_value(3).run()
    assert not at.exception
    monkeypatch.undo()  # the expected numbers, read whole
    a, b = trace.run(minilm, a_text, 128), trace.run(minilm, b_text, 128)
    if line_up == "word":
        wa, la, _ = analysis.at_word_level(a, "encoder_self")
        wb, lb, _ = analysis.at_word_level(b, "encoder_self")
        alignment = compare.by_word(la, lb)
    else:
        wa, wb = a.encoder_self.weights, b.encoder_self.weights
        alignment = compare.by_position(a.source_tokens, b.source_tokens)
    expected = compare.difference(np.asarray(wa), np.asarray(wb), alignment)
    np.testing.assert_allclose(z(charts(at)["compare_difference"]), expected[2, 3], atol=1e-7)
    np.testing.assert_allclose(z(charts(at)["compare_changed"]), np.abs(expected).max(axis=(-2, -1)), atol=1e-7)
