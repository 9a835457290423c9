"""Issue 20 without streamlit: what W is read off the model, the trainer's settings, the wording's boundaries, and
figures whose exports keep their labels whole."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.experiments import training
from attention_explorer.explorer.figures.decoding import top_k_bars
from attention_explorer.explorer.figures.output import loss_bars
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.run import output
from attention_explorer.models import tasks, train


def test_output_matrix_is_read_off_the_model(paper_random, translate):
    paper = output.output_matrix(paper_random)
    assert paper == output.OutputMatrix(30522, 512, True, True, True)
    toy = output.output_matrix(translate)
    assert toy == output.OutputMatrix(440, 96, True, False, False)
    assert "one embedding matrix" in wording.output_matrix(*vars(paper).values())
    assert "target embedding matrix" in wording.output_matrix(*vars(toy).values())
    assert "not shared" in wording.output_matrix(440, 96, False, False, False)


def test_adam_and_dropout_come_from_the_trainer():
    betas, eps = training.adam_settings()
    task = tasks.get("reverse")
    trainer = train.Trainer(task, train.RECIPES["reverse"])
    assert (betas, eps) == (tuple(trainer.optimizer.defaults["betas"]), trainer.optimizer.defaults["eps"])
    assert training.dropout("reverse") == trainer.model.config.dropout == 0.1
    text = wording.optimiser_and_dropout(betas, eps, 0.1)
    assert "beta_1 = 0.9, beta_2 = 0.98 and epsilon = 1e-9" in text and "P_drop = 0.1" in text


def test_learning_rate_formula_holds_the_recipes_numbers():
    for name, recipe in train.RECIPES.items():
        formula = wording.learning_rate_formula(name)
        assert f"d_{{\\mathrm{{model}}}} = {recipe.d_model}" in formula and f"= {recipe.warmup}" in formula
    assert wording.learning_rate_formula("reverse").startswith(r"\mathit{lrate} = 0.5 \cdot")


def test_length_note_only_past_the_training_bound():
    assert wording.length_note(tasks.MAX_WORDS, tasks.MAX_WORDS) == ""
    assert f"at most {tasks.MAX_WORDS} words" in wording.length_note(tasks.MAX_WORDS + 1, tasks.MAX_WORDS)


def test_attention_formula_masks_decoder_self_attention_only():
    assert "M" not in wording.attention_formula("encoder_self") and "M" not in wording.attention_formula("cross")
    assert r"+ M\right)" in wording.attention_formula("decoder_self")


def test_next_token_and_loss_charts_grow_their_margins_for_labels():
    bars = top_k_bars(["mon", "européennes"], np.array([0.7, 0.2]), "mon", "next").to_plotly_json()["layout"]
    assert bars["xaxis"]["automargin"] and bars["yaxis"]["automargin"]
    assert set(bars["margin"]) >= {"l", "r", "t", "b"}
    loss = loss_bars(["le", "chat", "<eos>"], np.ones(3), np.ones(3), 0.5).to_plotly_json()["layout"]
    assert loss["xaxis"]["automargin"] and loss["yaxis"]["automargin"]
    assert set(loss["margin"]) >= {"l", "r", "t", "b"}
    # each step named by the position it writes, as the Decoding page numbers it (the start token is 0)
    assert list(loss["xaxis"]["ticktext"]) == ["1: le", "2: chat", "3: &lt;eos&gt;"]


def test_the_loss_floor_label_sits_beside_the_plot_not_on_the_token_labels():
    """No label smoothing (induction, GPT-2): the floor is 0, the x axis's own line; a label under it would sit on
    the token labels. It sits in the right margin, at its line's height, whatever the floor."""
    for floor in (0.0, 0.5):
        layout = loss_bars(["a", "b", "c"], np.full(3, 0.7), np.full(3, 0.6), floor).to_plotly_json()["layout"]
        (label,) = [a for a in layout["annotations"] if a["text"].startswith("floor")]
        assert label["text"] == f"floor {floor:.3f}" and label["y"] == floor
        assert label["xref"] == "x domain" and label["x"] == 1 and label["xanchor"] == "left"  # right of the plot
        assert layout["margin"]["r"] >= 90  # room for the label there
        (mean,) = [a for a in layout["annotations"] if a["text"].startswith("mean")]
        assert mean["x"] <= 1 and mean["yanchor"] == "bottom"  # the mean's label above its own line, inside


def test_every_snapshot_draws_the_model_with_dropout_off():
    run = training.Run("reverse", 2, 1, "one two three")
    assert not run.trainer.model.training  # already at the step-0 snapshot
    run.advance(2)
    assert not run.trainer.model.training and [s.step for s in run.snapshots] == [0, 1, 2]
    # with dropout on, two draws of the same step-0 weights would differ (it draws from the global random state)
    again = training.Run("reverse", 2, 1, "one two three")
    np.testing.assert_array_equal(run.snapshots[0].trace.cross.weights, again.snapshots[0].trace.cross.weights)
