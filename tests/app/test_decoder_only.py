"""A decoder-only model (a tiny random GPT-2 folder) through every page (AppTest via app.py): no exception, and what
is drawn and said is the decoder-only model's own: masked self-attention, next-token loss of the text itself."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.experiments import induction as explorer_induction
from attention_explorer.explorer.run import output, trace, walkthrough
from attention_explorer.models import induction, registry, train
from tests import tolerance
from tests.app import new_app, reveal, stepping
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

TEXT = "the cat sat on the mat because it was tired"
KEY = "folder:tiny-gpt2"
EVERY_PAGE = tuple(page.stem for pages in navigation.MENUS.values() for page in pages)


@pytest.fixture
def gpt2(gpt2_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    return registry.load(KEY)


def opened(page: str | None = None):
    at = new_app(page)
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    return at.run()


def text_of(at) -> str:
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.subheader, *at.header, *at.text]
    return plain(" ".join(str(p.value) for p in parts))


@pytest.mark.parametrize("page", EVERY_PAGE)
@pytest.mark.parametrize("model", [KEY, "induction"])
def test_every_page_opens_for_a_decoder_only_model(gpt2, page, model):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = TEXT if model == KEY else registry.MODELS[model].examples[0]
    at.run()
    assert not at.exception, (page, at.exception)
    assert not at.error, (page, [e.value for e in at.error])
    if page == "train":  # it reads no sidebar model: it describes every task it trains
        return
    words = text_of(at)
    assert "encoder-only" not in words and "Encoder self-attention" not in words, page
    assert "BERT family" not in words and "cross-attention of the last decoder layer" not in words, page


def test_attention_is_the_models_masked_self_attention(gpt2):
    at = opened("attention")
    expected = trace.run(gpt2, TEXT, gpt2.max_tokens).decoder_self.weights
    z = array(spec(at.get("plotly_chart")[0])["data"][0]["z"])
    layers, heads = expected.shape[:2]
    drawn = [(li, h) for li in range(layers) for h in range(heads) if np.array_equal(z, expected[li, h])]
    assert drawn, "the first chart is one of the model's heads"
    assert np.allclose(np.triu(z, 1), 0), "nothing above the diagonal: the causal mask"


def test_overview_draws_a_decoder_only_stack(gpt2):
    at = opened()
    words = text_of(at)
    assert "a decoder-only model (GPT-2 family)" in words
    figure = spec(at.get("plotly_chart")[0])
    labels = " ".join(a["text"] for a in figure["layout"]["annotations"])
    assert "Masked self-attention" in labels and "Cross-attention" not in labels and "Decoder-only" in labels
    assert "pre-LN" in labels and "Add &amp; Norm" not in labels  # pre-LN: the norm comes first, no Add & Norm
    assert not [i for i in at.info if "has no decoder" in i.value]


def test_tokens_step_explains_the_word_start_mark(gpt2):
    at = reveal(opened("tokens"), "tokens_predict")
    words = text_of(at)
    assert "Ġ stands for the space before a word" in words
    assert "fixed list" not in words


def test_loss_step_scores_the_text_itself(gpt2):
    at = opened("loss")
    result = trace.run(gpt2, TEXT, gpt2.max_tokens)
    ids = list(gpt2.tokenizer.encode(TEXT, gpt2.max_tokens).ids)
    scored = output.score(gpt2, ids, ids)
    assert scored.targets == result.source_tokens[1:]
    assert scored.epsilon == 0.0
    words = text_of(at)
    assert "the text itself" in words and "No label smoothing" in words
    assert f"{scored.mean:.4f}" in " ".join(m.value for m in at.metric)
    assert not [box for box in at.text_input if box.key == "output_target"]  # the target is the text itself


def test_final_linear_step_continues_the_text_and_samples(gpt2):
    at = opened("final_linear")
    assert not at.exception
    ids = list(gpt2.tokenizer.encode(TEXT, gpt2.max_tokens).ids)
    greedy = output.sample(gpt2, ids, "greedy", max_new=output.CONTINUATION)
    assert "Continue the text" in text_of(at)
    assert " ".join(gpt2.family.spelling.labels(greedy.tokens)) in text_of(at)  # as every page shows tokens
    at.selectbox(key="output_method").set_value("top-k").run()
    assert not at.exception
    words = text_of(at)
    assert "The layer has no bias b." in words and "tied" in words


def test_decoding_step_walks_the_texts_positions(gpt2):
    at = stepping(opened("decoding"))
    result = trace.run(gpt2, TEXT, gpt2.max_tokens)
    words = text_of(at)
    n = len(result.source_tokens)
    # it opens on the text's last position, the one that answers it: nothing in the text follows
    assert (
        f"Position {n - 1} (0 to {n - 1})" in words
        and f"predicts '{n}: {result.readable(result.output_tokens)[-1]}'" in words
    )
    assert "the text ends here: no next token in the text, only the model's own prediction" in words
    assert "Cross-attention" not in words
    at.button(key="decoding_back").click().run()
    assert not at.exception
    shown = result.readable(result.output_tokens)
    assert f"predicts '{n - 1}: {shown[-2]}'" in text_of(at)
    assert f"the text goes on with '{result.readable(result.source_tokens)[-1]}'" in text_of(at)


def test_word_level_merges_byte_level_words(gpt2):
    at = opened("attention")
    at.toggle(key="attention_words").set_value(True).run()
    assert not at.exception
    figure = spec(at.get("plotly_chart")[0])
    ticks = [str(t) for t in figure["layout"]["xaxis"]["ticktext"]]
    assert not any("Ġ" in t for t in ticks)


def test_a_session_moving_between_model_shapes_keeps_working(gpt2):
    at = opened("query_key_value")
    for model in ("translate", KEY, "minilm", KEY):
        at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(model).run()
        assert not at.exception, model


def test_head_statistics_give_every_head_an_induction_score_on_the_sentences_repeats(gpt2):
    text = "the cat sat on the mat. the cat sat on the mat."
    at = new_app("statistics")
    at.query_params["model"] = KEY
    at.query_params["text"] = text
    at.run()
    at.selectbox(key="stats_statistic").set_value("induction").run()
    assert not at.exception
    result = trace.run(gpt2, text, gpt2.max_tokens)
    ids = [gpt2.tokenizer.token_to_id(t) for t in result.source_tokens]
    expected = induction.induction_scores(np.asarray(result.decoder_self.weights), ids)
    z = array(spec(at.get("plotly_chart")[0])["data"][0]["z"])
    # reduced by the run (explorer.run.reducers): each query's float32 sum over its targets, at most one per key, in
    # another order; non-negative, so relative to the score
    bound = tolerance.reordered(len(result.source_tokens), expected)
    tolerance.assert_within(z, expected, bound, "induction scores reduced by the run")


def test_a_sentence_without_repeats_is_measured_on_a_repeated_random_sequence(minilm):
    at = new_app("statistics")
    at.query_params["model"] = "minilm"
    at.query_params["text"] = "one two three"
    at.run()
    at.selectbox(key="stats_statistic").set_value("induction").run()
    assert not at.exception
    assert any("No token of this sentence occurs twice" in i.value for i in at.info)
    repeat = explorer_induction.random_repeat(minilm)
    assert repeat.tokens[0] == "[CLS]" and repeat.tokens[-1] == "[SEP]"
    half = (len(repeat.tokens) - 2) // 2
    assert repeat.tokens[1 : 1 + half] == repeat.tokens[1 + half : -1]
    z = array(spec(at.get("plotly_chart")[-1])["data"][0]["z"])
    np.testing.assert_allclose(z, repeat.induction, rtol=1e-6)
    ids = list(repeat.ids)
    np.testing.assert_allclose(repeat.induction, induction.induction_scores(repeat.weights, ids))


def test_training_induction_draws_each_heads_scores_rising_as_the_head_forms():
    at = new_app("train").run()
    at.selectbox(key="train_task").set_value("induction").run()
    assert at.number_input(key="train_steps").value == train.RECIPES["induction"].steps  # the whole recipe by default
    at.number_input(key="train_steps").set_value(400).run()  # the head forms between steps 300 and 350 (seed 0)
    at.number_input(key="train_every").set_value(50).run()
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error
    run = at.session_state["train_run"]
    steps, induction_scores, previous_scores = run.head_scores()
    assert steps == list(range(0, 401, 50))
    figures = [spec(c) for c in at.get("plotly_chart")]
    (scores,) = [f for f in figures if "Induction score, each head" in str(f["layout"].get("annotations"))]
    first = next(t for t in scores["data"] if t["name"] == "layer 2 head 1")
    np.testing.assert_allclose(array(first["y"]), induction_scores[:, 1, 0])
    assert np.nanmax(induction_scores[0]) < 0.3 < 0.7 < np.nanmax(induction_scores[-1, 1])  # it formed in layer 2
    losses = run.curve()[1]
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 1.0
    layer, head = run.snapshots[-1].strongest(0)
    assert layer == 1 and any(
        f["layout"]["title"]["text"].startswith("Highest induction score: layer 2")
        for f in figures
        if f["layout"].get("title")
    )


def test_byte_level_tokens_are_counted_by_their_words(gpt2):
    at = reveal(opened("tokens"), "tokens_predict")
    assert "10 words became" in text_of(at)  # a 'Ġ' token's span starts on its space, not its word


def test_without_label_smoothing_no_chart_or_sentence_says_label_smoothed(gpt2):
    for page in ("loss", "final_linear"):
        at = opened(page)
        names = [trace.get("name", "") for chart in at.get("plotly_chart") for trace in spec(chart)["data"]]
        assert not [name for name in names if "label-smoothed" in name], page
        assert "The paper smooths the target" not in text_of(at)
        assert "-0.0" not in " ".join(m.value for m in at.metric)


def test_keys_drawn_past_the_keys_picker_are_keys_the_query_can_see():
    weights = np.array([0.5, 0.3, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0])
    visible = weights > 0
    picked = walkthrough.strongest_keys(weights, 4, keep=(2,), visible=visible)
    assert list(picked) == [0, 1, 2]  # three visible keys: no masked one fills the fourth place
