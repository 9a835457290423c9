"""The lesson through app.py: every step says "Step i of N" under its own address with Previous / Next along the
path, one focus follows the class from step to step, and presenter mode enlarges the text."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.labels import position_label
from tests.app import new_app
from tests.figdata import array, plain, spec

SENTENCE = "the small red cat sees a big dog"


def opened(page: str, **params: str):
    at = new_app(page)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def links(at) -> list[tuple[str, str]]:
    """(label, target page) of every page link drawn."""
    return [(link.proto.label, link.proto.page) for link in at.get("page_link")]


@pytest.mark.slow
@pytest.mark.parametrize("page", navigation.STEPS, ids=[page.stem for page in navigation.STEPS])
def test_each_step_says_where_it_is_and_links_its_neighbours(page):
    at = opened(page.stem, model="translate", text=SENTENCE)
    assert at.header[0].value == f"Step {page.step} of {navigation.N_STEPS}: {page.title}"
    before, after = navigation.neighbours(page.stem)
    drawn = links(at)
    previous = [label for label, _ in drawn if label.startswith("Previous")]
    following = [label for label, _ in drawn if label.startswith("Next")]
    assert previous == [f"Previous: {before.label}"] * 2  # top and bottom
    assert following == ([f"Next: {after.label}"] * 2 if after else [])
    assert at.query_params["model"] == ["translate"] or at.query_params["model"] == "translate"


def test_the_overview_starts_the_lesson():
    at = opened("overview", model="translate", text=SENTENCE)
    starts = [(label, target) for label, target in links(at) if label.startswith("Start")]
    assert starts and starts[0][0] == f"Start: {navigation.STEPS[0].label}"
    assert all(target.endswith("tokens") or target.endswith("tokens.py") for _, target in starts)


def test_the_token_layer_and_head_chosen_on_one_step_are_shown_on_the_next_ones():
    at = opened("query_key_value", model="translate", text=SENTENCE)
    at.radio(key=state.FOCUS_KIND).set_value("encoder_self").run()
    at.selectbox(key=state.FOCUS_TOKEN).set_value(3).run()
    at.selectbox(key=state.FOCUS_LAYER).set_value(1).run()
    at.selectbox(key=state.FOCUS_HEAD).set_value(2).run()
    for page in ("scores", "multi_head", "why_attention", "add_norm", "model_view"):
        at.switch_page(f"explorer/pages/{page}.py").run()
        assert not at.exception, (page, [e.value for e in at.exception])
        if page == "why_attention":  # draws no pickers: the focus outlives it
            continue
        assert at.selectbox(key=state.FOCUS_LAYER).value == 1, page
        if page != "add_norm":
            assert at.selectbox(key=state.FOCUS_HEAD).value == 2, page
        if page != "model_view":
            assert at.selectbox(key=state.FOCUS_TOKEN).value == 3, page
            assert at.query_params["token"] in ("3", ["3"])
    at.switch_page("explorer/pages/add_norm.py").run()
    heading = [s.value for s in at.subheader if s.value.startswith("1.")][0]
    assert heading == "1. Encoder layer 2"


def test_scores_step_asks_first_then_reveals_the_models_strongest_key():
    at = opened("scores", model="translate", text=SENTENCE)
    assert "qkv_weights" not in [c.key for c in at.get("plotly_chart")]  # the answer waits for the class
    guess = next(s for s in at.selectbox if s.key.startswith("scores_predict_guess"))
    guess.set_value(0).run()
    at.button(key="scores_predict_reveal").click().run()
    assert not at.exception
    charts = {c.key: spec(c) for c in at.get("plotly_chart")}
    weights = array(charts["qkv_weights"]["data"][0]["y"])
    layer, head = at.selectbox(key=state.FOCUS_LAYER).value, at.selectbox(key=state.FOCUS_HEAD).value
    query = at.selectbox(key=state.FOCUS_TOKEN).value
    from attention_explorer.explorer.run import trace
    from attention_explorer.models import registry

    loaded = registry.load("translate")
    expected = trace.run(loaded, SENTENCE, loaded.max_tokens)
    kind = at.radio(key=state.FOCUS_KIND).value
    row = expected.attention(kind).weights[layer, head, query]
    keys = expected.tokens_for(kind)[1]
    best = int(row.argmax())
    # green where the class was right, else a warning
    (said,) = [plain(b.value) for b in [*at.success, *at.warning] if "Your class" in b.value]
    assert position_label(best, keys[best]) in said and f"{row[best]:.4f}" in said
    np.testing.assert_allclose(weights, row, rtol=1e-6)  # the drawn weights are the model's


def test_presenter_mode_from_the_address_enlarges_text_and_charts():
    at = opened("scores", model="translate", text=SENTENCE, present="1")
    assert at.session_state[state.PRESENT] is True
    assert at.query_params["present"] in ("1", ["1"])
    css = [h.proto.body for h in at.get("html")]
    assert any("font-size: 20px" in body for body in css)
    for chart in at.get("plotly_chart"):
        figure = spec(chart)
        assert figure["layout"]["font"]["size"] >= 16
        for axis in [v for k, v in figure["layout"].items() if k.startswith(("xaxis", "yaxis"))]:
            assert axis["tickfont"]["size"] >= 16
    plain = opened("scores", model="translate", text=SENTENCE)
    assert not any("font-size: 20px" in h.proto.body for h in plain.get("html"))


def test_decoding_can_ask_the_class_for_each_word_before_it_is_written():
    from attention_explorer.explorer.run import decoding, trace
    from attention_explorer.models import registry

    at = opened("decoding", model="translate", text=SENTENCE)
    assert "decoding_next_token" not in [c.key for c in at.get("plotly_chart")]  # on by default, as every step asks
    at.toggle(key="decoding_ask").set_value(False).run()
    assert "decoding_next_token" in [c.key for c in at.get("plotly_chart")]  # off: every chart drawn
    at.toggle(key="decoding_ask").set_value(True).run()
    assert "decoding_next_token" not in [c.key for c in at.get("plotly_chart")]
    assert plain(at.subheader[0].value).endswith("writes '?'")
    guess = next(s for s in at.selectbox if s.key.startswith("decoding_predict_guess"))
    guess.set_value(0).run()
    at.button(key="decoding_predict_reveal").click().run()
    loaded = registry.load("translate")
    step = decoding.step(trace.run(loaded, SENTENCE, loaded.max_tokens), 0, 1)  # the mean over heads
    said = plain(" ".join(b.value for b in [*at.success, *at.warning]))  # green only where the class was right
    assert f"The decoder writes {step.chosen!r}" in said
    assert f"{float(step.top_probabilities[0]):.4f}" in said
    assert "decoding_next_token" in [c.key for c in at.get("plotly_chart")]
    at.button(key="decoding_next").click().run()  # the next word is a new question
    assert plain(at.subheader[0].value).endswith("writes '?'")


@pytest.mark.parametrize(
    ("model", "text", "index"),
    [("translate", SENTENCE, 2), ("induction", "alpha bravo seven kilo alpha bravo seven kilo", 5)],
)
def test_decoding_hides_the_asked_word_in_every_chart_until_it_is_revealed(model, text, index):
    import html

    from attention_explorer.explorer.run import decoding, trace
    from attention_explorer.models import registry
    from tests.app import reveal

    at = opened("decoding", model=model, text=text, step=str(index + 1))
    at.toggle(key="decoding_ask").set_value(True).run()
    loaded = registry.load(model)
    result = trace.run(loaded, text, loaded.max_tokens)
    step = decoding.step(result, index, result.decoder_self.n_layers - 1)  # the page opens on the last layer's mean
    escaped = [html.escape(t) for t in result.target_tokens]

    def shown() -> str:
        parts = [*at.markdown, *at.caption, *at.info, *at.success, *at.warning, *at.subheader, *at.text]
        return plain(" ".join(str(p.value) for p in parts)) + " ".join(c.proto.spec for c in at.get("plotly_chart"))

    def self_attention_keys() -> list[str]:
        (bars,) = [spec(c) for c in at.get("plotly_chart") if c.key == "decoding_self"]
        return list(bars["data"][0]["customdata"])

    assert self_attention_keys() == escaped[: index + 1]  # the positions this step reads, none after it
    if loaded.family.has_source:  # a decoder-only model's own text repeats its words: only the chart can tell
        assert step.chosen not in shown() and result.target_tokens[index + 1] not in shown()
    reveal(at, "decoding_predict")
    assert f"writes {step.chosen!r}" in shown() or f"predicts {position_label(index + 1, step.chosen)!r}" in shown()
    if len(result.target_tokens) <= 16:  # a longer output's chart draws only the positions this step sees
        assert self_attention_keys() == escaped
    else:
        assert self_attention_keys() == escaped[: index + 1]


def test_loss_step_asks_whether_a_wrong_answer_costs_more_then_shows_both_losses():
    from attention_explorer.explorer.app import cached
    from attention_explorer.explorer.app.state import Choice

    at = opened("loss", model="translate", text=SENTENCE)
    question = plain(" ".join(m.value for m in at.markdown if "Predict first" in m.value))
    wrong = question.split("another order: '")[1].split("'")[0]
    assert sorted(wrong.split()) == sorted(["le", "chat", "rouge", "petit", "voit", "un", "chien", "grand"])
    guess = next(s for s in at.selectbox if s.key.startswith("loss_predict_guess"))
    guess.set_value(0).run()  # "It goes up"
    at.button(key="loss_predict_reveal").click().run()
    assert not at.exception
    right, _ = cached.get_scored(Choice("translate", SENTENCE, 32), "")
    other, _ = cached.get_scored(Choice("translate", SENTENCE, 32), wrong)
    said = plain(at.success[0].value)
    assert f"{other.mean:.4f}" in said and f"{right.mean:.4f}" in said
    assert other.mean > right.mean and "goes up" in said and "right" in said
