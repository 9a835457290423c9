"""A copied address restores the view in a fresh browser; downloads are valid PNG, SVG, PDF, HTML, CSV and JSON
files."""

from __future__ import annotations

import csv
import io
import json
import re
import struct

import numpy as np
import pytest

from attention_explorer.explorer.app.downloads import PNG_SCALE
from bench import harness
from bench.harness import TIMEOUT_MS, new_page, open_app, rerun, tick_labels, wait_for_tokens
from tests import tolerance
from tests.e2e.conftest import heading, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SENTENCE = "Hello <b>world</b> & you"
TOKENS = ["[CLS]", "hello", "<", "b", ">", "world", "<", "/", "b", ">", "&", "you", "[SEP]"]
DRAWN_Z = "() => JSON.stringify(document.querySelectorAll('.js-plotly-plot')[0].data[0].z)"


def pick(page, index: int, option: str) -> None:
    page.get_by_test_id("stMain").get_by_test_id("stSelectbox").nth(index).click()
    with rerun(page):
        page.get_by_role("option", name=option, exact=True).click()


def test_a_copied_address_shows_the_same_view_in_a_new_browser(server, browser, page):
    open_app(page, server)
    harness.open_page(page, "8. The stack: every layer and head")
    page.get_by_role("heading", name=heading("model_view")).wait_for(timeout=TIMEOUT_MS)
    box = harness.sentence_box(page)
    box.fill(SENTENCE)
    with rerun(page):
        box.press(harness.RUN_KEY)
    pick(page, 0, "layer 4")
    pick(page, 1, "head 9")
    wait_for_tokens(page, TOKENS, chart_index=1)
    page.wait_for_function("() => location.search.includes('head=9')", timeout=TIMEOUT_MS)
    address = page.url
    assert "/model_view?" in address and "layer=4" in address and "model=minilm" in address
    drawn = page.evaluate("() => JSON.stringify(document.querySelectorAll('.js-plotly-plot')[1].data[0].z)")

    other = new_page(browser)  # a fresh context: no cookies, no session, a new person
    try:
        open_app(other, address)
        other.get_by_role("heading", name=heading("model_view")).wait_for(timeout=TIMEOUT_MS)
        wait_for_tokens(other, TOKENS, chart_index=1)
        assert harness.sentence_box(other).input_value() == SENTENCE
        other.get_by_role("heading", name="Layer 4, head 9 at full resolution").wait_for(timeout=TIMEOUT_MS)
        assert tick_labels(other, 1) == TOKENS  # literal: no bold, no tag swallowed
        assert (
            other.evaluate("() => JSON.stringify(document.querySelectorAll('.js-plotly-plot')[1].data[0].z)") == drawn
        )
        assert other.get_by_test_id("stAlert").count() == 0
        screenshot(other, "shared_address")

        open_app(other, address.split("?")[0] + "?model=nope&layer=77&text=Hi")
        wait_for_tokens(other, ["[CLS]", "hi", "[SEP]"], chart_index=1)
        alerts = " ".join(other.get_by_test_id("stAlert").all_text_contents())
        assert "unknown model 'nope'" in alerts and "layer 77" in alerts
        assert tick_labels(other, 1) == ["[CLS]", "hi", "[SEP]"]
    finally:
        other.context.close()


def download(page, key: str, label: str, tmp_path) -> tuple[str, bytes]:
    page.locator(f".st-key-{key}_download button").first.click()
    button = page.get_by_test_id("stDownloadButton").filter(has_text=label).locator("button")
    button.first.wait_for(state="visible", timeout=TIMEOUT_MS)
    with page.expect_download() as event:
        button.first.click()
    path = tmp_path / event.value.suggested_filename
    event.value.save_as(path)
    page.keyboard.press("Escape")
    return event.value.suggested_filename, path.read_bytes()


def test_downloads_are_valid_files_holding_the_drawn_numbers(server, page, tmp_path):
    open_app(page, f"{server}/attention?model=minilm&text={SENTENCE.replace('&', '%26')}&layer=2&head=3")
    wait_for_tokens(page, TOKENS)
    n = len(TOKENS)

    name, png = download(page, "attention_heatmap", "PNG", tmp_path)
    assert re.fullmatch(r"attention-heatmap_minilm_encoder-self-attention_layer-2_head-3_[a-z0-9-]+\.png", name)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 900 and height >= 600

    svg_name, svg = download(page, "attention_heatmap", "SVG", tmp_path)  # the PNG's figure, as vectors
    assert svg_name == name[:-3] + "svg" and svg.startswith(b"<svg") and b"Layer 2, head 3" in svg
    size = re.search(rb'width="(\d+)" height="(\d+)"', svg).groups()
    assert tuple(map(int, size)) == (width // PNG_SCALE, height // PNG_SCALE)
    pdf_name, pdf = download(page, "attention_heatmap", "PDF", tmp_path)
    assert pdf_name == name[:-3] + "pdf" and pdf.startswith(b"%PDF-") and len(re.findall(rb"/Type\s*/Page\b", pdf)) == 1

    name, page_html = download(page, "attention_heatmap", "HTML (offline)", tmp_path)
    text = page_html.decode()
    assert name.endswith(".html") and "<html>" in text[:100] and "Plotly.newPlot" in text and len(text) > 1_000_000

    _, csv_bytes = download(page, "attention_heatmap", "CSV", tmp_path)
    rows = list(csv.reader(io.StringIO(csv_bytes.decode())))
    assert rows[0] == ["series", "query (attending)", "key (attended to)", "weight"] and len(rows) == 1 + n * n
    assert rows[1 + 2 * n + 3][1:3] == ["2: <", "3: b"]  # literal tokens, not &lt;

    _, json_bytes = download(page, "attention_heatmap", "JSON", tmp_path)
    doc = json.loads(json_bytes)
    z = np.array(doc["traces"][0]["z"])
    assert doc["title"] == "Layer 2, head 3" and z.shape == (n, n)
    assert doc["model"] == "minilm" and doc["view"] == ["encoder self-attention", "layer 2", "head 3"]
    # softmax's float32 sum over the n keys and its division (reordered); the float64 sum here adds next to nothing
    sums = z.sum(-1)
    tolerance.assert_within(sums, np.ones_like(sums), tolerance.reordered(n + 1, 1.0), "exported rows sum to 1")
    np.testing.assert_array_equal(z.ravel(), np.array([float(r[3]) for r in rows[1:]]))
    assert doc["traces"][0]["x"][10] == "10: &"
