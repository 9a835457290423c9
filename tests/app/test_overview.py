"""Overview, the lesson's map (AppTest via app.py): figure 1 drawn for the chosen model, each box numbered with its
lesson step and opening that step when clicked, the sentence's tokens, every step listed in order, and one click
from an encoder-only model to the translation model."""

from __future__ import annotations

import json

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.overview import BADGES
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests.app import new_app
from tests.figdata import array, plain, spec

# What each box of the paper's figure 1 is, by its label, and the lesson step that shows it
ENCODER_STEMS = {"tokens", "embedding", "positional", "query_key_value", "add_norm", "model_view"}
DECODER_STEMS = {"decoding", "final_linear", "loss"}


def stem_for(label: str) -> str:
    """The lesson page that shows the box labelled `label`."""
    rules = [
        (("Inputs", "Outputs"), "tokens"),
        (("embedding",), "embedding"),
        (("positions",), "positional"),
        (("Masked", "Cross-attention"), "decoding"),
        (("self-attention",), "query_key_value"),
        (("Add &amp; Norm", "Feed-forward"), "add_norm"),
        (("Linear", "Softmax"), "final_linear"),
        (("Loss",), "loss"),
    ]
    return next(stem for words, stem in rules if any(word in label for word in words))


def step_number(stem: str) -> str:
    """The number the lesson gives a box: the attention box stands for the steps from Q, K, V to W^O."""
    if stem == "query_key_value":
        return f"{navigation.BY_STEM['query_key_value'].step}–{navigation.BY_STEM['multi_head'].step}"
    return str(navigation.BY_STEM[stem].step)


def opened(key: str, text: str | None = None) -> AppTest:
    at = new_app().run()
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value(key).run()
    if text is not None:
        at.sidebar.text_area[0].set_value(text).run()
    at.switch_page(navigation.OVERVIEW.script).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def trace_of(figure: dict, meta: str) -> dict:
    return next(t for t in figure["data"] if t.get("meta") == meta)


def at_row(trace: dict, y: float, x0: float, x1: float) -> list[int]:
    """Indices of a trace's points on the row y between x0 and x1."""
    xs, ys = array(trace["x"]), array(trace["y"])
    return [i for i, (px, py) in enumerate(zip(xs, ys, strict=True)) if abs(py - y) < 1e-9 and x0 <= px <= x1]


def boxes(figure: dict) -> list[dict]:
    """Every drawn box, read back from the figure by where things are: its label, the step number in its badge and
    the stems of the click targets on it."""
    layout = figure["layout"]
    badges, clicks = trace_of(figure, BADGES), trace_of(figure, CLICKS)
    found = []
    for shape in (s for s in layout["shapes"] if "fillcolor" in s):
        x0, x1, y = shape["x0"], shape["x1"], (shape["y0"] + shape["y1"]) / 2
        texts = [a for a in layout["annotations"] if not a["showarrow"]]
        labels = [a["text"] for a in texts if abs(a["y"] - y) < 1e-9 and x0 <= a["x"] <= x1]
        numbers = [badges["text"][i] for i in at_row(badges, y, x0, x1)]
        stems = {clicks["customdata"][i][0] for i in at_row(clicks, y, x0, x1)}
        found.append({"label": labels, "number": numbers, "stems": stems, "y": y, "x0": x0, "x1": x1})
    return found


def stack_titles(figure: dict) -> list[dict]:
    """Each stack's title, its badge and the click targets on it."""
    badges, clicks = trace_of(figure, BADGES), trace_of(figure, CLICKS)
    found = []
    for title in (a for a in figure["layout"]["annotations"] if "N = " in a["text"]):
        x, y = title["x"], title["y"]
        numbers = [badges["text"][i] for i in at_row(badges, y, x - 1, x)]
        stems = {clicks["customdata"][i][0] for i in at_row(clicks, y, x - 1, x + 2)}
        found.append({"title": title["text"], "number": numbers, "stems": stems})
    return found


def shown_tokens(at: AppTest) -> list[str]:
    line = next(m.value for m in at.markdown if m.value.startswith("**Its "))
    return plain(line).split("as the model reads them: ", 1)[1].split(" · ")


def click(at: AppTest, point: dict) -> AppTest:
    """A click on the figure's click target `point`, as the browser reports it (AppTest has no chart clicks): the
    session's widget states plus the chart's selection, then one run."""
    chart = at.get("plotly_chart")[0]
    states = chart.root.get_widget_states()
    selection = {"selection": {"points": [point], "point_indices": [point["point_index"]], "box": [], "lasso": []}}
    states.widgets.append(WidgetState(id=chart.proto.id, string_value=json.dumps(selection)))
    return at._run(states)


def target(figure: dict, box: dict) -> dict:
    """The point a click on the middle of `box` selects: its nearest click target."""
    clicks = trace_of(figure, CLICKS)
    middle = (box["x0"] + box["x1"]) / 2
    xs, ys = array(clicks["x"]), array(clicks["y"])
    i = min(at_row(clicks, box["y"], box["x0"], box["x1"]), key=lambda i: abs(xs[i] - middle))
    point = {"x": float(xs[i]), "y": float(ys[i]), "customdata": list(clicks["customdata"][i])}
    return {**point, "curve_number": figure["data"].index(clicks), "point_number": i, "point_index": i}


@pytest.mark.parametrize("key", ["minilm", "translate"])
def test_the_map_numbers_every_box_with_the_step_that_shows_it(key):
    at = opened(key)
    loaded = registry.load(key)
    config = loaded.model.config
    figure = spec(at.get("plotly_chart")[0])
    texts = [a["text"] for a in figure["layout"]["annotations"]]
    assert f"Encoder: N = {config.n_encoder_layers} layers" in texts
    assert any(f"h = {config.n_heads}" in t for t in texts)
    assert any(f"{config.d_model} → {config.d_ff}" in t for t in texts)
    assert any("Decoder" in t for t in texts) == config.is_encoder_decoder

    drawn = boxes(figure)
    assert len(drawn) == (19 if config.is_encoder_decoder else 7)
    for box in drawn:
        (label,) = box["label"]
        stem = stem_for(label)
        assert box["stems"] == {stem}, label  # a click anywhere on it opens its step
        assert box["number"] == [step_number(stem)], label
    for stack in stack_titles(figure):
        assert stack["number"] == [str(navigation.BY_STEM["model_view"].step)] and stack["stems"] == {"model_view"}

    clickable = {row[0] for row in trace_of(figure, CLICKS)["customdata"]}
    lacking = {page.stem for page in navigation.lacking(loaded.family)}
    assert clickable == ENCODER_STEMS | (DECODER_STEMS if config.is_encoder_decoder else set())
    assert lacking == (set() if config.is_encoder_decoder else DECODER_STEMS | {"layer_predictions"})
    assert not clickable & lacking

    text = at.session_state[state.TEXT]
    expected = trace.run(loaded, text, at.session_state[state.MAX_TOKENS], encoder_only=True).source_tokens
    assert shown_tokens(at) == list(expected)
    assert any(plain(m.value) == f"**The sentence:** {text}" for m in at.markdown)

    links = [(link.proto.page, link.proto.label) for link in at.get("page_link")]
    assert [pair for pair in links if not pair[1].startswith("Start:")] == [(p.stem, p.label) for p in navigation.STEPS]
    assert links.count(("tokens", f"Start: {navigation.STEPS[0].label}")) == 2  # under the title and at the bottom


def test_an_encoder_only_model_names_the_steps_it_lacks_and_offers_the_translation_model():
    at = opened("minilm")
    (info,) = at.info
    assert all(page.label in plain(info.value) for page in navigation.lacking(registry.load("minilm").family))
    at.button(key="overview_translate").click().run()
    assert not at.exception
    assert at.session_state[state.MODEL] == navigation.TRANSLATE
    assert at.session_state[state.TEXT] == navigation.TRANSLATE_EXAMPLE
    assert at.sidebar.text_area[0].value == navigation.TRANSLATE_EXAMPLE
    assert not at.info  # the translation model lacks no step: nothing to offer
    figure = spec(at.get("plotly_chart")[0])
    assert {row[0] for row in trace_of(figure, CLICKS)["customdata"]} >= DECODER_STEMS
    loaded = registry.load(navigation.TRANSLATE)
    assert shown_tokens(at) == list(
        trace.run(loaded, navigation.TRANSLATE_EXAMPLE, at.session_state[state.MAX_TOKENS]).source_tokens
    )


@pytest.mark.parametrize(
    ("key", "label", "stem"),
    [
        ("minilm", "Feed-forward", "add_norm"),
        ("minilm", "Multi-head self-attention", "query_key_value"),
        ("translate", "Cross-attention", "decoding"),
        ("translate", "Loss", "loss"),
    ],
)
def test_clicking_a_box_opens_its_step(key, label, stem):
    at = opened(key)
    figure = spec(at.get("plotly_chart")[0])
    box = next(b for b in boxes(figure) if b["label"][0].startswith(label))
    click(at, target(figure, box))
    assert not at.exception
    page = navigation.BY_STEM[stem]
    assert at.session_state[state.PAGE] == stem
    assert at.header[0].value == f"Step {page.step} of {navigation.N_STEPS}: {page.title}"
    assert state.DRILL_TO not in at.session_state  # followed once, not again on the next run


def test_clicking_the_stack_opens_the_stack_step():
    at = opened("minilm")
    figure = spec(at.get("plotly_chart")[0])
    clicks = trace_of(figure, CLICKS)
    i = next(i for i, row in enumerate(clicks["customdata"]) if row[0] == "model_view")
    point = {"x": float(array(clicks["x"])[i]), "y": float(array(clicks["y"])[i]), "customdata": ["model_view"]}
    click(at, {**point, "curve_number": figure["data"].index(clicks), "point_number": i, "point_index": i})
    assert at.session_state[state.PAGE] == "model_view"


def test_the_sentence_and_its_tokens_are_shown_literally():
    text = "**not bold** <b>x</b> $y$ [link](x)"
    at = opened("minilm", text)
    assert any(plain(m.value) == f"**The sentence:** {text}" for m in at.markdown)
    expected = trace.run(registry.load("minilm"), text, at.session_state[state.MAX_TOKENS]).source_tokens
    assert shown_tokens(at) == list(expected) and "*" in expected


def test_a_sentence_the_model_cannot_read_still_gets_the_map():
    at = opened("translate", "zebras juggle quietly")  # words the toy model does not know
    assert "'zebras'" in plain(at.info[0].value)  # which words it does not know, and that it knows none
    assert any(plain(m.value) == "It knows none of the 3 words typed." for m in at.markdown)
    assert plain(at.button(key="unreadable_example").label).endswith(registry.load("translate").example)
    assert at.get("plotly_chart") and len(at.get("page_link")) == navigation.N_STEPS + 2
