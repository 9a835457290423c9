"""Sentences whose truth depends on the model shown: each is measured on that model, and differs where the models
differ (random, pretrained, trained here)."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.lesson.wording import NOT_EXPLANATION, starting_note
from attention_explorer.explorer.run import positions, trace, walkthrough
from attention_explorer.models import registry
from tests.app import new_app
from tests.figdata import plain

pytestmark = pytest.mark.slow

HEAD_PAGES = ("attention", "model_view", "head_view", "find_heads", "statistics", "aggregation", "qkv")
STARTING_PAGES = ("attention", "model_view", "head_view", "statistics", "qkv")


def opened(model: str):
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(model).run()
    return at


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_the_heads_caveat_is_measured_per_model_and_on_every_page_that_shows_heads():
    seen = {}
    for model in ("minilm", "minilm-random", "paper-random", "reverse"):
        at = opened(model)
        for name in HEAD_PAGES:
            at.switch_page(f"explorer/pages/{name}.py").run()
            assert not at.exception, (model, name)
            text = captions(at)
            assert NOT_EXPLANATION in text, (model, name)
            # where each opens: a model trained here on its alignment, but not on a lesson step before the decoder's
            opens_cross = model == "reverse" and name != "aggregation" and not navigation.before_decoder(name)
            kind = "cross" if opens_cross else "encoder_self"
            note = starting_note(registry.load(model).family, kind)
            assert (note in text) == (name in STARTING_PAGES), (model, name)
            assert text.count("The page opens on") == (name in STARTING_PAGES), (model, name)
            seen.setdefault(model, text)
    assert "Pretrained heads" in seen["minilm"] and "Random" not in seen["minilm"]
    assert "toy model trained here" in seen["reverse"]
    assert "most peaked cross-attention head" in seen["reverse"]  # it opens on its alignment, and says so
    # random weights, but one term dominates layer 1's input: measured on each model's own embedding layer, with
    # every term it sums (MiniLM's token-type row, its embedding LayerNorm), and put down to the initialisation
    for model, largest, share in (
        ("paper-random", "the position's vector", "94%"),
        ("minilm-random", "the token-type row", "92%"),
    ):
        loaded = registry.load(model)
        parts, cosine = positions.input_parts(loaded), positions.input_cosine(loaded)
        assert f"The largest, {largest}, is {share} of the sum" in seen[model], model
        assert all(f"{norm:.3g}" in seen[model] for norm in parts.values()), model
        assert f"mean cosine {cosine:.2f}" in seen[model] or f"different tokens: {cosine:.2f}" in seen[model]
        assert "initialisation" in seen[model] and "of what enters layer 1" not in seen[model]
    assert "LayerNorm(token embedding + token type embedding (type 0)" in seen["minilm-random"]
    assert positions.input_cosine(registry.load("minilm-random")) > 0.9  # the shared type row: inputs all alike
    assert "one random vector per position" in seen["minilm-random"]
    assert "initialisation" not in seen["minilm"] + seen["reverse"]
    assert "x sqrt(d_model)" in seen["paper-random"] and "x sqrt(d_model)" not in seen["minilm-random"]
    assert "any pattern here is chance" not in " ".join(seen.values())


def test_model_view_asks_for_learned_patterns_only_where_weights_were_learned():
    hints = {}
    for model in ("minilm", "minilm-random", "translate"):
        at = opened(model)
        at.switch_page("explorer/pages/model_view.py").run()
        hints[model] = " ".join(m.value for m in [*at.markdown, *at.caption])  # the scaling note: under the grid
    assert "bright diagonal" in hints["minilm"]
    assert "bright diagonal" not in hints["minilm-random"] and "No head here has learned" in hints["minilm-random"]
    assert "cross-attention" in hints["translate"] and "bright diagonal" not in hints["translate"]
    assert all("scaled to its own maximum" in hint for hint in hints.values())


def test_learned_positions_are_called_similar_only_when_they_are():
    notes = {}
    for model in ("minilm", "minilm-random"):
        at = opened(model)
        at.switch_page("explorer/pages/positional.py").run()
        notes[model] = captions(at)
        learned = positions.tables(registry.load(model))["learned"]
        assert f"{positions.neighbour_cosine(learned):.2f}" in notes[model]
    assert "learned in pre-training: training made neighbours similar" in notes["minilm"]
    assert "here random: this model is untrained" in notes["minilm-random"] and "similar" not in notes["minilm-random"]


def test_the_scaling_note_gives_this_querys_measured_spread_not_the_papers_assumption(minilm):
    at = opened("minilm")
    at.switch_page("explorer/pages/qkv.py").run()
    at.selectbox(key="qkv_layer").set_value(0).run()
    at.toggle(key="qkv_what_if_on").set_value(True).run()
    layer, head, query = 0, at.selectbox(key="qkv_head").value, at.selectbox(key="qkv_query").value
    steps = walkthrough.steps(trace.run(minilm, state.DEFAULT_TEXT, 128), "encoder_self", layer, head, query)
    spread = float(np.std(steps.scaled_scores[steps.mask]))
    text = captions(at)
    assert "an assumption" in text and f"standard deviation of {spread:.3g}" in text
    assert "stays near 1 whatever d_k" not in text


def test_a_row_click_on_the_mean_of_heads_says_it_opens_head_1():
    at = opened("minilm")
    at.switch_page("explorer/pages/attention.py").run()
    assert "the click opens head 1" not in captions(at)
    at.selectbox(key="attention_head").set_value(-1).run()
    assert "a mean of heads has no Q, K and V of its own: the click opens head 1" in captions(at)


# ---- the loss steps, step 12 and 13, and the experiments: what each names is what this model computes

TRANSLATE = "the small red cat sees a big dog"
INDUCTION = "kilo seven zulu echo two mike kilo seven zulu echo two mike"


def at_page(page: str, model: str, text: str | None = None):
    at = new_app(page)
    at.query_params["model"] = model
    if text is not None:
        at.query_params["text"] = text
    at = at.run()
    assert not at.exception, (page, model, at.exception)
    return at


def words(at) -> str:
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.subheader, *at.text]
    return plain(" ".join(str(p.value) for p in parts) + " " + " ".join(m.label for m in at.metric))


def reveal(at, key: str):
    guess = next(s for s in at.selectbox if s.key.startswith(f"{key}_guess"))
    guess.set_value(0).run()
    at.button(key=f"{key}_reveal").click().run()
    assert not at.exception
    return guess


def test_each_loss_has_its_own_name_defined_where_first_shown():
    from attention_explorer.explorer.app import cached
    from attention_explorer.explorer.app.state import Choice
    from attention_explorer.explorer.lesson import model_words

    # step 9: -log p of the right token, named and defined, with zero ablation's caveat
    at = at_page("turn_off", "translate", TRANSLATE)
    reveal(at, "turn_off_predict")
    labels = [m.label for m in at.metric]
    assert "Mean -log p(right token), nats" in labels and not [x for x in labels if "loss" in x.lower()]
    assert model_words.minus_log_p("right") in words(at) and model_words.ZERO_ABLATION in words(at)
    # step 12: the chosen step's -log p, not an undefined "loss here"
    at = at_page("final_linear", "translate", TRANSLATE)
    text = words(at)
    scored, _ = cached.get_scored(Choice("translate", TRANSLATE, registry.load("translate").max_tokens), "")
    shown = float(text.split("-log p = ")[1].split()[0])
    assert shown == pytest.approx(float(scored.nll[0]), abs=2e-4) and "loss here" not in text
    assert model_words.minus_log_p("right") in text
    # step 14: the loss the model trains with, by its name, beside -log p
    at = at_page("loss", "translate", TRANSLATE)
    labels = [m.label for m in at.metric]
    assert labels == ["Mean label-smoothed loss", "Floor for this vocabulary", "Mean -log p(right token)"]
    assert "trains on the label-smoothed loss (section 5.4)" in words(at)
    assert at.subheader[0].value.startswith("1. The label-smoothed loss against")
    assert "This untrained model would train on the label-smoothed loss" in words(at_page("loss", "paper-random"))
    at = at_page("loss", "induction", INDUCTION)  # no smoothing: the cross-entropy, and no smoothed loss anywhere
    assert [m.label for m in at.metric][0] == "Mean cross-entropy"
    assert "label-smoothed" not in words(at).lower() and "trains on the cross-entropy" in words(at)
    text = words(at_page("loss", "minilm"))  # encoder-only: the paper's loss, nothing claimed of MiniLM's training
    assert "This model trains" not in text and "The paper's model trains on the label-smoothed loss" in text


def test_the_output_and_train_pages_read_the_recipe_not_the_papers():
    text = words(at_page("output", "induction", INDUCTION))
    assert "label-smoothed" not in text and "without label smoothing (the paper smooths with eps = 0.1)" in text
    assert "label-smoothed (eps = 0.1, section 5.4)" in words(at_page("output", "translate", TRANSLATE))
    at = at_page("train", "induction")
    text = words(at)
    assert "label smoothing, dropout)" not in text
    assert "This task's recipe: no label smoothing, no dropout; its loss curve is the cross-entropy." in text
    at.selectbox(key="train_task").set_value("translate").run()
    assert "This task's recipe: label smoothing eps = 0.1, dropout 0.1; its loss curve is the label-smoothed loss" in (
        words(at)
    )


def test_step_13_asks_about_a_row_whose_answer_can_be_right_or_wrong():
    at = at_page("layer_predictions", "translate", TRANSLATE)
    question = plain(next(m.value for m in at.markdown if "Predict first" in m.value))
    assert "the right next token is" in question and "<eos>" not in question  # not the end token every run writes
    guess = reveal(at, "layer_predictions_predict")
    assert guess.options[-1] == "not even at the output"
    # paper-random: its own greedy output is all there is; at the output it always ranks first
    at = at_page("layer_predictions", "paper-random")
    question = plain(next(m.value for m in at.markdown if "Predict first" in m.value))
    assert "right next token" not in question and "greedy output (no right answer is known) writes" in question
    guess = reveal(at, "layer_predictions_predict")
    assert "not even at the output" not in guess.options
    charts = {c.key: c for c in at.get("plotly_chart")}
    assert "the model's own greedy output" in str(charts["layer_predictions_rank"].proto.spec)


def test_the_readouts_describe_the_norm_placement_of_the_model_shown():
    for page in ("layer_predictions", "attribution"):
        post = words(at_page(page, "translate", TRANSLATE))
        pre = words(at_page(page, "induction", INDUCTION))
        assert not registry.load("translate").family.norm_first and registry.load("induction").family.norm_first
        assert "This model is post-LN, as in the paper" in post and "final LayerNorm" not in post, page
        assert "pre-norm model" in pre and "final LayerNorm" in pre and "post-LN, as in" not in pre, page


def test_step_12_says_greedy_decoding_ignores_the_temperature():
    text = words(at_page("final_linear", "translate", TRANSLATE))
    assert "dividing the logits by a temperature never changes which word that is" in text
    assert "by a temperature, or sampling, writes other outputs" not in text


def test_a_random_models_own_output_is_not_called_the_right_answer():
    from attention_explorer.explorer.app.state import ABLATION_HEADS as HEADS
    from attention_explorer.explorer.lesson import model_words

    at = at_page("ablation", "paper-random", "hi")
    at.multiselect(key=HEADS).set_value(["cross:1.1"]).run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "The greedy token's mean probability" in labels and "Mean -log p(greedy token), nats" in labels
    text = words(at)
    assert "Measured against the model's own greedy output (no right answer known)" in text
    assert "Right answer" not in text and model_words.ZERO_ABLATION in text
    at.radio(key="ablation_method").set_value("mean").run()
    assert model_words.ZERO_ABLATION not in words(at)


def test_a_model_folder_is_not_called_pretrained_when_it_does_not_say(gpt2_folder, monkeypatch):
    # the test's GPT-2 folder holds random weights, saved as any trained folder would be: nothing on screen may call
    # them pretrained (or random: the folder does not say), while the shipped MiniLM stays pretrained
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    loaded = registry.load("folder:tiny-gpt2")
    assert loaded.family.origin == "from a folder" and not loaded.family.pretrained and not loaded.family.learned
    assert "Pretrained" not in loaded.description and registry.load("minilm").family.pretrained
    text = " ".join(captions(at_page(page, "folder:tiny-gpt2", INDUCTION)) for page in ("attention", "positional"))
    assert "Pretrained heads" not in text and "learned in pre-training" not in text and "untrained" not in text
    assert "does not say whether they were trained: if they were, its heads learn" in text
    assert "read from a folder that does not say whether they were trained (mean cosine" in text


def test_the_loss_question_calls_a_reordering_wrong_only_against_a_right_answer():
    def question(text: str) -> str:
        at = at_page("loss", "translate", text)
        return plain(next(m.value for m in at.markdown if "Predict first" in m.value))

    assert "against a wrong answer, the same words in another order" in question(TRANSLATE)
    outside = question("dog the sees")  # outside the task's grammar: scored against the model's own output
    assert "the model's own greedy output" in outside and "wrong answer" not in outside
    assert "against the same words in another order" in outside


def test_the_readouts_name_a_llama_models_final_rmsnorm(llama_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-llama={llama_folder}"}))
    assert registry.load("folder:tiny-llama").family.norm == "rms"
    for page in ("logit_lens", "layer_predictions", "attribution"):
        text = words(at_page(page, "folder:tiny-llama", "the cat sat on the mat"))
        assert "final RMSNorm" in text and "LayerNorm" not in text, page
