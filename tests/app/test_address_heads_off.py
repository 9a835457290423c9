"""The Turn heads off page keeps the heads turned off in its address, and an address with them turns them off."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app.state import ABLATION_HEADS as HEADS
from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from attention_explorer.models.ablation import Head
from tests.app import new_app
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

TEXT = "kilo seven zulu echo two mike kilo seven zulu echo two mike"


def opened(**params: str):
    at = new_app("ablation")
    at.query_params.update({"model": "induction", "text": TEXT, **params})
    return at.run()


def grid_text(at) -> list:
    """The 'off' marks of the turn-off grid, as drawn."""
    figure = next(spec(c) for c in at.get("plotly_chart") if c.key == "ablation_grid")
    return [cell for row in figure["data"][0]["text"] for cell in row]


def test_turning_heads_off_puts_them_in_the_address_and_the_address_restores_them():
    at = opened()
    assert "off" not in at.query_params  # nothing off, nothing in the address
    at.multiselect(key=HEADS).set_value(["1.2", "2.1"]).run()
    assert not at.exception
    address = {name: at.query_params[name] for name in at.query_params}
    assert address["off"] in ("1.2,2.1", ["1.2,2.1"])

    again = opened(off="1.2,2.1")  # a new session opened at the copied address
    assert not again.exception and not again.warning
    assert again.multiselect(key=HEADS).value == ["1.2", "2.1"]
    assert grid_text(again).count("off") == 2
    loaded = registry.load("induction")
    clean = trace.run(loaded, TEXT, loaded.max_tokens)
    outcome = ablate.outcome(loaded, clean, [Head("decoder_self", 0, 1), Head("decoder_self", 1, 0)], "zero")
    moved = array(next(spec(c) for c in again.get("plotly_chart") if c.key == "ablation_grid")["data"][0]["z"])
    np.testing.assert_allclose(moved, outcome.moved["decoder_self"], atol=1e-6)


def test_an_old_address_opens_with_no_head_off_and_a_bad_one_is_named():
    at = opened()
    assert not at.exception and at.multiselect(key=HEADS).value == []
    bad = opened(off="1.2,7.7,encoder:1.1")  # 7.7: no such head; encoder: this model has no encoder
    assert bad.multiselect(key=HEADS).value == ["1.2"]
    assert any("(7.7, encoder:1.1)" in plain(w.value) for w in bad.warning)
    assert bad.query_params["off"] in ("1.2", ["1.2"])
