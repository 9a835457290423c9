"""A figure's downloads hold the figure's own numbers and the literal tokens, and open offline."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import struct
from xml.etree import ElementTree

import numpy as np
import plotly.graph_objects as go
import pytest

from attention_explorer.explorer.app import downloads
from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.experiments import head_grids
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.model_view import layer_heads
from attention_explorer.explorer.figures.walkthrough import per_key_bars, vector_strip

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
    assert rows[0] == ["series", "query (attending)", "key (attended to)", "weight"]  # named for what they hold
    assert {r[0] for r in rows[1:]} == {"title"}  # the series is the figure's title as text, not "trace 1"
    assert len(rows) == 1 + 16
    by_cell = {(r[1], r[2]): float(r[3]) for r in rows[1:]}
    assert by_cell[("1: <b>x</b>", "2: &amp;")] == float(weights[1, 2])


def test_csv_of_a_bar_chart_lists_x_and_y():
    fig = per_key_bars(np.array([0.25, 0.75], dtype=np.float32), ["a", "<br>"], "weights")
    rows = list(csv.reader(io.StringIO(downloads.to_csv(fig))))
    assert rows[0] == ["series", "token", "weights"]
    assert rows[1:] == [["weights", "0: a", "0.25"], ["weights", "1: <br>", "0.75"]]


def test_csv_of_a_grid_of_subplots_names_each_series_by_its_subplot():
    grids = {"encoder_self": np.ones((2, 2)), "cross": np.zeros((2, 2))}
    rows = list(csv.reader(io.StringIO(downloads.to_csv(head_grids(grids, "change")))))
    assert rows[0] == ["series", "layer", "head", "change"]  # untitled axes named by their labels' word
    assert {r[0] for r in rows[1:]} == {"encoder self-attention", "cross-attention"}


def test_csv_of_a_strip_names_its_positional_columns_by_the_axis_title():
    rows = list(csv.reader(io.StringIO(downloads.to_csv(vector_strip(np.eye(2, 3), ["a", "b"], "K")))))
    assert rows[0] == ["series", "token", "dimension", "value"]
    assert rows[1:4] == [["K", "0: a", "0", "1.0"], ["K", "0: a", "1", "0.0"], ["K", "0: a", "2", "0.0"]]


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
    _, titled_height = png_size(downloads.to_png(fig, ABOUT))  # the title's second line adds room, not squeezes
    assert titled_height == (fig.layout.height + downloads.SUBTITLE_PX) * downloads.PNG_SCALE


def test_exports_draw_with_the_screens_theme_not_streamlits_placeholders():
    import plotly.io as pio
    import streamlit  # noqa: F401 -- as in the app: importing it makes its chart theme Plotly's default

    assert pio.templates.default == "streamlit"
    figure = go.Figure(go.Scatter(y=[1, 2]))
    assert figure.layout.template.layout.colorway[0] == "#000001"  # filled in by the browser's theme only
    drawn = downloads.as_drawn(figure)
    # the app's colour-blind-safe palette (figures.style), which styled() gives every figure on screen too
    assert drawn.layout.template.layout.colorway == tuple(style.CATEGORICAL)
    assert "#000001" not in downloads.to_html(figure)


def test_exports_are_white_with_no_grid_through_heatmap_cells():
    fig, _ = figure()
    fig.update_layout(yaxis_showgrid=True)  # even a grid the figure asked for: it would cross the cells
    drawn = downloads.as_drawn(fig).full_figure_for_development(warn=False)
    assert drawn.layout.paper_bgcolor == drawn.layout.plot_bgcolor == "white"
    assert drawn.layout.xaxis.showgrid is False and drawn.layout.yaxis.showgrid is False
    assert drawn.layout.font.family == downloads.STREAMLIT_FONT
    assert (drawn.layout.title.font.size, drawn.layout.title.font.weight) == (16, "bold")  # Streamlit's bold heading
    assert drawn.data[0].colorscale == fig.data[0].colorscale  # the figure's own scale, as on screen
    bars = downloads.as_drawn(per_key_bars(np.array([0.5, 0.5], dtype=np.float32), ["a", "b"], "w"))
    assert bars.full_figure_for_development(warn=False).layout.plot_bgcolor == "white"


ABOUT = downloads.About(
    model="minilm",
    model_title="MiniLM <b>(pretrained)</b>",
    sentence="The  <script>x</script> animal didn't cross the street because it was far too tired to go on at all",
    view=("cross-attention", "layer 2", "head 3"),
)


def test_the_title_says_model_view_and_sentence_escaped_and_shortened():
    fig, _ = figure()
    title = downloads.as_drawn(fig, ABOUT).layout.title
    grids = downloads.as_drawn(head_grids({"cross": np.ones((2, 2))}, "change"), ABOUT).layout.title
    assert grids.pad.b > title.pad.b  # room for the subplot titles under the second line
    assert title.text == "<i>title</i>"  # the figure's own title stays
    line = title.subtitle.text
    assert line.startswith("MiniLM &lt;b&gt;(pretrained)&lt;/b&gt; · cross-attention · layer 2 · head 3 · “The ")
    assert "<script>" not in line and "&lt;script&gt;" in line
    assert line.endswith("…”") and len(html.unescape(line)) < 140  # the sentence cut at a word
    page = downloads.to_html(fig, ABOUT)
    assert "head 3" in page and "<script>x</script>" not in page


def test_a_figure_without_a_title_gets_the_one_the_page_gives():
    about = downloads.About(model="minilm", model_title="MiniLM", sentence="a b", view=("layer 1",), title="All heads")
    drawn = downloads.as_drawn(layer_heads(np.ones((2, 3, 3), dtype=np.float32)), about)
    assert drawn.layout.title.text == "All heads" and drawn.layout.title.subtitle.text == "MiniLM · layer 1 · “a b”"
    assert json.loads(downloads.to_json(layer_heads(np.ones((2, 3, 3))), about))["title"] == "All heads"


def test_file_names_say_model_and_view_in_safe_characters():
    name = downloads.file_name("attention_heatmap", ABOUT, "png")
    assert name.startswith("attention-heatmap_minilm_cross-attention_layer-2_head-3_the-script-x-script")
    assert re.fullmatch(r"[a-z0-9_-]+\.png", name) and len(name) <= downloads.NAME_CHARS + 4
    hostile = downloads.About(model="../x", sentence="/etc/passwd\\ :*?<>| ünïcode 猫", view=("head 1",))
    assert downloads.file_name("k", hostile, "csv") == "k_x_head-1_etc-passwd-unicode.csv"
    assert downloads.file_name("k", downloads.About(), "csv") == "k.csv"


def test_json_says_what_it_shows():
    fig, _ = figure()
    doc = json.loads(downloads.to_json(fig, ABOUT))
    assert (doc["model"], doc["view"], doc["sentence"]) == ("minilm", list(ABOUT.view), ABOUT.sentence)


def test_a_long_model_and_view_leave_the_sentence_short_enough_to_fit_the_figure():
    about = downloads.About(
        model="smollm2",
        model_title="SmolLM2-135M-Instruct (pretrained)",
        sentence="The capital of France is Paris, and the capital of Italy is Rome, and so on for a while",
        view=("decoder masked self-attention", "layer 6", "head 4"),
    )
    fig, _ = figure()
    line = html.unescape(downloads.as_drawn(fig, about).layout.title.subtitle.text)
    assert len(line) <= downloads.PNG_WIDTH / downloads.CHAR_PX and line.endswith("…”")
    head = "SmolLM2-135M-Instruct (pretrained) · decoder masked self-attention · layer 6 · head 4"
    assert line.startswith(f"{head} · “The")


HOSTILE = ["[CLS]", "<script>alert(1)</script>", "a&b", "[SEP]"]


@pytest.fixture(scope="module")
def images() -> dict[str, bytes]:
    """One head heatmap with hostile tokens, titled with ABOUT, drawn once as PNG, SVG and PDF."""
    if downloads.chromium() is None:
        pytest.skip("no Chromium for kaleido")
    weights = np.full((4, 4), 0.25, dtype=np.float32)
    fig = head_heatmap(weights, HOSTILE, HOSTILE, "Layer 3, head 4")
    return {kind: downloads.to_image(fig, ABOUT, kind) for kind in downloads.IMAGE_FORMATS}


def test_svg_is_the_png_in_vectors_its_size_theme_and_titles(images):
    root = ElementTree.fromstring(images["svg"])  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    pixels = png_size(images["png"])
    assert (int(root.get("width")), int(root.get("height"))) == tuple(n // downloads.PNG_SCALE for n in pixels)
    text = " ".join(root.itertext())
    assert "Layer 3, head 4" in text and "MiniLM <b>(pretrained)</b> · cross-attention · layer 2 · head 3" in text
    svg = images["svg"].decode()
    assert "Source Sans Pro" in svg and "font-weight: bold" in svg and "fill: rgb(255, 255, 255)" in svg  # SCREEN
    assert downloads.file_name("h", ABOUT, "svg") == downloads.file_name("h", ABOUT, "png")[:-3] + "svg"


def test_svg_shows_hostile_tokens_as_text_never_as_markup(images):
    root = ElementTree.fromstring(images["svg"])
    assert not [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] in {"script", "b", "foreignObject"}]
    assert not [e for e in root.iter() for name in e.attrib if name.lower().startswith("on")]  # no onload= etc.
    text = list(root.itertext())
    assert "<script>alert(1)</script>" in text and "a&b" in text  # the token literally, once parsed
    assert b"<script" not in images["svg"]


def test_pdf_is_one_page_the_screens_size(images):
    pdf = images["pdf"]
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    assert len(re.findall(rb"/Type\s*/Page\b", pdf)) == 1  # /Pages, the page tree, does not match
    (box,) = re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", pdf)
    width, height = png_size(images["png"])
    points_per_px = 72 / 96  # CSS pixels at 96 per inch, PDF points at 72
    assert float(box[0]) == pytest.approx(width / downloads.PNG_SCALE * points_per_px, abs=1)
    assert float(box[1]) == pytest.approx(height / downloads.PNG_SCALE * points_per_px, abs=1)


def test_without_chromium_images_say_how_to_enable_them_and_the_rest_still_comes_out(tmp_path, monkeypatch):
    monkeypatch.setattr(downloads, "_failure", "")
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    assert downloads.chromium() is None and downloads.image_trouble() == downloads.ENABLE_IMAGES
    assert "apt-get install chromium" in downloads.ENABLE_IMAGES and "BROWSER_PATH" in downloads.ENABLE_IMAGES
    fig, _ = figure()
    for kind in downloads.IMAGE_FORMATS:
        with pytest.raises(downloads.ExportError, match="No Chromium found. To enable image export"):
            downloads.to_image(fig, ABOUT, kind)
    assert "<html>" in downloads.to_html(fig, ABOUT)[:100]
    assert len(list(csv.reader(io.StringIO(downloads.to_csv(fig, ABOUT))))) == 1 + 16
    assert json.loads(downloads.to_json(fig, ABOUT))["model"] == "minilm"
    with pytest.raises(ValueError, match="choose from png, svg, pdf"):
        downloads.to_image(fig, ABOUT, "gif")


def test_a_browser_that_fails_is_explained_until_an_export_works(monkeypatch):
    monkeypatch.setattr(downloads, "_failure", "")
    browser = downloads.chromium()
    monkeypatch.setenv("BROWSER_PATH", "/bin/false")  # a file, but no browser: kaleido itself fails
    fig, _ = figure()
    with pytest.raises(downloads.ExportError, match="The SVG export failed .*To enable image export"):
        downloads.to_image(fig, None, "svg")
    trouble = downloads.image_trouble()
    assert trouble.startswith("The last image export failed (") and trouble.endswith(downloads.ENABLE_IMAGES)
    if browser is not None:  # the browser mended: the next export works and the sentence goes
        monkeypatch.setenv("BROWSER_PATH", browser)
        assert downloads.to_image(fig, None, "svg").startswith(b"<svg") and downloads.image_trouble() == ""
