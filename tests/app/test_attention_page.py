"""The app through app.py: the heatmap drawn is the model's own attention for the chosen layer and head."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import downloads
from attention_explorer.explorer.run import starting, trace
from tests.app import new_app
from tests.figdata import array, spec


@pytest.fixture
def app():
    return new_app("attention")


def heatmap(at: AppTest) -> dict:
    charts = [c for c in at.get("plotly_chart") if c.key == "attention_heatmap"]
    assert len(charts) == 1
    return spec(charts[0])


def shows(fig: dict, weights, queries, keys) -> None:
    """The heatmap draws exactly these weights, queries down the side and keys across."""
    np.testing.assert_array_equal(array(fig["data"][0]["z"]), weights)
    assert list(fig["layout"]["yaxis"]["ticktext"]) == list(queries)
    assert list(fig["layout"]["xaxis"]["ticktext"]) == list(keys)


def test_default_sentence_opens_on_its_strongest_link(app, minilm):
    at = app.run()
    assert not at.exception
    expected = trace.run(minilm, "The animal didn't cross the street because it was too tired", 128)
    tokens, weights = expected.source_tokens, expected.encoder_self.weights
    link = starting.best_link(weights, tokens, tokens)
    assert (link.layer, link.head) != (0, 0)
    assert at.selectbox(key="attention_layer").value == link.layer
    assert at.selectbox(key="attention_head").value == link.head
    shows(heatmap(at), weights[link.layer, link.head], tokens, tokens)


def test_starting_head_follows_the_sentence_until_someone_picks(app, minilm):
    at = app.run()
    other = "Bark is very cute and he is a dog"
    at.sidebar.text_area[0].set_value(other).run()
    result = trace.run(minilm, other, 128)
    link = starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)
    assert (at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value) == (
        link.layer,
        link.head,
    )
    at.selectbox(key="attention_layer").set_value(0).run()
    at.selectbox(key="attention_head").set_value(3).run()
    at.sidebar.text_area[0].set_value("The cat sat on the mat").run()
    assert (at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value) == (0, 3)


def test_address_head_wins_over_the_starting_head(minilm):
    at = new_app("attention")
    at.query_params.update({"layer": "1", "head": "1"})
    at.run()
    assert not at.exception
    assert (at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value) == (0, 0)


def test_typing_a_sentence_and_picking_a_head(app, minilm):
    at = app.run()
    at.sidebar.text_area[0].set_value("Bark is very cute and he is a dog").run()
    at.selectbox(key="attention_layer").set_value(4).run()
    at.selectbox(key="attention_head").set_value(7).run()
    assert not at.exception
    fig = heatmap(at)
    expected = trace.run(minilm, "Bark is very cute and he is a dog", 128)
    np.testing.assert_array_equal(array(fig["data"][0]["z"]), expected.encoder_self.weights[4, 7])
    assert fig["layout"]["title"]["text"] == "Layer 5, head 8"
    assert list(fig["layout"]["xaxis"]["ticktext"])[1:4] == ["bark", "is", "very"]


def test_empty_sentence_gives_a_message_not_an_error(app):
    at = app.run()
    at.sidebar.text_area[0].set_value("   ").run()
    assert not at.exception and len(at.get("plotly_chart")) == 0
    assert "empty" in at.info[0].value


def test_random_model_shows_cross_attention(app, paper_random):
    at = app.run()
    at.sidebar.selectbox[0].set_value("paper-random").run()
    at.radio(key="attention_kind").set_value("cross").run()
    assert not at.exception
    expected = trace.run(paper_random, "The animal didn't cross the street because it was too tired", 128)
    queries, keys = expected.target_tokens, expected.source_tokens
    link = starting.best_link(expected.cross.weights, queries, keys, self_attention=False)
    shows(heatmap(at), expected.cross.weights[link.layer, link.head], queries, keys)


def test_downloads_offer_png_svg_pdf_drawn_only_when_clicked_or_say_how_to_enable_them(
    app, minilm, monkeypatch, tmp_path
):
    drawn = []
    monkeypatch.setattr(downloads, "to_image", lambda *args: drawn.append(args))
    monkeypatch.setattr(downloads, "_failure", "")
    monkeypatch.setenv("BROWSER_PATH", "/bin/sh")  # a file: what the page checks before offering images
    at = app.run()
    buttons = {b.key: b.label for b in at.get("download_button") if b.key.startswith("attention_heatmap_")}
    assert buttons == {
        "attention_heatmap_png": "PNG",
        "attention_heatmap_svg": "SVG",
        "attention_heatmap_pdf": "PDF",
        "attention_heatmap_html": "HTML (offline)",
        "attention_heatmap_csv": "CSV",
        "attention_heatmap_json": "JSON",
    }
    assert drawn == [] and downloads.ENABLE_IMAGES not in [c.value for c in at.caption]  # nothing drawn yet

    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    at.run()
    assert not at.exception
    buttons = {b.key: b.label for b in at.get("download_button") if b.key.startswith("attention_heatmap_")}
    assert set(buttons) == {"attention_heatmap_html", "attention_heatmap_csv", "attention_heatmap_json"}
    assert downloads.ENABLE_IMAGES in [c.value for c in at.caption]  # one sentence, in place of the image buttons
