"""The experiments' pages through app.py (AppTest): turn heads off, every head's effect, the logit lens and the
attribution, for the toy translator, the induction model and MiniLM; figure data is the model's own."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.app.state import ABLATION_HEADS as HEADS
from attention_explorer.explorer.app.state import ABLATION_LAYER as LAYER
from attention_explorer.explorer.experiments import ablate, attribution, lens
from attention_explorer.explorer.run import trace
from attention_explorer.explorer.views.experiments import address, named_heads
from attention_explorer.models import registry
from attention_explorer.models.ablation import Head
from tests.app import new_app, reveal
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

TEXTS = {
    "translate": "the small red cat sees a big dog",
    "induction": "kilo seven zulu echo two mike kilo seven zulu echo two mike",
    "minilm": "The animal didn't cross the street because it was tired",
}
PAGES = ("ablation", "head_effects", "logit_lens", "attribution", "turn_off", "layer_predictions")


def opened(page: str, model: str):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = TEXTS[model]
    return at.run()


def text_of(at) -> str:
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.subheader, *at.header, *at.metric]
    return plain(" ".join(str(getattr(p, "value", "")) + " " + str(getattr(p, "label", "")) for p in parts))


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("model", list(TEXTS))
def test_every_experiment_page_opens(page, model):
    at = opened(page, model)
    assert not at.exception, (page, model, at.exception)
    assert not at.error, [e.value for e in at.error]
    if model == "minilm" and page in ("logit_lens", "attribution", "layer_predictions"):
        assert "no decoder and no output distribution" in text_of(at)


def test_no_head_picked_says_so():
    at = opened("ablation", "translate")
    assert "Pick at least one head" in text_of(at)


def test_turning_off_the_alignment_heads_is_drawn_from_the_model():
    at = opened("ablation", "translate")
    heads = ["cross:2.1", "cross:2.2", "cross:2.3", "cross:2.4"]
    at.multiselect(key=HEADS).set_value(heads).run()
    assert not at.exception
    loaded = registry.load("translate")
    clean = trace.run(loaded, TEXTS["translate"], loaded.max_tokens)
    expected = ablate.outcome(loaded, clean, [Head("cross", 1, h) for h in range(4)], "zero")
    bars = [spec(c) for c in at.get("plotly_chart")][1]  # the grid, then the probabilities
    np.testing.assert_allclose(array(bars["data"][0]["y"]), expected.before.right_probabilities(), rtol=1e-6)
    np.testing.assert_allclose(array(bars["data"][1]["y"]), expected.after.right_probabilities(), rtol=1e-6)
    assert expected.after.right_probabilities().mean() < 0.5 < expected.before.right_probabilities().mean()
    assert " ".join(expected.written) in text_of(at)


def test_a_whole_layer_goes_off_at_once():
    at = opened("ablation", "translate")
    at.selectbox(key=LAYER).set_value(("cross", 1)).run()
    assert not at.exception
    assert at.multiselect(key=HEADS).value == ["cross:2.1", "cross:2.2", "cross:2.3", "cross:2.4"]
    assert at.selectbox(key=LAYER).value is None  # a picker: the selection says what is off
    assert "With every head of layer 2 (cross-attention) off" in text_of(at)


def test_heads_off_are_named_layer_by_layer():
    shapes = {"encoder_self": (2, 4), "decoder_self": (2, 4), "cross": (2, 4)}
    heads = [Head("cross", 1, 0), Head("encoder_self", 0, 2), Head("cross", 1, 2), Head("encoder_self", 1, 1)]
    assert named_heads(heads, shapes) == (
        "layer 1, head 3 (encoder self-attention); layer 2, head 2 (encoder self-attention); "
        "layer 2, heads 1 and 3 (cross-attention)"
    )
    assert named_heads([Head("decoder_self", 1, h) for h in range(4)], {"decoder_self": (2, 4)}) == (
        "every head of layer 2"
    )


def test_every_head_off_is_refused():
    at = opened("ablation", "induction")
    at.multiselect(key=HEADS).set_value([f"{i}.{h}" for i in (1, 2) for h in (1, 2, 3, 4)]).run()
    assert not at.exception
    assert "turns off all 8 heads" in text_of(at)


def test_effect_grid_is_the_batched_effects():
    at = opened("head_effects", "induction")
    loaded = registry.load("induction")
    run = trace.run(loaded, TEXTS["induction"], loaded.max_tokens)
    expected = ablate.effects(loaded, ablate.answer(loaded, run))
    grid = [spec(c) for c in at.get("plotly_chart")][0]
    np.testing.assert_allclose(array(grid["data"][0]["z"]), expected.grid("decoder_self", (2, 4)), atol=1e-9)


def test_logit_lens_and_attribution_are_the_model_s():
    loaded = registry.load("induction")
    run = trace.run(loaded, TEXTS["induction"], loaded.max_tokens)
    # the read-outs read the text's last row too (its target the model's own top token): a column per token
    answer = ablate.with_text_end(loaded, ablate.answer(loaded, run), run)
    found = lens.lens(loaded, answer)
    at = opened("logit_lens", "induction")
    drawn = [spec(c) for c in at.get("plotly_chart")][0]
    assert len(drawn["data"][0]["x"]) == len(run.source_tokens)
    np.testing.assert_allclose(array(drawn["data"][0]["z"]), found.top_probabilities[..., 0], rtol=1e-6)
    at = opened("attribution", "induction")
    row = max(i for i, c in enumerate(answer.counted) if c)
    states = run.decoder_states  # the page splits the row from the states the run kept (attribution.one_row)
    entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    split = attribution.attribute(loaded, answer, row, answer.targets[row], entering)
    _, bars, head_map = [spec(c) for c in at.get("plotly_chart")]
    assert abs(split.total - split.logit) < 1e-4
    assert set(np.round(array(bars["data"][0]["x"]), 5)) <= set(np.round(split.values, 5))
    (outline,) = head_map["layout"]["shapes"]  # the row whose logit is split, outlined on the head's map
    assert (outline["y0"], outline["y1"]) == (row - 0.5, row + 0.5)


def test_turn_off_step_says_when_no_single_head_is_needed():
    at = reveal(opened("turn_off", "translate"), "turn_off_predict")
    assert not at.exception
    loaded = registry.load("translate")
    clean = trace.run(loaded, TEXTS["translate"], loaded.max_tokens)
    top, _ = ablate.effects(loaded, ablate.answer(loaded, clean)).ranked()[0]
    found = ablate.outcome(loaded, clean, [top], "zero")
    counted = np.array(found.answer.counted)
    before = found.before.right_probabilities()[counted].mean()
    after = found.after.right_probabilities()[counted].mean()
    assert before - after < 0.05  # the translator spreads its alignment over layer 2's cross heads
    assert f"alone only moves the right answer's mean probability from {before:.1%} to {after:.1%}" in text_of(at)


@pytest.mark.parametrize("model", list(TEXTS))
def test_turn_off_step_asks_for_a_layer_and_shows_the_ablations_own_numbers(model):
    at = opened("turn_off", model)
    loaded = registry.load(model)
    shapes = ablate.model_shapes(loaded)
    (box,) = [s for s in at.selectbox if s.key.startswith("turn_off_predict_guess_")]
    assert len(box.options) == sum(n_layers for n_layers, _ in shapes.values())  # one option per layer
    assert not at.dataframe and not at.get("plotly_chart")  # the answer waits for the class
    question = text_of(at)
    ranks_by = "cosine" if model == "minilm" else "log-probability"
    assert "Ranked by how far" in question and ranks_by in question
    reveal(at, "turn_off_predict")
    assert not at.exception
    clean = trace.run(loaded, TEXTS[model], loaded.max_tokens)
    found = ablate.layer_effects(loaded, ablate.answer(loaded, clean))
    assert list(at.dataframe[0].value.iloc[:, 1]) == [round(change, 4) for _, change in found.ranked()]
    (bars,) = [spec(c) for c in at.get("plotly_chart") if c.key == "turn_off_layers_chart"]
    drawn = array(bars["data"][0]["x"])
    np.testing.assert_array_equal(drawn, [change for _, change in found.ranked()][: len(drawn)])
    (kind, layer), change = found.ranked()[0]
    heads = [Head(kind, layer, h) for h in range(shapes[kind][1])]
    outcome = ablate.outcome(loaded, clean, heads, "zero")
    # green where the class was right, else a warning
    (said,) = [plain(b.value) for b in [*at.success, *at.warning] if "Your class" in b.value]
    if outcome.cosine is not None:
        # the layer's row of a batched forward against the outcome's own run: a guard on the result (about 6e-9 apart
        # here, where the layer off moves the cosine by 0.2), kept at 1e-6
        assert change == pytest.approx(outcome.cosine - 1, abs=1e-6)
        assert f"falls to {outcome.cosine:.4f}" in said
    else:
        counted = np.array(outcome.answer.counted)
        before, after = (s.right_probabilities()[counted] for s in (outcome.before, outcome.after))
        # the same ablation batched and alone: a guard on the result (about 1e-6 apart here, where the layer off moves
        # the summed log-probability by tens of nats), kept at 1e-4
        assert change == pytest.approx(np.log(after).sum() - np.log(before).sum(), abs=1e-4)
        assert f"falls by {-change:.3f}" in said and f"from {before.mean():.1%} to {after.mean():.1%}" in said
    if model == "translate":  # the striking result: the last cross-attention layer off, the translation falls apart
        assert (kind, layer) == ("cross", 1) and after.mean() < 0.2 < 0.9 < before.mean()
        assert "**Heads off:** " + " ".join(outcome.written) in " ".join(plain(m.value) for m in at.markdown)
    at.button(key="turn_off_open_layer").click().run()  # that layer, already off, on Turn heads off
    assert not at.exception
    assert at.multiselect(key=HEADS).value == [address(h, len(shapes)) for h in heads]
    assert at.session_state[state.PAGE] == "ablation"


def test_turn_off_step_on_random_weights_says_no_layer_has_a_job():
    at = new_app("turn_off")
    at.query_params["model"] = "paper-random"
    reveal(at.run(), "turn_off_predict")
    assert not at.exception
    words = text_of(at)
    assert "These weights are random: no layer has learned a job" in words
    assert "The model needs" not in words and "spreads the work" not in words and "matters on its own" not in words


def test_a_moved_map_is_drawn_with_its_difference():
    at = opened("ablation", "induction")
    at.multiselect(key=HEADS).set_value(["1.1", "1.2", "1.3", "1.4"]).run()  # layer 1 off: layer 2's maps move
    assert not at.exception
    loaded = registry.load("induction")
    clean = trace.run(loaded, TEXTS["induction"], loaded.max_tokens)
    found = ablate.outcome(loaded, clean, [Head("decoder_self", 0, h) for h in range(4)], "zero")
    layer, head = np.unravel_index(np.argmax(found.moved["decoder_self"]), (2, 4))
    assert layer == 1
    before, after, difference = [spec(c) for c in at.get("plotly_chart")][-3:]
    expected = found.weights["decoder_self"][layer, head]
    np.testing.assert_allclose(array(after["data"][0]["z"]), expected, rtol=1e-6)
    clean_map = clean.attention("decoder_self").weights[layer, head]
    np.testing.assert_allclose(array(before["data"][0]["z"]), clean_map, rtol=1e-6)
    np.testing.assert_allclose(array(difference["data"][0]["z"]), expected - clean_map, atol=1e-6)


@pytest.mark.parametrize(
    ("text", "ranks_first"),
    [
        (TEXTS["induction"], True),  # a clean repeat: the right word comes to the top in layer 2
        # the examples run together and cut at 32 tokens: no clean repeat, the last counted row is wrong
        (" ".join(" ".join(registry.load("induction").task.examples).split() * 2), False),
    ],
)
def test_layer_predictions_step_names_where_the_right_token_first_ranks_first(text, ranks_first):
    at = new_app("layer_predictions")
    at.query_params["model"] = "induction"
    at.query_params["text"] = text
    at.run()
    guess = next(s for s in at.selectbox if s.key.startswith("layer_predictions_predict_guess"))
    guess.set_value(0).run()
    at.button(key="layer_predictions_predict_reveal").click().run()
    assert not at.exception
    loaded = registry.load("induction")
    run = trace.run(loaded, text, loaded.max_tokens)
    answer = ablate.with_text_end(loaded, ablate.answer(loaded, run), run)
    found = lens.lens(loaded, answer)
    position = max(i for i, c in enumerate(answer.counted) if c)  # the toy task's: its right word is known
    ranks = found.target_rank[:, position]
    assert (ranks == 1).any() == ranks_first
    if ranks_first:
        first = int(np.argmax(ranks == 1))
        assert f"It first ranks first in the row {found.reads[first]}." in text_of(at)
    else:
        assert f"It never ranks first, not even at the output (rank {int(ranks[-1])} there)" in text_of(at)


def test_each_ablation_is_explained_where_it_is_chosen_and_named_under_its_results():
    from attention_explorer.explorer.experiments import replacements

    at = opened("ablation", "induction")
    at.multiselect(key=HEADS).set_value(["2.1", "2.2"]).run()
    loaded = registry.load("induction")
    clean = trace.run(loaded, TEXTS["induction"], loaded.max_tokens)
    heads = [Head("decoder_self", 1, 0), Head("decoder_self", 1, 1)]
    for method in ("zero", "mean", "resample"):
        at.radio(key="ablation_method").set_value(method).run()
        assert not at.exception
        words = text_of(at)
        assert plain(replacements.explain(loaded, method)) in words
        expected = ablate.outcome(loaded, clean, heads, method)
        assert plain(expected.convention[:1].upper() + expected.convention[1:]) in words
        bars = [spec(c) for c in at.get("plotly_chart")][1]
        np.testing.assert_allclose(array(bars["data"][1]["y"]), expected.after.right_probabilities(), rtol=1e-6)
    assert "another text of the sample (200 inputs of the toy induction task" in words
    at = opened("head_effects", "induction")
    at.radio(key="effects_method").set_value("mean").run()
    assert not at.exception
    means = ablate.replacement(loaded, "mean")
    expected = ablate.effects(loaded, ablate.answer(loaded, clean), means)
    grid = [spec(c) for c in at.get("plotly_chart")][0]
    np.testing.assert_allclose(array(grid["data"][0]["z"]), expected.grid("decoder_self", (2, 4)), atol=1e-9)
    assert f"over all {means.tokens:,} token positions of 200 inputs of the toy induction task" in text_of(at)


def test_attribution_splits_a_logit_difference_when_a_second_token_is_chosen():
    loaded = registry.load("induction")
    run = trace.run(loaded, TEXTS["induction"], loaded.max_tokens)
    answer = ablate.answer(loaded, run)
    at = opened("attribution", "induction")
    assert at.selectbox(key="attribution_against").value is None
    assert "share of the logit of" in text_of(at)
    at.selectbox(key="attribution_against").select_index(1).run()  # the first token offered after "nothing"
    assert not at.exception
    row = max(i for i, c in enumerate(answer.counted) if c)
    token, against = answer.targets[row], at.selectbox(key="attribution_against").value
    assert against is not None and against != token
    split = attribution.attribute(loaded, answer, row, token, against=against)
    words = text_of(at)
    assert f"Logit difference {split.token} \u2212 {split.against} at position {row}" in words
    assert f"share of the logit difference {split.token} \u2212 {split.against}" in words
    _, bars, _ = [spec(c) for c in at.get("plotly_chart")]
    assert set(np.round(array(bars["data"][0]["x"]), 5)) <= set(np.round(split.values, 5))
