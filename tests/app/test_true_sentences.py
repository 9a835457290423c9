"""Lesson sentences true for the model shown (issue 42), through app.py (AppTest): each test fails if the false
sentence it replaced comes back."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import trace
from tests.app import new_app
from tests.app.test_decoder_only import text_of
from tests.figdata import array, spec

pytestmark = pytest.mark.slow

TEXT = "The Eiffel Tower is located in the city of"


def opened(page: str, model: str = "smollm2", text: str = TEXT):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    return at.run()


def charts(at) -> dict[str, dict]:
    return {c.key: spec(c) for c in at.get("plotly_chart")}


def test_step_4_names_the_normalised_row_it_multiplies(smollm2):
    at = opened("query_key_value")
    assert not at.exception, at.exception
    formulas = " ".join(str(f.value) for f in at.latex)
    assert r"q = R_{\text{pos}}(\mathrm{RMSNorm}(x) W^Q" in formulas and r"R_{\text{pos}}(x W^Q" not in formulas
    words = text_of(at)
    assert "RMSNorm(x), what W^Q multiplies:" in words and "q is RMSNorm(x) W^Q turned by its position" in words
    drawn = charts(at)["qkv_q_unrotated"]
    assert drawn["layout"]["title"]["text"].startswith("RMSNorm(x) W^Q, before rotation")
    layer, head = at.selectbox(key="qkv_layer").value, at.selectbox(key="qkv_head").value
    run = trace.run(smollm2, TEXT, smollm2.max_tokens)
    shown = array(drawn["data"][0]["z"]).ravel()
    model_rows = run.decoder_self.q_unrotated[layer, head]  # (T, Dh): the drawn row is one of the model's own
    assert any(np.array_equal(shown, row) for row in model_rows.astype(shown.dtype))
