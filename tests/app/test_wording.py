"""Wording that must say what the model computes: biases, masked scores, what the heatmaps draw, recipe departures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.lesson import model_words, wording
from attention_explorer.models import registry, train
from tests.app import new_app, stepping
from tests.figdata import array, plain, spec

ROOT = Path(__file__).resolve().parents[2]


def page(name: str, model: str | None = None) -> AppTest:
    at = new_app().run()
    if model is not None:
        at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(model).run()
    at.switch_page(f"explorer/pages/{name}.py").run()
    assert not at.exception
    return at


def test_minilm_projections_have_biases_so_the_qkv_page_writes_them(minilm):
    # the bias is why q = x W^Q alone is wrong: it is not zero in the pretrained model
    assert float(minilm.model.encoder.layers[0].self_attn.w_q.bias.abs().max()) > 0.1
    at = page("qkv")
    formulas = " ".join(e.value for e in at.get("latex"))
    for bias in ("b^Q", "b^K", "b^V", "b^O"):
        assert bias in formulas
    at.toggle(key="qkv_what_if_on").set_value(True).run()  # the temperature what-if, shown on demand
    assert any("T = 1 is the model" in c.value and "is itself a temperature" in c.value for c in at.caption)


def test_qkv_page_says_and_draws_what_a_masked_score_becomes():
    at = page("qkv", "translate")
    at.radio(key="qkv_kind").set_value("decoder_self").run()
    assert any("-3.4e38" in m.value for m in at.markdown)
    assert np.float32(-3.4e38) > torch.finfo(torch.float32).min  # the value the model uses is below it
    # the figure itself shows each masked score as minus infinity, holding the value the softmax sees
    figure = next(spec(c) for c in at.get("plotly_chart") if c.key == "qkv_masked")
    n = len(at.selectbox(key="qkv_query").options)
    query = at.selectbox(key="qkv_query").value
    marks = figure["data"][1]
    assert list(array(marks["x"])) == list(range(query + 1, n)) and set(marks["text"]) == {"−∞"}
    assert {row[0] for row in marks["customdata"]} == {float(torch.finfo(torch.float32).min)}
    assert list(array(figure["data"][0]["x"])) == list(range(query + 1))


def test_qkv_page_names_the_input_row_as_each_model_computes_it():
    at = page("qkv")
    at.selectbox(key="qkv_layer").set_value(0).run()  # the first layer reads the embeddings
    assert any(
        "x = LayerNorm(token embedding + token type embedding (type 0) + learned position" in m.value
        for m in at.markdown
    )
    at = page("qkv", "translate")
    at.radio(key="qkv_kind").set_value("encoder_self").run()  # a model trained here opens on cross-attention
    at.selectbox(key="qkv_layer").set_value(0).run()
    assert any(
        "x = token embedding x sqrt(d_model) (= x " in m.value and "+ sinusoid (eq. PE)" in m.value for m in at.markdown
    )
    at.selectbox(key="qkv_layer").set_value(1).run()
    assert any("LayerNorm(h + FFN(h)) (post-LN)" in m.value for m in at.markdown)


def test_heatmap_says_it_draws_the_weights_and_patterns_fit_the_model():
    at = page("attention")
    assert any(r"\sqrt{d_k}\right)$, before they" in m.value for m in at.markdown)
    assert "Pretrained heads learn" in at.caption[0].value
    for key, words in (("paper-random", "Random, untrained"), ("translate", "toy model trained here")):
        at = page("attention", key)
        assert words in at.caption[0].value and "Pretrained" not in at.caption[0].value


def test_model_and_head_views_draw_the_weights_not_the_product_with_v():
    for name in ("model_view", "head_view"):
        formula = page(name).get("latex")[0].value.strip("$\n")
        assert formula.startswith("A_i = \\mathrm{softmax}") and formula.endswith("\\right)")  # no V after it


def test_decoding_rows_say_what_they_read_and_write():
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value("reverse").run()
    at.sidebar.text_area[0].set_value("one two three").run()
    stepping(at.switch_page("explorer/pages/decoding.py").run())
    assert "reads '0: <bos>' (and the tokens before it), writes '1: three'" in plain(at.subheader[0].value)


def test_recipe_departures_come_from_the_recipes_and_reach_the_train_page_and_readme():
    reverse = wording.recipe_departures("reverse")
    assert any("clipping at norm 1" in d for d in reverse) and any("400 warm-up" in d for d in reverse)
    assert any("times 0.5" in d for d in reverse) and not any(
        "times" in d for d in wording.recipe_departures("translate")
    )
    readme = (ROOT / "README.md").read_text()
    assert "gradient clipping at norm 1.0" in readme and "400 warm-up steps" in readme and "halved" in readme
    at = page("train")
    assert any("departs from the paper" in c.value and "clipping" in c.value for c in at.caption)


def test_train_curve_draws_the_eq3_schedule_beside_the_loss():
    at = page("train")
    at.selectbox(key="train_task").set_value("reverse").run()
    at.number_input(key="train_steps").set_value(20).run()
    at.number_input(key="train_every").set_value(10).run()
    at.button(key="train_start").click().run()
    run = at.session_state["train_run"]
    curve = spec(at.get("plotly_chart")[0])["data"]
    recipe = train.RECIPES["reverse"]
    expected = [train.rate(s, recipe.d_model, recipe.warmup, recipe.lr_factor) for s in range(1, 21)]
    np.testing.assert_allclose(array(curve[2]["y"]), expected)
    np.testing.assert_allclose(array(curve[2]["y"])[:20], [p.lr for p in run.trainer.history])
    assert registry.MODELS  # the page leaves the registry as it was


def test_learned_positions_say_where_the_weights_came_from_not_what_the_cosine_suggests():
    from attention_explorer.models.config import TransformerConfig
    from attention_explorer.models.families.descriptor import for_config

    encoder = TransformerConfig(vocab_size=8, d_model=8, n_heads=2, n_decoder_layers=0, positional="learned")
    decoder = TransformerConfig(vocab_size=8, d_model=8, n_heads=2, n_encoder_layers=0, norm_first=True)
    random = for_config(encoder, "BERT family", "random")
    trained = for_config(decoder, "GPT-style, trained here", "trained here")
    # a random table whose neighbours happen to be alike is still random; a trained one unlike its neighbours, trained
    assert "here random: this model is untrained" in wording.learned_positions(random, 0.9, 0.8)
    assert "similar" not in wording.learned_positions(random, 0.9, 0.8)
    low = wording.learned_positions(trained, 0.1, 0.8)
    assert "learned by training on its toy task" in low and "random" not in low


def test_the_feed_forward_switches_numbers_off_only_where_its_activation_is_relu():
    texts = {}
    for model in ("translate", "minilm", "induction"):
        at = page("add_norm", model)
        texts[model] = " ".join(m.value for m in at.markdown)
        activation = registry.load(model).model.config.activation
        assert model_words.ffn_activation(activation) in texts[model], model
        assert "switches some off" not in texts[model], model
    assert "sets the negative ones to zero (ReLU)" in texts["translate"]
    assert registry.load("minilm").model.config.activation != "relu"
    assert "GELU" in texts["minilm"] and "zero (ReLU)" not in texts["minilm"]


def test_the_qkv_bias_caption_says_the_paper_writes_none():
    for model in ("paper-random", "translate"):
        at = page("qkv", model)
        text = " ".join(c.value for c in at.caption)
        assert registry.load(model).model.config.qkv_bias
        assert "which the paper's formulas do not write" in text and "Each projection has a bias" not in text


def test_the_statistic_of_the_querys_own_position_is_named_for_the_position():
    # "self" measures the weight on the query's own position (the diagonal), whatever token stands there
    at = page("statistics", "minilm")
    box = at.selectbox(key="stats_statistic")
    assert "same position" in box.options and "same token" not in box.options
