"""The Corpus page (Explore > Heads over many texts) through app.py: the grid draws the run's own pooled statistics,
a head's top texts open in the attention heatmap with that head, bad input says why, and the address carries the
corpus's digest, never its texts."""

from __future__ import annotations

import re

import numpy as np
from streamlit.testing.v1 import AppTest

from attention_explorer.explorer.app import corpus_runs, state
from attention_explorer.explorer.run import corpus, corpus_input, corpus_points, corpus_stats, trace
from tests.app import new_app
from tests.figdata import array, plain, spec
from tests.hostile import NAMED, assert_literal

PAGE = "explorer/pages/corpus.py"
TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park and the dog ran home",
    "she read the letter twice",
]


def on_page(at: AppTest | None = None) -> AppTest:
    at = at or new_app().run()
    at.switch_page(PAGE).run()
    return at


def pasted(texts) -> AppTest:
    at = on_page()
    at.radio(key=state.CORPUS_SOURCE).set_value("paste").run()
    at.text_area(key=state.CORPUS_PASTE).set_value("\n".join(texts)).run()
    return at


def charts(at: AppTest) -> list[dict]:
    return [spec(c) for c in at.get("plotly_chart")]


def test_pasted_lines_run_on_a_click_and_the_grid_is_the_runs_own(minilm):
    texts = [*TEXTS, "a text only this test runs"]  # not kept by another test: the click is needed
    at = pasted(texts)
    assert not charts(at)  # nothing runs before the click, which says its estimate
    said = r"That takes (under a second|about \d+ s) on this server"  # cost.about: a few texts take under a second
    assert any(re.match(said, plain(i.value)) for i in at.info), [i.value for i in at.info]
    at.button(key="corpus_run").click().run()
    assert not at.exception, at.exception
    direct = corpus.run(minilm, corpus_input.prepare(minilm, corpus_input.from_lines("\n".join(texts)), 128))
    at.selectbox(key=state.CORPUS_STATISTIC).set_value("previous_token").run()
    grid = charts(at)[0]["data"][0]
    np.testing.assert_array_equal(array(grid["z"]), direct.statistic("previous_token"))
    # the address names the corpus by its digest; the texts are nowhere in it
    digest = corpus_runs.digest(corpus_input.from_lines("\n".join(texts)))
    assert at.query_params[state.URL_CORPUS] == [digest] or at.query_params[state.URL_CORPUS] == digest
    assert not any("the cat sat" in str(v) for v in at.query_params.values())


def ran(at: AppTest) -> AppTest:
    """Click Run where the statistics are not kept yet (another test may have run this corpus in this process)."""
    if any(b.key == "corpus_run" for b in at.button):
        at.button(key="corpus_run").click().run()
    return at


def test_a_top_text_opens_in_the_attention_heatmap_on_that_head(minilm):
    at = ran(pasted(TEXTS))
    at.selectbox(key=state.CORPUS_STATISTIC).set_value("self").run()
    at.selectbox(key=state.CORPUS_LAYER).set_value(1).run()
    at.selectbox(key=state.CORPUS_HEAD).set_value(3).run()
    stats = corpus_runs.kept_stats("minilm", corpus_input.from_lines("\n".join(TEXTS)), 128)
    first, _ = stats.top_texts("self", 1, 3)[0]
    bars = [c for c in charts(at) if c["data"][0]["type"] == "bar"][0]["data"][0]
    np.testing.assert_allclose(array(bars["x"]), [v for _, v in stats.top_texts("self", 1, 3, 8)])
    at.button(key=f"corpus_open_{first}").click().run()
    assert at.session_state[state.TEXT] == TEXTS[first]
    # the visitor's own pasted line, said to be what it is: not "one of this model's examples"
    notes = " ".join(plain(i.value) for i in at.info)
    assert "a text opened from the Corpus page; the sentence you had is kept" in notes
    assert "one of this model's examples" not in notes
    assert at.selectbox(key="attention_layer").value == 1 and at.selectbox(key="attention_head").value == 3
    result = trace.run(minilm, TEXTS[first], 128)
    np.testing.assert_array_equal(array(charts(at)[0]["data"][0]["z"]), result.encoder_self.weights[1, 3])


def test_one_text_is_counted_in_the_singular(minilm):
    at = pasted(["one line only this test pastes"])
    assert at.button(key="corpus_run").label == "Run the 1 text through the model"
    assert any("From pasted lines: 1 text," in plain(c.value) for c in at.caption)
    assert corpus_input.texts(1) == "1 text" and corpus_input.texts(1200) == "1,200 texts"
    said = corpus_runs.progress_text("Running 1 text through the model:", 0, 1, 2.0)
    assert said == "Running 1 text through the model: 0 of 1 text, about 2 s left"  # one "about", not two


def test_a_corpus_is_tokenized_once_not_again_by_the_click_that_runs_it(minilm, monkeypatch):
    calls = []
    prepare = corpus_input.prepare
    monkeypatch.setattr(corpus_input, "prepare", lambda *a, **k: calls.append(1) or prepare(*a, **k))
    long = " ".join(["word"] * 20_000) + " only this test"  # tokenized whole, then cut: seconds for a 2 MB line
    at = pasted([long])
    assert len(calls) == 1
    at.button(key="corpus_run").click().run()
    assert not at.exception and len(calls) == 1  # the estimate covered the run; no second tokenizing came with it


def test_bad_input_says_why_and_long_lines_are_cut_with_a_count(minilm):
    at = pasted(["   ", ""])
    assert not at.exception
    assert any("Paste some texts" in plain(i.value) for i in at.info)
    long = " ".join(["word"] * 400)
    at = pasted([long, "a short one"])
    notes = [plain(w.value) for w in at.warning]
    assert any("1 of 2 texts were cut to 128 tokens" in n and "the rest runs" in n for n in notes), notes


def test_the_strongest_position_named_is_the_texts_own(minilm):
    prepared = corpus_input.prepare(minilm, corpus_input.from_texts(TEXTS), 128)
    # one text a batch: the weights are the single run's, bit for bit (test_corpus), so an argmax is compared exactly
    # (a batch's float32 rounding could swap two near-equal positions on another CPU)
    stats = corpus.run(minilm, prepared, batch_size=1)
    for i, text in enumerate(TEXTS):
        weights = trace.run(minilm, text, 128).encoder_self.weights  # (L, H, T, T)
        np.testing.assert_array_equal(
            stats.strongest_at[i, corpus_stats.STATISTICS.index("self")],
            np.diagonal(weights, axis1=-2, axis2=-1).argmax(-1),
        )
        np.testing.assert_array_equal(
            stats.strongest_at[i, corpus_stats.STATISTICS.index("first_token")], weights[..., 0].argmax(-1)
        )


def test_a_shared_address_opens_the_corpus_by_its_digest_and_an_unknown_one_says_so(minilm):
    texts = [*TEXTS, "shared through an address"]
    ran(pasted(texts))  # one visitor runs the corpus: the server keeps it by its digest
    digest = corpus_runs.digest(corpus_input.from_lines("\n".join(texts)))
    at = new_app()  # another visitor, opening the shared address of the Corpus page
    at.query_params[state.URL_CORPUS] = digest
    at.switch_page(PAGE).run()
    assert at.radio(key=state.CORPUS_SOURCE).value == "shared"
    assert len(charts(at)) >= 2  # the grid and the top texts, without another click
    unknown = new_app()
    unknown.query_params[state.URL_CORPUS] = "0" * 16
    unknown.switch_page(PAGE).run()
    assert any("no longer holds" in plain(w.value) for w in unknown.warning)


def test_the_queries_and_keys_drawn_are_the_heads_own(minilm):
    at = ran(pasted(TEXTS))
    at.selectbox(key=state.CORPUS_LAYER).set_value(0).run()
    at.selectbox(key=state.CORPUS_HEAD).set_value(2).run()
    at.button(key="corpus_points").click().run()
    prepared = corpus_input.prepare(minilm, corpus_input.from_lines("\n".join(TEXTS)), 128)
    points = corpus_points.query_key_points(minilm, prepared, 0, 2)
    scatter = [c for c in charts(at) if c["data"][0]["type"] == "scattergl"][0]["data"]
    np.testing.assert_array_equal(array(scatter[0]["x"]), points.queries[:, 0])
    np.testing.assert_array_equal(array(scatter[1]["y"]), points.keys[:, 1])


def test_the_stack_step_opens_its_head_over_many_texts(minilm):
    at = new_app().run()
    at.switch_page("explorer/pages/model_view.py").run()
    layer, head = at.selectbox(key=state.FOCUS_LAYER).value, at.selectbox(key=state.FOCUS_HEAD).value
    at.button(key="model_corpus").click().run()
    assert at.header[0].value == "Heads over many texts"
    ran(at.switch_page(PAGE))  # AppTest reruns the page it was given last; a browser stays where the click went
    assert at.selectbox(key=state.CORPUS_LAYER).value == layer and at.selectbox(key=state.CORPUS_HEAD).value == head
    assert any(c["data"][0]["type"] == "bar" for c in charts(at))  # that head's top texts among the samples


def test_hostile_lines_run_and_every_token_stays_literal(minilm):
    """The corpus page reads no sidebar sentence (test_hostile_pages): its own lines are hostile here instead."""
    lines = [t for t in NAMED if t.strip() and "\n" not in t and len(t) < 5_000]
    at = ran(pasted(lines))
    assert not at.exception, [e.value for e in at.exception]
    at.button(key="corpus_points").click().run()
    assert not at.exception
    drawn = charts(at)
    assert len(drawn) >= 3  # the grid, the top texts, the queries and keys
    for figure in at.get("plotly_chart"):
        assert_literal(spec(figure))
