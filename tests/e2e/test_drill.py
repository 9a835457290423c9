"""Click to drill down in real Chromium: a cell that names a head or a token opens it, and the dropdowns follow."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from attention_explorer.models import registry
from bench.harness import TIMEOUT_MS, open_app, rerun, type_sentence
from bench.inputs import text_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# the page position of a data point of chart `index` (scrolled into view first), from Plotly's own axes
POINT = """([index, x, y]) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    plot.scrollIntoView({block: 'center'});
    const layout = plot._fullLayout, box = plot.getBoundingClientRect();
    const left = box.left + layout.xaxis._offset, top = box.top + layout.yaxis._offset;
    return [left + layout.xaxis.d2p(x), top + layout.yaxis.d2p(y)];
}"""
TARGETS = """(index) => {  // the click targets' x and y, once chart `index` has them
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    const t = plot && plot.data && plot.data.find(d => d.meta === 'click targets');
    return t ? [Array.from(t.x), Array.from(t.y)] : null;
}"""


def click_target(page, chart_index: int, target: int) -> None:
    """Click the cell of click target number `target` (row-major) of a chart, as a person would with the mouse."""
    handle = page.wait_for_function(TARGETS, arg=chart_index, timeout=TIMEOUT_MS)
    xs, ys = handle.json_value()
    x, y = page.evaluate(POINT, [chart_index, xs[target], ys[target]])
    page.mouse.move(x, y)
    page.mouse.click(x, y)


ROWS = """([index, n]) => {  // the heatmap's key and query names, once chart `index` has a click target a row
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    const t = plot && plot.data && plot.data.find(d => d.meta === 'click targets');
    return t && t.y.length === n ? [Array.from(plot.data[0].x), Array.from(plot.data[0].y)] : null;
}"""
HOVER = """([index, row, col]) => {  // the hover label's text and the weight drawn in that cell, once shown
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    const label = plot.querySelector('.hoverlayer .hovertext');
    return label ? [label.textContent, plot.calcdata[0][0].z[row][col]] : null;
}"""


def picker(page, label: str):
    """The selectbox labelled exactly `label` (its value is the chosen option's text)."""
    return page.get_by_role("combobox", name=label, exact=True)


def expect_head(page, layer: int, head: int) -> None:
    """The page's Layer and Head dropdowns show this head (numbered from 1, as shown)."""
    expect(picker(page, "Layer")).to_have_value(f"layer {layer}", timeout=TIMEOUT_MS)
    expect(picker(page, "Head")).to_have_value(f"head {head}", timeout=TIMEOUT_MS)


def test_model_view_thumbnail_opens_that_head_and_the_heatmap(server, page):
    open_app(page, f"{server}/model_view?layer=4")  # the grid's window of layers 4-6 (MiniLM's 6 are drawn 3 at a time)
    with rerun(page):
        click_target(page, 0, 0 * 12 + 6)  # the window's first row: layer 4, head 7
    expect_head(page, 4, 7)
    expect(page.get_by_role("heading", name="Layer 4, head 7 at full resolution")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Open in the attention heatmap").click()
    page.get_by_role("heading", name="Attention heatmap").wait_for(timeout=TIMEOUT_MS)
    expect_head(page, 4, 7)


def test_statistics_cell_opens_that_head_on_the_heatmap(server, page):
    open_app(page, f"{server}/statistics")
    click_target(page, 0, 1 * 12 + 4)  # layer 2, head 5
    page.get_by_role("heading", name="Attention heatmap").wait_for(timeout=TIMEOUT_MS)
    expect_head(page, 2, 5)
    expect(page.locator(".js-plotly-plot .gtitle").first).to_have_text("Layer 2, head 5", timeout=TIMEOUT_MS)


def test_heatmap_row_opens_that_query_on_the_qkv_page(server, page):
    open_app(page, f"{server}/attention")  # the example sentence: 16 tokens, so every cell is a click target
    click_target(page, 0, 10 * 16 + 2)  # row 10 ("it"), any column of it
    page.get_by_role("heading", name="Q, K, V step by step").wait_for(timeout=TIMEOUT_MS)
    expect(picker(page, "Query token")).to_have_value("10: it", timeout=TIMEOUT_MS)


def test_compare_cell_opens_that_head_in_the_detail(server, page):
    open_app(page, f"{server}/compare_sentences")
    with rerun(page):
        click_target(page, 0, 4 * 12 + 10)  # layer 5, head 11
    expect_head(page, 5, 11)
    expect(page.locator(".js-plotly-plot .gtitle").nth(1)).to_have_text(
        re.compile("layer 5, head 11"), timeout=TIMEOUT_MS
    )


def test_heatmap_row_opens_that_query_at_128_tokens(server, page):
    """Past 64 tokens one click target a row (figures.clicks.row_targets): the hover still names the cell under the
    pointer, and a click anywhere on the row opens that query on the Q/K/V page."""
    n, row = 128, 37
    open_app(page, f"{server}/attention")
    type_sentence(page, text_of(registry.load("minilm"), n))  # the default max tokens is 128
    keys, queries = page.wait_for_function(ROWS, arg=[0, n], timeout=TIMEOUT_MS).json_value()
    assert "&" not in queries[row]  # a plain word: its label reads the same in the query picker
    x, y = page.evaluate(POINT, [0, keys[90], queries[row]])
    page.mouse.move(x, y)
    text, weight = page.wait_for_function(HOVER, arg=[0, row, 90], timeout=TIMEOUT_MS).json_value()
    assert f"query {queries[row]}" in text and f"key {keys[90]}" in text and f"weight {weight:.4f}" in text
    x, y = page.evaluate(POINT, [0, keys[3], queries[row]])  # another cell of the same row
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.get_by_role("heading", name="Q, K, V step by step").wait_for(timeout=TIMEOUT_MS)
    expect(picker(page, "Query token")).to_have_value(queries[row], timeout=TIMEOUT_MS)


def test_compare_weights_cell_opens_that_head_in_the_detail(server, page):
    open_app(page, f"{server}/compare")  # charts: which heads training changed most, the pair, two entropy grids
    with rerun(page):
        click_target(page, 0, 2 * 12 + 8)  # layer 3, head 9
    expect_head(page, 3, 9)
    expect(page.locator(".js-plotly-plot .gtitle").filter(has_text="Pretrained:").first).to_have_text(
        re.compile("layer 3, head 9"), timeout=TIMEOUT_MS
    )  # the detail's first map (the grid above it has a title of its own)
    with rerun(page):
        click_target(page, 4, 5 * 12 + 1)  # the random weights' entropy grid: layer 6, head 2
    expect_head(page, 6, 2)
