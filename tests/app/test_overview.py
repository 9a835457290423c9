"""Overview: figure 1 drawn for the chosen model, with links to the pages that show each part."""

from __future__ import annotations

import pytest

from explorer import state
from explorer.figures.overview import blocks
from models import registry
from tests.app import new_app
from tests.figdata import spec


@pytest.mark.parametrize("key", ["minilm", "translate"])
def test_overview_draws_the_models_own_shape(key):
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    at.switch_page("explorer/pages/overview.py").run()
    assert not at.exception
    config = registry.load(key).model.config
    layout = spec(at.get("plotly_chart")[0])["layout"]
    texts = [a["text"] for a in layout["annotations"]]
    assert f"Encoder: N = {config.n_encoder_layers} layers" in texts
    assert any(f"h = {config.n_heads}" in t for t in texts)
    assert any(f"{config.d_model} → {config.d_ff}" in t for t in texts)
    has_decoder = any("Decoder" in t for t in texts)
    assert has_decoder == config.is_encoder_decoder and any("Softmax" in t for t in texts) == has_decoder
    assert len([s for s in layout["shapes"] if "fillcolor" in s]) == len(blocks(config))
    links = [link.proto.page for link in at.get("page_link")]
    assert "forward" in links and "qkv" in links
    assert ("output" in links) == config.is_encoder_decoder
