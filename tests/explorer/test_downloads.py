"""A figure's downloads hold the figure's own numbers and the literal tokens, and open offline."""

from __future__ import annotations

import csv
import io
import json
import re
import struct

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer import downloads
from explorer.figures.heatmap import head_heatmap
from explorer.figures.walkthrough import per_key_bars

TOKENS = ["[CLS]", "<b>x</b>", "&amp;", "[SEP]"]


def figure():
    weights = np.random.default_rng(1).random((4, 4)).astype(np.float32)
    weights /= weights.sum(-1, keepdims=True)
    return head_heatmap(weights, TOKENS, TOKENS, "<i>title</i>"), weights


def test_json_holds_the_drawn_numbers_and_literal_tokens():
    fig, weights = figure()
    doc = json.loads(downloads.to_json(fig))
    assert doc["title"] == "<i>title</i>"
    (trace,) = doc["traces"]
    assert trace["type"] == "heatmap"
    assert trace["x"] == ["0: [CLS]", "1: <b>x</b>", "2: &amp;", "3: [SEP]"]
    np.testing.assert_array_equal(np.array(trace["z"], dtype=np.float32), weights)


def test_csv_has_one_row_per_cell():
    fig, weights = figure()
    rows = list(csv.reader(io.StringIO(downloads.to_csv(fig))))
    assert rows[0] == ["trace", "row", "column", "value"]
    assert len(rows) == 1 + 16
    by_cell = {(r[1], r[2]): float(r[3]) for r in rows[1:]}
    assert by_cell[("1: <b>x</b>", "2: &amp;")] == float(weights[1, 2])


def test_csv_of_a_bar_chart_lists_x_and_y():
    fig = per_key_bars(np.array([0.25, 0.75], dtype=np.float32), ["a", "<br>"], "weights")
    rows = list(csv.reader(io.StringIO(downloads.to_csv(fig))))
    assert rows[0] == ["trace", "x", "y"]
    assert rows[1:] == [["weights", "0: a", "0.25"], ["weights", "1: <br>", "0.75"]]


def test_html_embeds_plotly_js_and_needs_no_network():
    fig, _ = figure()
    page = downloads.to_html(fig)
    assert "<html>" in page[:100] and len(page) > 1_000_000  # plotly.js itself is inside
    assert not re.search(r"<script[^>]*\bsrc=", page)  # every script inline: nothing to fetch


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.skipif(downloads.chromium() is None, reason="no Chromium for kaleido")
def test_png_is_drawn_by_the_system_chromium():
    fig, _ = figure()
    width, height = png_size(downloads.to_png(fig))
    assert (width, height) == (900 * downloads.PNG_SCALE, fig.layout.height * downloads.PNG_SCALE)


def test_exports_draw_with_plotlys_template_not_streamlits_placeholders():
    import plotly.io as pio
    import streamlit  # noqa: F401 -- as in the app: importing it makes its chart theme Plotly's default

    from explorer.downloads import as_drawn

    assert pio.templates.default == "streamlit"
    figure = go.Figure(go.Scatter(y=[1, 2]))
    assert figure.layout.template.layout.colorway[0] == "#000001"  # filled in by the browser's theme only
    drawn = as_drawn(figure)
    assert drawn.layout.template.layout.colorway == pio.templates["plotly"].layout.colorway
    assert "#000001" not in downloads.to_html(figure)
