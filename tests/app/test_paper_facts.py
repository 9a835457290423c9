"""Issue 20 through app.py: each sentence on screen is true for the model shown (the run the Train page makes, what W
is, the start token, how steps are numbered, what the mask leaves visible, long inputs, the step in the address)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.run import trace
from attention_explorer.models import registry, tasks, train
from tests.app import KIND_KEYS, new_app, stepping
from tests.figdata import array, plain, spec

SENTENCE = "the small red cat sees a big dog"  # translate writes le chat rouge petit voit un chien grand <eos>
LONG = "the small red cat sees a big dog on the european economic area in the forest"  # 16 known words


def opened(page: str, **params: str) -> AppTest:
    """A new session opened at /page?params, as a copied address opens it."""
    at = new_app(page)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception
    return at


def words(at: AppTest) -> str:
    """Every markdown, caption, warning and subheader of the page, escapes undone."""
    parts = [*at.markdown, *at.caption, *at.warning, *at.subheader]
    return plain(" ".join(p.value for p in parts))


def charts(at: AppTest) -> dict[str, dict]:
    return {c.key: spec(c) for c in at.get("plotly_chart")}


def test_train_page_says_what_its_own_run_does_and_the_papers_settings_from_the_trainer():
    at = new_app("train").run()
    text = words(at)
    assert "noise into an alignment" not in text and "may line up" in text  # nothing checks the outcome
    for task in tasks.TASKS:
        at.selectbox(key="train_task").set_value(task).run()
        recipe = train.RECIPES[task]
        steps = at.number_input(key="train_steps").value
        text = words(at)
        assert f"This run: {steps:,} steps" in text and f"trained for {recipe.steps:,} steps" in text
        assert f"{steps:,} steps in this run ({recipe.steps:,} for the shipped model)" in text
        formula = at.get("latex")[0].value.strip("$\n")
        assert r"\min\left(\mathit{step}^{-0.5}" in formula and r"\mathit{warmup\_steps}^{-1.5}" in formula
        assert f"= {recipe.d_model}" in formula and f"= {recipe.warmup}" in formula
        assert (f"{recipe.lr_factor:g} \\cdot" in formula) == (recipe.lr_factor != 1.0)
        # Adam's settings as the trainer builds them, not as the page would retype them
        tiny = replace(recipe, d_model=4, n_heads=1, d_ff=4, n_layers=1)
        built = train.Trainer(tasks.get(task), tiny).optimizer.defaults
        assert built["betas"] == (0.9, 0.98) and built["eps"] == 1e-9  # section 5.3
        assert "beta_1 = 0.9, beta_2 = 0.98 and epsilon = 1e-9" in text
        if recipe.dropout:  # section 5.4's rate, or no dropout said as such (induction)
            assert f"P_drop = {recipe.dropout:g}" in text and recipe.dropout == 0.1
            assert "eval mode, where dropout is off" in text
        else:
            assert "No dropout (the paper's base model drops 0.1, section 5.4)" in text and "P_drop" not in text
    at.number_input(key="train_steps").set_value(1000).run()
    assert "This run: 1,000 steps" in words(at)
    assert not registry.load("translate").model.training  # what the pages draw: dropout off


def test_output_page_says_what_w_is_and_names_beam_search(paper_random, translate):
    shared = paper_random.model
    assert shared.generator.weight is shared.decoder.embeddings.token.weight is shared.encoder.embeddings.token.weight
    text = words(opened("output", model="paper-random"))
    assert "W is the model's one embedding matrix (30,522 x 512), as in section 3.4" in text
    assert "all zero in these random weights" in text and float(shared.generator.bias.abs().max()) == 0
    toy = translate.model
    assert toy.generator.weight is toy.decoder.embeddings.token.weight
    assert toy.generator.weight is not toy.encoder.embeddings.token.weight
    text = words(opened("output", model="translate", text=SENTENCE))
    assert "W is the decoder's target embedding matrix (440 x 96), shared with this layer" in text
    assert "the source has its own vocabulary and its own embedding matrix" in text
    assert "beam search (section 6.1: beam size 4, length penalty alpha = 0.6)" in text and "greedily" in text


def test_decoding_and_output_number_the_same_position_the_same_way():
    at = stepping(opened("decoding", model="translate", text=SENTENCE))
    at.slider(key="decoding_position").set_value(5).run()
    heading = plain(at.subheader[0].value)
    assert heading.startswith("Output word 5 of 9: reads '4: petit'") and heading.endswith("writes '5: voit'")
    at = opened("output", model="translate", text=SENTENCE)
    position = at.selectbox(key="output_position")
    assert position.options[4] == "position 4: reads '4: petit', should write '5: voit'"  # the row read, as ticked
    assert list(charts(at)["output_loss"]["layout"]["xaxis"]["ticktext"])[4] == "5: voit"


@pytest.mark.parametrize(("model", "start"), [("translate", "<bos>"), ("paper-random", "[CLS]")])
def test_decoding_and_output_name_the_models_own_start_token(model, start):
    decoding_text = words(opened("decoding", model=model))
    assert f"reads '{start}' (its start token)" in decoding_text and "[BOS]" not in decoding_text
    output_text = words(opened("output", model=model))
    assert f"position i reads '{start}'" in output_text and "[BOS]" not in output_text


def test_paper_random_self_attention_counts_only_the_keys_a_step_sees(paper_random):
    expected = trace.run(paper_random, paper_random.example, 128)
    n = len(expected.target_tokens)
    assert n > 16  # longer than a column chart's 16 bars: the masked keys are left out
    at = stepping(opened("decoding", model="paper-random"))
    self_chart = charts(at)["decoding_self"]
    assert "of" not in self_chart["layout"]["title"]["text"]  # step 1 sees one key: nothing to count out of
    assert len(array(self_chart["data"][0]["y"])) == 1
    assert f"This step sees 1 of the {n} positions" in words(at)
    last = int(at.slider(key="decoding_position").proto.max)
    at.slider(key="decoding_position").set_value(last).run()
    drawn = charts(at)["decoding_self"]
    assert len(array(drawn["data"][0]["y"])) == last  # the last step sees `last` keys, all drawn, none masked
    assert drawn["layout"]["title"]["text"] == "Self-attention (masked)"
    assert f"This step sees {last} of the {n} positions" in words(at)


def test_find_heads_names_query_and_key_in_a_sentence_for_every_token():
    at = opened("find_heads", model="minilm", text="Bark is very cute and he is a dog")
    queries = at.selectbox(key="find_query")
    for query in (1, 5, 6):  # 'bark', 'and', 'he': a word as subject of "puts" reads as garbage
        at.selectbox(key="find_query").set_value(query).run()
        keys = at.selectbox(key="find_key")
        expected = f"the weight that query '{queries.options[query]}' puts on key '{keys.options[keys.index]}'"
        assert plain(at.subheader[0].value) == f"Every head: {expected}"
        title = charts(at)["find_grid"]["layout"]["title"]["text"]
        assert title == f"Weight {expected[len('the weight ') :]}"  # no HTML in these tokens: unescaped as is


def test_a_toy_input_longer_than_its_training_sentences_says_so():
    assert len(LONG.split()) > tasks.MAX_WORDS
    for page in ("decoding", "output"):
        text = words(opened(page, model="translate", text=LONG))
        bound = f"trained on sentences of at most {tasks.MAX_WORDS} words"
        assert "This sentence has 16 words" in text and bound in text
        assert "trained on sentences of at most" not in words(opened(page, model="translate", text=SENTENCE))


@pytest.mark.parametrize("page", ["model_view", "head_view"])
def test_attention_formula_writes_the_mask_for_decoder_self_attention(page):
    at = opened(page, model="translate", text=SENTENCE)
    for kind in ("encoder_self", "cross", "decoder_self"):
        at.radio(key=KIND_KEYS[page]).set_value(kind).run()
        formula = at.get("latex")[0].value.strip("$\n")
        assert formula.startswith(r"A_i = \mathrm{softmax}")
        assert (r" + M\right)" in formula and r"-\infty & k > q" in formula) == (kind == "decoder_self")


def test_decoding_position_comes_from_the_address_and_goes_back_into_it():
    """The address names a step by the position it reads, numbered as the heatmaps' ticks (from 0): output word 5
    reads position 4. An address from before the rename (?step=, from 1) keeps its step."""
    at = opened("decoding", model="translate", text=SENTENCE, position="4")
    assert at.slider(key="decoding_position").value == 5 and at.query_params["position"] == "4"
    assert plain(at.subheader[0].value).startswith("Output word 5 of 9: reads '4: ")
    at = opened("decoding", model="translate", text=SENTENCE, step="3")  # an address from before the rename
    assert at.slider(key="decoding_position").value == 3 and at.query_params["position"] == "2"
    assert plain(at.subheader[0].value).startswith("Output word 3 of 9: reads '2: chat'")
    at.button(key="decoding_next").click().run()
    assert at.slider(key="decoding_position").value == 4 and at.query_params["position"] == "3"
    at.slider(key="decoding_position").set_value(8).run()
    assert at.query_params["position"] == "7"
    at = opened("decoding", model="translate", text=SENTENCE, step="99")
    assert at.slider(key="decoding_position").value == 9 and at.query_params["position"] == "8"
    assert "asks for position 98, but this output's positions go from 0 to 8" in words(at)


def test_a_decoder_only_step_is_addressed_by_the_position_its_slider_and_title_show():
    """Step 12 on a decoder-only model: ?position=N opens the row the heatmaps' tick N names, its slider shows N and
    the address keeps N (issue 50: it counted from 1, one more than every page shows)."""
    text = "alpha bravo seven kilo alpha bravo seven kilo"
    at = opened("decoding", model="induction", text=text, position="5")
    assert at.select_slider(key="decoding_position").format_func(at.select_slider(key="decoding_position").value) == "5"
    assert at.query_params["position"] == "5"
    assert plain(at.subheader[0].value).startswith("Position 5 (0 to ")
    assert "reads '5: " in plain(at.subheader[0].value)
    at.button(key="decoding_back").click().run()
    assert at.query_params["position"] == "4" and plain(at.subheader[0].value).startswith("Position 4 (0 to ")
