"""A copied address keeps the attention kind: translate's cross-attention, a head and a query, in a new browser."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from attention_explorer.models import tasks
from bench.harness import TIMEOUT_MS, new_page, open_app, rerun, wait_for_tokens

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CROSS = "Encoder-decoder (cross) attention"
SOURCE = [*tasks.get("translate").example.split(), "<eos>"]  # cross-attention's keys: the source sentence
HEATMAP_Z = "() => JSON.stringify(document.querySelectorAll('.js-plotly-plot')[0].data[0].z)"
QKV_WEIGHTS = """() => {  // the softmax weights bar chart, once drawn
    const plot = document.querySelector('.st-key-qkv_weights .js-plotly-plot');
    return plot && plot.data ? JSON.stringify(plot.data[0].y) : null;
}"""
# the page position of the first click target naming query `row` (its customdata[0]) on chart `index`, from
# Plotly's own axes (the targets sit on category labels such as '1: la')
ROW_POINT = """([index, row]) => {
    const plot = document.querySelectorAll('.js-plotly-plot')[index];
    const t = plot && plot.data && plot.data.find(d => d.meta === 'click targets');
    const i = t ? Array.from(t.customdata).findIndex(c => c && c[0] === row) : -1;
    if (i < 0) return null;
    plot.scrollIntoView({block: 'center'});
    const layout = plot._fullLayout, box = plot.getBoundingClientRect();
    return [box.left + layout.xaxis._offset + layout.xaxis.d2p(t.x[i]),
            box.top + layout.yaxis._offset + layout.yaxis.d2p(t.y[i])];
}"""


def picker(page, label: str):
    return page.get_by_role("combobox", name=label, exact=True)


def shows(page, layer: int, head: int) -> None:
    """Cross-attention picked, and the Layer and Head dropdowns on this head (numbered from 1, as shown)."""
    expect(page.get_by_role("radio", name=CROSS, exact=True)).to_be_checked(timeout=TIMEOUT_MS)
    expect(picker(page, "Layer")).to_have_value(f"layer {layer}", timeout=TIMEOUT_MS)
    expect(picker(page, "Head")).to_have_value(f"head {head}", timeout=TIMEOUT_MS)


def test_a_copied_address_keeps_cross_attention_its_head_and_token(server, browser, page):
    open_app(page, f"{server}/attention?model=translate")
    wait_for_tokens(page, SOURCE)
    shows(page, 2, 4)  # a model trained here opens on its alignment: the last layer's cross-attention
    page.get_by_test_id("stSelectbox").filter(has=picker(page, "Head")).click()
    with rerun(page):
        page.get_by_role("option", name="head 3", exact=True).click()
    page.wait_for_function("() => location.search.includes('head=3')", timeout=TIMEOUT_MS)
    heatmap = page.url
    assert "/attention?" in heatmap and "kind=cross" in heatmap and "layer=2" in heatmap
    drawn = page.evaluate(HEATMAP_Z)

    point = page.wait_for_function(ROW_POINT, arg=[0, 1], timeout=TIMEOUT_MS).json_value()
    page.mouse.move(*point)
    with rerun(page):
        page.mouse.click(*point)  # query row 1 opens on the Q/K/V page, with this kind, layer and head
    page.get_by_role("heading", name="Q, K, V step by step").wait_for(timeout=TIMEOUT_MS)
    expect(picker(page, "Query token")).to_have_value("1: la", timeout=TIMEOUT_MS)
    page.wait_for_function("() => location.search.includes('token=1')", timeout=TIMEOUT_MS)
    qkv = page.url
    assert all(part in qkv for part in ("/qkv?", "kind=cross", "layer=2", "head=3", "token=1"))
    weights = page.wait_for_function(QKV_WEIGHTS, timeout=TIMEOUT_MS).json_value()

    other = new_page(browser)  # a fresh context: no cookies, no session, a new person
    try:
        open_app(other, heatmap)
        wait_for_tokens(other, SOURCE)
        shows(other, 2, 3)
        expect(other.locator(".js-plotly-plot .gtitle").first).to_have_text("Layer 2, head 3", timeout=TIMEOUT_MS)
        assert other.evaluate(HEATMAP_Z) == drawn
        assert other.get_by_test_id("stAlert").count() == 0

        open_app(other, qkv)
        other.get_by_role("heading", name="Q, K, V step by step").wait_for(timeout=TIMEOUT_MS)
        shows(other, 2, 3)
        expect(picker(other, "Query token")).to_have_value("1: la", timeout=TIMEOUT_MS)
        assert other.wait_for_function(QKV_WEIGHTS, timeout=TIMEOUT_MS).json_value() == weights
    finally:
        other.context.close()


def test_a_copied_decoding_address_reopens_on_its_output_position(server, browser, page):
    open_app(page, f"{server}/decoding?model=translate")  # on its own example sentence
    for _ in range(2):
        with rerun(page):
            page.get_by_role("button", name="Next ▶").click()
    page.get_by_text("Output word 3 of 11: reads '2: reine'").first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("() => location.search.includes('position=2')", timeout=TIMEOUT_MS)
    other = new_page(browser)  # a fresh context: a new person opening the copied address
    try:
        open_app(other, page.url)
        other.get_by_text("Output word 3 of 11: reads '2: reine'").first.wait_for(timeout=TIMEOUT_MS)
        assert other.get_by_test_id("stException").count() == 0
    finally:
        other.context.close()
