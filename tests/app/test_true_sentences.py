"""Lesson sentences true for the model shown (issue 42), through app.py (AppTest): each test fails if the false
sentence it replaced comes back."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import trace
from tests.app import new_app
from tests.app.test_decoder_only import text_of
from tests.figdata import array, spec
from tests.figdata import plain as plain_of

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
    assert r"q &= R_{\text{pos}}(\mathrm{RMSNorm}(x) W^Q" in formulas and r"R_{\text{pos}}(x W^Q" not in formulas
    words = text_of(at)
    assert "RMSNorm(x), what W^Q multiplies:" in words and "q is RMSNorm(x) W^Q turned by its position" in words
    drawn = charts(at)["qkv_q_unrotated"]
    assert drawn["layout"]["title"]["text"].startswith("RMSNorm(x) W^Q, before rotation")
    layer, head = at.selectbox(key="qkv_layer").value, at.selectbox(key="qkv_head").value
    run = trace.run(smollm2, TEXT, smollm2.max_tokens)
    shown = array(drawn["data"][0]["z"]).ravel()
    model_rows = run.decoder_self.q_unrotated[layer, head]  # (T, Dh): the drawn row is one of the model's own
    assert any(np.array_equal(shown, row) for row in model_rows.astype(shown.dtype))


def test_step_13_shows_the_final_norm_the_output_matrix_reads(smollm2):
    at = opened("final_linear")
    assert not at.exception, at.exception
    formulas = " ".join(str(f.value) for f in at.latex)
    assert r"\text{logits} = \mathrm{RMSNorm}(h)\, W^\top" in formulas and r"= h\, W^\top" not in formulas
    run = trace.run(smollm2, TEXT, smollm2.max_tokens)
    index = at.selectbox(key="output_position").value
    h = run.decoder_states["after_ffn"][-1][index].astype(np.float64)
    norm = smollm2.model.decoder.final_norm
    gamma = norm.weight.detach().double().numpy()
    normed = gamma * h / np.sqrt(np.mean(h**2) + norm.eps)  # RMSNorm (Zhang & Sennrich 2019), in float64
    words = text_of(at)
    assert f"so W multiplies RMSNorm(h), not h: |h| = {np.linalg.norm(h):.1f}" in words
    assert f"|RMSNorm(h)| = {np.linalg.norm(normed):.1f}" in words
    assert f"gain gamma, {gamma.mean():.2f} on average" in words
    assert "goes through the stack's final RMSNorm" in words


def test_final_linear_on_a_post_ln_model_multiplies_h_itself(translate):
    at = opened("final_linear", "translate", "the small red cat sees a big dog")
    assert not at.exception, at.exception
    formulas = " ".join(str(f.value) for f in at.latex)
    assert r"\text{logits} = h\, W^\top" in formulas and "RMSNorm" not in formulas and "LayerNorm(h)" not in formulas
    words = text_of(at)
    assert "post-LN, as in the paper, so no final norm comes after it" in words


def test_step_11_says_smollm2s_own_matrices(smollm2):
    from attention_explorer.explorer.run import complexity
    from tests.app import reveal

    at = reveal(opened("why_attention"), "why_predict", 0)
    assert not at.exception, at.exception
    words = text_of(at)
    assert plain_of(complexity.left_out(smollm2.model.config)) in words
    assert "W^K and W^V (576 x 192 each" in words and "the feed-forward's two matrices" not in words


def test_step_15_says_what_is_known_of_smollm2s_training(smollm2):
    from attention_explorer.models import registry

    words = text_of(opened("loss"))
    # "This model trains with plain cross-entropy, without label smoothing" was said of a model last tuned by DPO
    assert "This model trains" not in words and "this model trains with plain cross-entropy" not in words
    assert plain_of(registry.SMOLLM2_CARD.story) in words and "Shown here is that pretraining loss" in words
    assert "the loss shown is plain cross-entropy" in words
    output = text_of(opened("output"))
    assert "in pretraining by cross-entropy" in output and "DPO" in output


@pytest.mark.parametrize("task", ["induction", "translate"])
def test_a_model_trained_here_trains_on_the_loss_its_recipe_gives(task):
    from attention_explorer.explorer.run import output
    from attention_explorer.models import registry, tasks, train

    loaded = registry.load(task)
    trainer = train.Trainer(tasks.get(task), train.RECIPES[task])
    assert output.epsilon_for(loaded) == trainer.loss_fn.label_smoothing  # what models/train.py minimises
    words = text_of(opened("loss", task, loaded.example))
    said = "trains on the label-smoothed loss" if trainer.loss_fn.label_smoothing else "trains on the cross-entropy"
    assert f"This model {said}" in words
