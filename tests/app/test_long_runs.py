"""A computation estimated past cost.ASK_AFTER_SECONDS (another full run of a long text, every head turned off) waits
for a click: the page opens with no error and its cheap views drawn, says what the work is and about how long it
takes; after the click it draws the model's own numbers. The threshold is set to 0 here, so short texts stand in for
2,048 tokens, and every run recomputes its layers with any read of every layer at once refused, as at that length."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attention_explorer.explorer.app import cached, store
from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.run import compare, cost, layers, reference_view, trace
from attention_explorer.models import registry
from tests.app import new_app
from tests.figdata import array, plain, spec

# the estimate as said (cost.about): these texts are short, and a page made to ask says "under a second"
TAKES = re.compile(r"takes (about \d+ s|under a second)")

pytestmark = pytest.mark.slow


@pytest.fixture
def long(monkeypatch):
    """Every computation asks first; every run keeps only its residual stream, and no view may stack every layer."""
    monkeypatch.setattr(cost, "ASK_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(trace, "KEEP_ALL_BYTES", 0)
    monkeypatch.setattr(layers, "WHOLE_BYTES", 0)


def opened(page: str, model: str, text: str, **params: str):
    """The page with the text's first run made: it asks first too (store.asked_first), and is run at the click."""
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    key = first_run(at)
    return at.button(key=key).click().run() if key else at  # none: the store keeps the run from another test


def first_run(at) -> str | None:
    """The key of the first run's button (store.asked_first), if the page asks."""
    return next((b.key for b in at.button if b.key.startswith(store.FIRST_RUN)), None)


def test_a_long_first_run_asks_first_with_its_time_and_memory_then_runs(minilm, long):
    store.shared().clear()
    text = "The keeper of the lighthouse counted every ship that passed"
    at = new_app("attention")
    at.query_params["model"], at.query_params["text"] = "minilm", text
    at.run()
    said = asked(at, first_run(at))
    tokens = len(minilm.tokenizer.encode(text, 128).ids)
    needs = cost.forward_bytes(minilm.model.config, tokens)
    assert "first run on this text is long" in said and "only when you ask" in said
    assert f"about {cached.admission.gigabytes(needs)} of the server's memory" in said
    assert not at.get("plotly_chart")  # nothing drawn from a run not made
    at.button(key=first_run(at)).click().run()
    assert not at.exception and not at.error and first_run(at) is None
    kept = trace.run(minilm, text, 128, keep_all=True).encoder_self.weights
    drawn = z(charts(at)["attention_heatmap"])
    assert any(np.array_equal(drawn, head) for layer in kept for head in layer)  # the model's own numbers


def charts(at) -> dict:
    return {c.key: spec(c) for c in at.get("plotly_chart")}


def z(figure) -> np.ndarray:
    return array(figure["data"][0]["z"])


def asked(at, button: str) -> str:
    """The page in its ask-first state: no error, the button there, and what it says."""
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.button(key=button).label
    return plain(" ".join(str(i.value) for i in at.info))


def test_the_reference_asks_first_then_draws_the_streamed_differences(minilm, long):
    text = "The lighthouse keeper counted the ships that passed at night"
    at = opened("reference", "minilm", text)
    said = asked(at, "reference_run")
    assert "transformers" in said and TAKES.search(said) and "only when you ask" in said
    drawn = charts(at)
    assert "reference_ours" in drawn and "reference_theirs" not in drawn and "reference_grid" not in drawn
    layer, head = at.selectbox(key="reference_layer").value, at.selectbox(key="reference_head").value
    at.button(key="reference_run").click().run()
    assert not at.exception and not at.error
    kept = trace.run(minilm, text, 128, keep_all=True).encoder_self.weights
    ours = np.stack([kept[i] for i in range(len(kept))])
    theirs = reference_view.attention(reference_view.load(), minilm, text, 128)
    drawn = charts(at)
    np.testing.assert_array_equal(z(drawn["reference_grid"]), reference_view.max_abs_difference(ours, theirs))
    np.testing.assert_array_equal(z(drawn["reference_theirs"]), theirs[layer, head])


def test_every_heads_effect_asks_first_then_draws_the_batched_effects(long):
    text = "kilo seven zulu echo two mike kilo seven zulu echo two mike kilo"
    at = opened("head_effects", "induction", text)
    said = asked(at, "effects_run")
    assert "8 heads" in said and TAKES.search(said)
    assert not at.get("plotly_chart")
    at.button(key="effects_run").click().run()
    assert not at.exception and not at.error
    loaded = registry.load("induction")
    expected = ablate.effects(loaded, ablate.answer(loaded, trace.run(loaded, text, loaded.max_tokens)))
    np.testing.assert_allclose(z(charts(at)["effects_grid"]), expected.grid("decoder_self", (2, 4)), atol=1e-9)


def test_sentence_b_asks_first_with_a_drawn_then_compares_every_head(minilm, long):
    a_text, b_text = "The quiet river bends past the old mill", "The quiet rivers bend past the old mills"
    at = opened("compare_sentences", "minilm", a_text)
    at.text_input(key="compare_b").set_value(b_text).run()
    said = asked(at, "compare_run")
    assert "Sentence B is one more run" in said and "all 6 layers of A and of B" in said
    drawn = charts(at)
    assert "compare_a" in drawn and "compare_b_map" not in drawn and "compare_changed" not in drawn
    a_kept = trace.run(minilm, a_text, 128, keep_all=True).encoder_self.weights
    a = np.stack([a_kept[i] for i in range(len(a_kept))])
    layer, head = at.selectbox(key="compare_layer").value, at.selectbox(key="compare_head").value
    np.testing.assert_array_equal(z(drawn["compare_a"]), a[layer, head])
    at.button(key="compare_run").click().run()
    assert not at.exception and not at.error
    b_kept = trace.run(minilm, b_text, 128, keep_all=True).encoder_self.weights
    b = np.stack([b_kept[i] for i in range(len(b_kept))])
    alignment = compare.by_position(*(trace.run(minilm, t, 128).source_tokens for t in (a_text, b_text)))
    worst, _ = compare.changed_most(compare.difference(a, b, alignment))  # float64, every layer at once
    drawn = charts(at)
    # the page's float32 maxima are the float64 ones rounded to float32
    np.testing.assert_array_equal(z(drawn["compare_changed"]), worst.astype(np.float32))
    layer, head = at.selectbox(key="compare_layer").value, at.selectbox(key="compare_head").value
    assert (layer, head) == np.unravel_index(worst.argmax(), worst.shape)
    np.testing.assert_array_equal(z(drawn["compare_b_map"]), b[layer, head])


def test_a_long_sentence_b_is_kept_beside_a_not_run_again_at_every_rerun(minilm, long, monkeypatch):
    """Two long runs do not fit the store together (two 2,048-token SmolLM2 runs): with a store too small for any run
    (it keeps the grid and the like), B's run still happens once, on its own shelf, and another head reads it again."""
    from attention_explorer.explorer.run import memo  # noqa: PLC0415

    small = memo.BoundedCache(32 * 1024)  # a run of these texts' residual stream alone is 130 KB
    monkeypatch.setattr(store, "shared", lambda: small)
    runs = []
    real = trace.run
    monkeypatch.setattr(trace, "run", lambda loaded, text, *a, **o: runs.append(text) or real(loaded, text, *a, **o))
    a_text, b_text = "The small boat drifted past the harbour wall", "The small boats drifted past the harbour walls"
    at = opened("compare_sentences", "minilm", a_text)
    at.text_input(key="compare_b").set_value(b_text).run()
    at.button(key="compare_run").click().run()
    at.selectbox(key="compare_head").set_value(5).run()
    assert not at.exception and not at.error
    assert runs.count(b_text) == 1 and runs.count(a_text) > 1  # A's run, not kept by this store, ran each time
    b = trace.run(minilm, b_text, 128, keep_all=True).encoder_self.weights
    np.testing.assert_array_equal(z(charts(at)["compare_b_map"]), b[at.selectbox(key="compare_layer").value, 5])


def test_the_turn_off_step_asks_before_each_layer_and_then_each_head_is_turned_off(long):
    """The lesson's Turn heads off step: after the guess, each layer off (one forward a layer) waits for a click, and
    so does every head off alone; after both clicks the grids are the model's own."""
    from tests.app import reveal

    store.shared().clear()  # an earlier test's runs of this sentence would be kept, and kept work never asks
    text = "the small red cat sees a big dog"
    at = reveal(opened("turn_off", "translate", text), "turn_off_predict")
    said = asked(at, "turn_off_layers_run")
    assert "layers turned off" in said and TAKES.search(said)
    assert "turn_off_layers_chart" not in charts(at)
    at.button(key="turn_off_layers_run").click().run()
    said = asked(at, "turn_off_heads_run")
    assert "heads turned off alone" in said and "turn_off_layers_chart" in charts(at)
    at.button(key="turn_off_heads_run").click().run()
    assert not at.exception and not at.error
    loaded = registry.load("translate")
    expected = ablate.effects(loaded, ablate.answer(loaded, trace.run(loaded, text, loaded.max_tokens)))
    grid = charts(at)["turn_off_grid"]
    np.testing.assert_allclose(
        z(grid), expected.grid("encoder_self", ablate.model_shapes(loaded)["encoder_self"]), atol=1e-9
    )


def test_turning_heads_off_on_a_long_text_asks_before_the_run_without_them(long, minilm):
    """Turn heads off with heads picked: the grid outlines them at once, the run without them waits for a click, and
    then each head's moved attention is the model's own, read a layer at a time."""
    from attention_explorer.models.ablation import Head

    store.shared().clear()  # as above: kept work never asks
    text = "The lighthouse keeper counted the ships that passed at night"
    at = opened("ablation", "minilm", text, off="2.3")
    said = asked(at, "ablation_outcome_run")
    assert "heads off" in said and TAKES.search(said)
    assert not z(charts(at)["ablation_grid"]).any()  # nothing measured yet
    at.button(key="ablation_outcome_run").click().run()
    assert not at.exception and not at.error
    clean = trace.run(minilm, text, 128, keep_all=True)
    expected = ablate.outcome(minilm, clean, [Head("encoder_self", 1, 2)], "zero")
    np.testing.assert_allclose(z(charts(at)["ablation_grid"]), expected.moved["encoder_self"], atol=1e-6)


def test_qkv_on_a_long_text_runs_only_the_new_layer_again_and_a_head_change_nothing(minilm, long, monkeypatch):
    """A long text keeps no layer, and one layer outgrows the layer cache (SmolLM2 at 2,421 tokens): the walkthrough
    reads its layer once (each array read apart ran the whole layer again: 9 runs of it per rerun), a layer change
    runs that layer alone, a head change none; the numbers drawn are the model's own."""
    from attention_explorer.explorer.app import state
    from attention_explorer.explorer.run import memo, walkthrough

    monkeypatch.setattr(layers, "_CACHE", memo.BoundedCache(0))
    computed: list[int] = []
    original = layers.StackLayers._compute
    monkeypatch.setattr(layers.StackLayers, "_compute", lambda self, i: computed.append(i) or original(self, i))
    text = "The lighthouse keeper counted the ships that passed at night"
    at = opened("qkv", "minilm", text)
    assert not at.exception
    layer = at.selectbox(key=state.FOCUS_LAYER).value
    assert computed.count(layer) == 1  # once, not once per array
    other = (layer + 3) % 12
    sidebar = state.sidebar(at.session_state)
    assert cached.layer_wait(sidebar, "encoder_self", other) > 0  # what the spinner's estimate says
    computed.clear()
    at.selectbox(key=state.FOCUS_LAYER).set_value(other).run()
    assert not at.exception and computed == [other]
    computed.clear()
    head = (at.selectbox(key=state.FOCUS_HEAD).value + 1) % 12
    at.selectbox(key=state.FOCUS_HEAD).set_value(head).run()
    assert not at.exception and computed == []
    query = at.selectbox(key=state.FOCUS_TOKEN).value
    kept = trace.run(minilm, text, 128, keep_all=True)
    expected = walkthrough.steps(kept, "encoder_self", other, head, query)
    drawn = charts(at)
    np.testing.assert_array_equal(array(drawn["qkv_weights"]["data"][0]["y"]), expected.weights)
    np.testing.assert_array_equal(array(drawn["qkv_q"]["data"][0]["z"])[0], expected.q)
