"""A broken model in the list: a clear message for whoever picks it, and every other session and model keeps working."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import starting, trace
from attention_explorer.models import registry
from tests.app import new_app
from tests.badfiles import bert_folder
from tests.figdata import array, plain, spec


@pytest.fixture
def broken(tmp_path, monkeypatch):
    folders = f"broken={bert_folder(tmp_path / 'broken', 'truncated')}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: folders}))
    return "folder:broken"


def test_picking_a_broken_model_names_the_problem_and_the_others_keep_working(broken, minilm):
    mine, other = new_app().run(), new_app("attention").run()
    mine.sidebar.selectbox[0].set_value(broken).run()
    assert not mine.exception
    assert "broken (local folder) could not be loaded" in plain(mine.error[0].value)
    assert "model.safetensors" in plain(mine.error[0].value)
    other.sidebar.text_area[0].set_value("still serving").run()  # another session, meanwhile
    result = trace.run(minilm, "still serving", 128)
    link = starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)
    expected = result.encoder_self.weights[link.layer, link.head]  # the page opens on the sentence's starting head
    np.testing.assert_array_equal(array(spec(other.get("plotly_chart")[0])["data"][0]["z"]), expected)
    mine.sidebar.selectbox[0].set_value("minilm").run()  # and the one who picked it can go back
    assert not mine.error and not mine.exception and mine.get("plotly_chart")


def test_an_address_naming_a_broken_model_opens_with_the_message(broken):
    at = new_app()
    at.query_params["model"] = broken
    at.run()
    assert not at.exception and "could not be loaded" in plain(at.error[0].value)
