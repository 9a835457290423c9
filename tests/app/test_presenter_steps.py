"""Presenter mode on every lesson step (AppTest via app.py, ?present=1, a tiny random GPT-2 folder): the sidebar is
folded, so each step shows the sentence under its title; and every chart's text, read off the figure as sent, is
16 px or more (axis ticks and titles, legends, annotations, a trace's own text, a bar's number: Plotly would shrink
it to fit its bar, "0.816" at 9 px, unless told a smallest size)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.figures import experiments as experiment_figures
from attention_explorer.explorer.figures.decoding import top_k_bars
from attention_explorer.explorer.figures.style import PRESENT_TICK_FONT, styled
from attention_explorer.explorer.views.frame import in_view
from attention_explorer.models import registry
from tests.app import new_app
from tests.app.test_decoder_only import KEY, TEXT
from tests.figdata import plain

SMALLEST = 16  # px: what a class reads from the back of a room
STEPS = [page.stem for page in navigation.STEPS if page.stem != "train"]  # train reads no sidebar sentence


@pytest.fixture
def gpt2(gpt2_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    return registry.load(KEY)


def small_text(figure: dict) -> list[str]:
    """Every text of a figure spec set below SMALLEST px (or left to Plotly's 12 px default where it draws some)."""
    layout, found = figure["layout"], []
    base = (layout.get("font") or {}).get("size")
    if base is None or base < SMALLEST:
        found.append(f"layout font {base}")
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("visible", True):
            size = (axis.get("tickfont") or {}).get("size")
            if size is not None and size < SMALLEST:
                found.append(f"{name} ticks {size}")
    for annotation in layout.get("annotations", []):
        size = (annotation.get("font") or {}).get("size")
        if size is not None and size < SMALLEST:
            found.append(f"annotation {annotation.get('text')!r} {size}")
    legend = (layout.get("legend") or {}).get("font", {}).get("size")
    if legend is not None and legend < SMALLEST:
        found.append(f"legend {legend}")
    for trace in figure["data"]:
        size = (trace.get("textfont") or {}).get("size")
        if isinstance(size, int | float) and size < SMALLEST:
            found.append(f"{trace.get('type')} text {size}")
        if trace.get("type") == "bar" and trace.get("text") is not None:
            smallest = (layout.get("uniformtext") or {}).get("minsize") or 0
            if smallest < SMALLEST or (layout.get("uniformtext") or {}).get("mode") != "show":
                found.append(f"bar numbers may shrink (uniformtext {layout.get('uniformtext')})")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("page", STEPS)
def test_presenter_mode_shows_the_sentence_and_large_chart_text(gpt2, page):
    at = new_app(page)
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.query_params["present"] = "1"
    at.run()
    for box in [s for s in at.selectbox if "_guess_" in s.key]:  # answer: what the reveal draws too
        box.set_value(0).run()
        at.button(key=box.key.split("_guess_")[0] + "_reveal").click().run()
    assert not at.exception, (page, at.exception)
    words = plain(" ".join(str(m.value) for m in at.markdown))
    assert f"**The sentence:** {TEXT}" in words, page  # the sidebar is folded: the sentence is on the step itself
    for chart in at.get("plotly_chart"):
        small = small_text(json.loads(chart.proto.spec))
        assert not small, (page, chart.proto.id, small)


def test_a_long_sentence_keeps_its_start_and_its_end_in_view():
    text = "When Anna and Ben went to the park, " * 20 + "Ben gave a ball to"
    shown = in_view(text)
    assert len(shown) <= 163 and shown.startswith("When Anna and Ben") and shown.endswith("Ben gave a ball to")
    assert in_view("The capital of\nFrance is") == "The capital of France is"


def test_a_bar_number_is_never_shrunk_below_16_px_in_presenter_mode():
    figure = top_k_bars(["\u2423Anna", "\u2423Ben", "\u2423the"], np.array([0.816, 0.1, 0.02]), "\u2423Anna", "Next")
    assert any(t.type == "bar" and t.text is not None for t in figure.data)  # it draws its numbers
    spec = json.loads(styled(figure, present=True).to_json())
    assert not small_text(spec)
    assert spec["layout"]["uniformtext"] == {"minsize": PRESENT_TICK_FONT["size"], "mode": "show"}
    assert (
        "uniformtext" not in json.loads(styled(top_k_bars(["a"], np.array([1.0]), "a", ""), False).to_json())["layout"]
    )


@pytest.mark.parametrize("worst", [2, 7, 40, 100, 440, 1000, 14221, 49152])
def test_rank_ticks_keep_16_px_labels_apart(worst):
    """SmolLM2's ranks reach 14221: 10000 beside it overlapped at 16 px. On the smallest rank axis (presenter mode's
    360 px figure) adjacent labels are at least RANK_LABEL_PX apart, itself more than a 16 px label."""
    ticks = experiment_figures.rank_ticks(worst)
    assert ticks[0] == 1 and ticks[-1] == worst
    decades = np.log10(worst * 1.25 / 0.8)
    px = np.diff(np.log10(ticks)) * experiment_figures.RANK_PLOT_PX / decades
    assert px.min() >= experiment_figures.RANK_LABEL_PX > SMALLEST, (ticks, px)
    if worst == 14221:
        assert 10000 not in ticks


def test_the_rank_axis_is_as_tall_as_rank_ticks_assumes_in_presenter_mode():
    figure = experiment_figures.rank_lines([f"L{i}" for i in range(61)], np.arange(61) + 1.0, np.zeros(61), "x")
    figure.update_layout(height=360)  # layer_predictions' present_height
    margins = figure.layout.margin.t + figure.layout.margin.b
    x_labels = 90  # the reads named under it, turned -45 degrees at 16 px
    assert 360 - margins - x_labels >= experiment_figures.RANK_PLOT_PX
