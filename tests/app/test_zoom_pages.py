"""Long maps through app.py, with the threshold forced small so MiniLM's sentences are long: the overview draws the
block means of the model's weights and names their true factor, the region is the weights' own slice, and the model
view's thumbnails are block means reduced one layer at a time."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.figures.model_view import grid, layer_window, thumbnail_px
from attention_explorer.explorer.run import blocks, starting, trace
from tests import tolerance
from tests.app import new_app, stepping
from tests.figdata import array, spec


@pytest.fixture
def small(monkeypatch):
    """Past 8 tokens a side a map is long: 4 x 4 overview cells, regions of 4, 8 or 16 positions a side."""
    monkeypatch.setattr(zoom, "FULL", 8)
    monkeypatch.setattr(zoom, "OVERVIEW_CELLS", 4)
    monkeypatch.setattr(zoom, "CLICK_TILES", 4)
    monkeypatch.setattr(zoom, "REGION_SIZES", (4, 8, 16))
    monkeypatch.setattr(zoom, "REGION", 4)


def charts(at: AppTest) -> dict[str, dict]:
    return {c.key: spec(c) for c in at.get("plotly_chart")}


def z(figure: dict) -> np.ndarray:
    return array(figure["data"][0]["z"])


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def test_a_long_head_is_an_overview_of_its_block_means_and_a_region_at_full_resolution(small, minilm):
    at = new_app("attention").run()
    assert not at.exception
    result = trace.run(minilm, state.DEFAULT_TEXT, state.DEFAULT_MAX_TOKENS)
    n, weights = len(result.source_tokens), result.encoder_self.weights
    assert n == 15  # 4 cells of 4 positions a side, the last of 3
    link = starting.best_link(weights, result.source_tokens, result.source_tokens)
    layer, head = at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value
    assert (layer, head) == (link.layer, link.head)
    figures = charts(at)
    np.testing.assert_array_equal(
        z(figures["attention_heatmap_overview"]), blocks.block_means(weights[layer, head], 4, 4)
    )
    # the app's float64 sum of the cell's 16 weights against numpy's float32 mean: two orders of a 16-term sum
    cell = weights[layer, head, 4:8, 8:12].mean()
    drawn = z(figures["attention_heatmap_overview"])[1, 2]
    tolerance.assert_within(drawn, cell, tolerance.reordered(16, cell), "an overview cell, the mean of 4 x 4 weights")
    assert "Each cell averages 4 x 4 weights: the mean of the attention weights of 4 queries x 4 keys" in captions(at)
    assert "(the last row and column of cells average fewer)" in captions(at)
    # the region opens on the sentence's starting link, at full resolution
    region = zoom.region_around(n, n, link.query, link.key, 4)
    assert link.query in region.queries and link.key in region.keys
    q, k = region.queries, region.keys
    np.testing.assert_array_equal(
        z(figures["attention_heatmap"]), weights[layer, head, q.start : q.stop, k.start : k.stop]
    )

    at.selectbox(key="attention_heatmap_zoom_query").set_value(12).run()
    at.selectbox(key="attention_heatmap_zoom_key").set_value(1).run()
    at.selectbox(key="attention_heatmap_zoom_size").set_value(8).run()
    assert not at.exception
    region = charts(at)["attention_heatmap"]
    np.testing.assert_array_equal(z(region), weights[layer, head, 7:15, 0:8])  # moved in from the ends, not cut
    assert region["layout"]["title"]["text"].endswith("queries 7-14, keys 0-7")
    assert list(region["data"][0]["y"])[0] == f"7: {result.source_tokens[7]}"
    outline = charts(at)["attention_heatmap_overview"]["layout"]["shapes"][0]
    assert (outline["x0"], outline["x1"], outline["y0"], outline["y1"]) == (-0.5, 7.5, 6.5, 14.5)

    at.selectbox(key="attention_head").set_value((head + 1) % 12).run()  # another head: the same region of it
    np.testing.assert_array_equal(z(charts(at)["attention_heatmap"]), weights[layer, (head + 1) % 12, 7:15, 0:8])


def test_the_mean_over_heads_is_zoomed_as_a_head_is(small, minilm):
    at = new_app("attention").run()
    at.selectbox(key="attention_layer").set_value(1).run()
    at.selectbox(key="attention_head").set_value(-1).run()
    mean = trace.run(minilm, state.DEFAULT_TEXT, state.DEFAULT_MAX_TOKENS).encoder_self.weights[1].mean(0)
    figures = charts(at)
    expected = blocks.block_means(mean, 4, 4)
    # the mean over 12 heads summed in any order (reordered); a cell's mean of non-negative weights keeps that relative
    # bound, plus its own rounding to float32 (one more term)
    bound = tolerance.reordered(12 + 1, expected)
    drawn = z(figures["attention_heatmap_overview"])
    tolerance.assert_within(drawn, expected, bound, "overview of the mean over heads")


def test_the_model_view_says_how_many_weights_a_thumbnail_cell_averages(small, minilm):
    from bench.inputs import text_of  # noqa: PLC0415

    text = text_of(minilm, 100)  # 100 tokens: thumbnails of 25 x 25 cells, 4 x 4 weights each
    at = new_app("model_view").run()
    at.sidebar.number_input[0].set_value(100).run()
    at.sidebar.text_area[0].set_value(text).run()
    at.selectbox(key="qkv_layer").set_value(4).run()
    at.selectbox(key="qkv_head").set_value(2).run()
    assert not at.exception
    weights = trace.run(minilm, text, 100).encoder_self.weights
    window = layer_window(6, 4, thumbnail_px(12))
    expected = blocks.every_layer(weights[i] for i in window)
    drawn, pooled = z(charts(at)["model_grid"]), grid(weights[window.start : window.stop], 32)
    np.testing.assert_array_equal(np.isnan(drawn), np.isnan(pooled))  # the gutters between thumbnails
    cells = ~np.isnan(pooled)
    # the run sums each cell's 16 weights in another order than blocks.block_means (reordered(16)), and so each
    # thumbnail's peak that the grid divides by (16 more), plus the division's rounding
    bound = tolerance.reordered(2 * 16 + 1, pooled[cells])
    tolerance.assert_within(drawn[cells], pooled[cells], bound, "model view thumbnails, 4 x 4 weights a cell")
    cell = weights[window.start, 0, 12:16, 20:24].mean()  # numpy's float32 mean against a float64 sum: 16 terms
    tolerance.assert_within(expected[0, 0, 3, 5], cell, tolerance.reordered(16, cell), "a thumbnail cell")
    assert "Each thumbnail is 25 x 25 cells and each cell averages 4 x 4 weights (their mean)" in captions(at)
    # the chosen head at full resolution: past the (forced) threshold, its overview and a region of it
    figures = charts(at)
    f = blocks.factor(100, 4)
    np.testing.assert_array_equal(z(figures["model_selected_overview"]), blocks.block_means(weights[4, 2], f, f))
    region = figures["model_selected"]
    first_query, first_key = (
        int(label.split(":")[0]) for label in (region["data"][0]["y"][0], region["data"][0]["x"][0])
    )
    np.testing.assert_array_equal(z(region), weights[4, 2, first_query : first_query + 4, first_key : first_key + 4])


def test_the_model_view_at_the_default_length_draws_every_weight(minilm):
    at = new_app("model_view").run()
    assert not at.exception
    assert "Each thumbnail draws every weight of its head" in captions(at)
    assert "model_selected_overview" not in charts(at)  # 15 tokens: the head drawn whole, as before


INDUCTION = "kilo seven zulu echo two mike kilo seven zulu echo two mike"


def opened(page: str, model: str, text: str) -> AppTest:
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    return at.run()


def test_a_long_moved_map_draws_its_pair_as_block_means_and_zooms_its_difference(small):
    from attention_explorer.explorer.experiments import ablate  # noqa: PLC0415
    from attention_explorer.models import registry  # noqa: PLC0415
    from attention_explorer.models.ablation import Head  # noqa: PLC0415

    at = opened("ablation", "induction", INDUCTION)
    at.multiselect(key="ablation_heads").set_value(["1.1", "1.2", "1.3", "1.4"]).run()  # layer 1 off: layer 2 moves
    assert not at.exception
    loaded = registry.load("induction")
    clean = trace.run(loaded, INDUCTION, loaded.max_tokens)
    found = ablate.outcome(loaded, clean, [Head("decoder_self", 0, h) for h in range(4)], "zero")
    layer, head = np.unravel_index(np.argmax(found.moved["decoder_self"]), (2, 4))
    before = clean.attention("decoder_self").weights[layer, head]
    after = found.weights["decoder_self"][layer, head]
    n = len(before)
    f = blocks.factor(n, 4)
    figures = charts(at)
    np.testing.assert_allclose(z(figures["ablation_map_before"]), blocks.block_means(before, f, f), rtol=1e-6)
    np.testing.assert_allclose(z(figures["ablation_map_after"]), blocks.block_means(after, f, f), rtol=1e-6)
    moved = after - before
    np.testing.assert_allclose(z(figures["ablation_moved_map_overview"]), blocks.block_means(moved, f, f), atol=1e-7)
    # the region opens on the cell that moved most, at full resolution
    query, key = np.unravel_index(np.argmax(np.abs(moved)), moved.shape)
    region = zoom.region_around(n, n, int(query), int(key), 4)
    q, k = region.queries, region.keys
    np.testing.assert_allclose(z(figures["ablation_moved_map"]), moved[q.start : q.stop, k.start : k.stop], atol=1e-7)


def test_decoding_a_long_text_outlines_the_step_on_the_overview_and_in_the_region(small):
    from attention_explorer.models import registry  # noqa: PLC0415

    at = stepping(opened("decoding", "induction", INDUCTION))
    at.select_slider(key="decoding_position").set_value(1).run()  # a decoder-only text opens on its end
    for _ in range(5):
        at.button(key="decoding_next").click().run()
    assert not at.exception
    loaded = registry.load("induction")
    weights = trace.run(loaded, INDUCTION, loaded.max_tokens).decoder_self.weights
    index = 5  # the sixth position
    figures = charts(at)
    overview, region = figures["decoding_self_all_overview"], figures["decoding_self_all"]
    row = overview["layout"]["shapes"][-1]
    assert (row["y0"], row["y1"]) == (index - 0.5, index + 0.5)  # the step's row across every key
    first = int(region["data"][0]["y"][0].split(":")[0])
    assert first <= index < first + 4
    (outline,) = region["layout"]["shapes"]
    assert (outline["y0"], outline["y1"]) == (index - first - 0.5, index - first + 0.5)
    layer, head = at.selectbox(key="decoding_layer").value, at.selectbox(key="decoding_head").value
    drawn = weights[layer].mean(0) if head == -1 else weights[layer, head]
    first_key = int(region["data"][0]["x"][0].split(":")[0])
    expected = drawn[first : first + 4, first_key : first_key + 4]
    # a head's weights are drawn as they are; the mean over heads is summed in any order (reordered over the heads)
    bound = tolerance.reordered(weights.shape[1], expected) if head == -1 else 0.0
    tolerance.assert_within(z(region), expected, bound, "the decoding region")
