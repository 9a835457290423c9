"""Issue 50's nine sentences on the pages themselves (AppTest through app.py), on a tiny random Llama folder whose
shape is SmolLM2's in small: rotary at the paper's base, RMSNorm before each sub-layer, 6 query heads over 2
key/value heads, the output tied to the embedding. The wording for other kinds of model: tests/explorer/
test_nine_sentences.py."""

from __future__ import annotations

import pytest

from attention_explorer.models import registry
from tests.app import new_app
from tests.app.test_decoder_only import text_of
from tests.folders import make_llama_folder

pytestmark = pytest.mark.slow

KEY = "folder:tiny-gqa"
TEXT = "the cat sat on the mat because the cat was tired"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_llama_folder(tmp_path_factory.mktemp("gqa") / "tiny-gqa", heads=6, kv_heads=2, tie=True)


@pytest.fixture
def model(folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gqa={folder}"}))
    return registry.load(KEY)


def opened(page: str):
    at = new_app(page)
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.run()
    assert not at.exception, (page, at.exception)
    return at


def test_forward_positional_step_4_and_attention_say_what_this_model_does(model):
    words = text_of(opened("forward"))
    assert "no position added (rotary" in words and "RMSNorm before each sub-layer" in words
    assert "the position added" not in words and "and LayerNorm" not in words
    words = text_of(opened("positional"))
    assert "with the same base, 10000" in words and "instead of 10000" not in words
    words = text_of(opened("query_key_value"))
    assert "RMSNorm(x)" in words and "belong to the 2 key/value heads, each shared by 3 query heads" in words
    assert "one set per head" not in words
    at = opened("attention")
    words = " ".join(str(m.value) for m in at.markdown)  # the LaTeX as written, before plain() drops backslashes
    assert r"R_{\text{pos}}" in words and r"\tilde{Q}\tilde{K}^\top" in words


def test_the_qkv_formula_names_the_key_value_head_of_the_chosen_query_head(model):
    at = new_app("query_key_value")
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.run()
    for head in (0, 4, 5):  # query heads 1, 5, 6 read key/value heads 1, 2, 2
        at.selectbox(key="qkv_head").set_value(head).run()
        assert not at.exception
        formula = " ".join(str(x.value) for x in at.latex)
        assert f"W^Q_{{{head + 1}}}" in formula
        assert f"W^K_{{{head // 3 + 1}}}" in formula and f"W^V_{{{head // 3 + 1}}}" in formula
        if head // 3 != head:  # not the query head's own number
            assert f"W^K_{{{head + 1}}}" not in formula and f"W^V_{{{head + 1}}}" not in formula


def test_the_logit_lens_does_not_promise_the_own_token(model):
    words = text_of(opened("logit_lens"))
    assert "scores highest against itself" not in words
    assert "The embedding row names the position's own token at all" in words  # tied: the caption is shown
    assert "nothing guarantees it: the final RMSNorm first scales each dimension by its own learned gain" in words
