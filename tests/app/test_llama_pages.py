"""A Llama-family model (SmolLM2-135M-Instruct, and a tiny random Llama folder) through every page (AppTest via
app.py): no exception, and what is said is true for a rotary, RMSNorm, SwiGLU, grouped-query decoder."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.experiments import ablate, attribution, lens
from attention_explorer.explorer.run import positions, trace
from attention_explorer.models import registry
from bench.inputs import text_of as long_text
from tests import tolerance
from tests.app import new_app, reveal
from tests.app.test_decoder_only import text_of
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

TEXT = "The capital of France is"
EVERY_PAGE = tuple(page.stem for pages in navigation.MENUS.values() for page in pages)
KEY = "folder:tiny-llama"


@pytest.fixture
def llama(llama_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-llama={llama_folder}"}))
    return registry.load(KEY)


def opened(page: str, model: str = "smollm2", text: str = TEXT):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    return at.run()


@pytest.mark.parametrize("page", EVERY_PAGE)
def test_every_page_opens_for_smollm2(smollm2, page):
    at = opened(page)
    assert not at.exception, (page, at.exception)
    assert not at.error, (page, [e.value for e in at.error])
    if page == "train":  # it trains a toy, and says that it is not the sidebar's model
        assert "not SmolLM2-135M-Instruct (pretrained)" in text_of(at)
        return
    words = text_of(at)
    # nothing a Llama model does not have: no encoder, no sinusoid or learned table added, no LayerNorm, no biases
    wrongs = (
        "W^O + b^O",
        "the position it adds",
        "with its own W^Q, W^K, W^V",
        "encoder-only",
        "BERT family",
        "projections each have a bias",
        "LayerNorm(x)",
        "pre-LN (as GPT-2)",
        "+ b^V_i",
    )
    for wrong in wrongs:
        assert wrong not in words, (page, wrong)


def test_every_page_opens_for_a_tiny_llama_folder(llama):
    for page in EVERY_PAGE:
        at = opened(page, KEY, "the cat sat on the mat because it was tired")
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])


def test_positional_page_shows_rotary_positions(smollm2):
    at = opened("positional")
    words = text_of(at)
    assert "adds nothing to the embedding" in words and "base, 100000" in words
    charts = [spec(c) for c in at.get("plotly_chart")]
    theta = positions.rotary_frequencies(smollm2)
    np.testing.assert_allclose(theta, 100000.0 ** (-np.arange(0, 64, 2) / 64), rtol=1e-5)
    first = charts[0]["data"][0]  # pair 0: cos(position x theta_0) at whole positions
    np.testing.assert_allclose(array(first["y"]), np.cos(np.arange(len(array(first["y"]))) * theta[0]), atol=1e-6)
    # the score by distance: its point in the text is the model's own scaled score for that pair
    distance = charts[1]["data"]
    result = trace.run(smollm2, TEXT, smollm2.max_tokens)
    layer = at.selectbox(key="qkv_layer").value
    head = at.selectbox(key="qkv_head").value
    query = len(result.source_tokens) - 1
    key = query - 1  # the page opens on the previous token
    own = result.decoder_self.scaled_scores[layer, head, query, key]
    assert distance[1]["x"] == [query - key] and distance[1]["y"][0] == pytest.approx(float(own))
    # the curve turns the unrotated q and k by the distance (1) where the model turned them by their positions: q.k's
    # Dh terms, each pair's turn (2 terms and a table's rounding) and the angles' rounding, which grows with the
    # position; relative to |q| |k| / sqrt(Dh), which bounds sum |q_i k_i| whatever the turn
    q = result.decoder_self.q_unrotated[layer, head, query].astype(np.float64)
    k = result.decoder_self.k_unrotated[layer, head, key].astype(np.float64)
    d_head = len(q)
    bound = tolerance.reordered(d_head + 4 + query, np.linalg.norm(q) * np.linalg.norm(k) / np.sqrt(d_head))
    tolerance.assert_within(array(distance[0]["y"])[query - key], float(own), bound, "the score by distance")


def test_qkv_names_the_shared_key_value_heads(smollm2):
    at = opened("query_key_value")
    at.selectbox(key="qkv_head").set_value(4).run()
    words = text_of(at)
    assert "query heads 4, 5 and 6 share one key/value head" in words
    assert "no bias" in words and "Before turning, q =" in words


def test_add_norm_and_overview_say_rmsnorm_and_swiglu(smollm2):
    words = text_of(opened("add_norm"))
    assert "RMSNorm" in words and "SwiGLU" in words and "RMSNorm (no mean taken away, no beta)" in words
    overview = opened("overview")
    title = spec(overview.get("plotly_chart")[0])["layout"]["title"]["text"]
    assert "h = 9 sharing 3 key/value heads" in title and "RMSNorm" in title


def test_each_step_says_what_the_paper_did_and_what_this_model_does(smollm2):
    expected = {
        "positional": "nothing added: queries and keys turned by position (rotary, base 100000)",
        "query_key_value": "9 query heads sharing 3 key/value heads",
        "add_norm": "pre-norm, x + Sublayer(RMSNorm(x)); a gated SiLU feed-forward (SwiGLU)",
        "scores": "every layer's self-attention masked: each token sees itself and those before it",
        "multi_head": "9 x 64 = 576, concatenated, then W^O (no bias); 3 key/value heads make a key/value cache 3x",
        "model_view": "30 decoder layers of 9 heads",
        "final_linear": "tied to the embedding, after a final RMSNorm",
        "layer_predictions": "each of its 30 decoder layers read through its final RMSNorm and the output matrix",
    }
    for stem, said in expected.items():
        words = text_of(opened(stem))
        assert "2017 paper:" in words and f"This model: {said}" in words, stem
    # the paper's own architecture says so
    at = new_app("positional")
    at.query_params["model"] = "translate"
    assert "This model: the same." in text_of(at.run())


def test_final_linear_shows_what_comes_after_the_text(smollm2):
    at = opened("final_linear")
    result = trace.run(smollm2, TEXT, smollm2.max_tokens)
    n = len(result.source_tokens)
    # it opens on the text's last position, which answers it: no next token in the text, the model's own prediction
    assert at.selectbox(key="output_position").value == n - 1
    assert at.selectbox(key="output_position").options[-1] == (
        f"position {n - 1}: reads '{n - 1}: {result.readable(result.source_tokens)[-1]}', no next token in the "
        "text: the model's own top prediction"
    )
    first = spec(at.get("plotly_chart")[0])
    bars = first["data"][0]
    assert len(first["data"]) == 1  # no target: the text ends here
    assert result.top_tokens[-1][0] == "ĠParis"  # the tokenizer's spelling; the page shows it as text
    assert first["layout"]["yaxis"]["ticktext"][0] == "␣Paris (the model's own top prediction)"
    np.testing.assert_allclose(array(bars["x"]), result.top_probabilities[-1], rtol=1e-6)
    words = text_of(at)
    assert "the model's most likely next token is '␣Paris' (p = 0.77 at T = 1)" in words
    assert "As text (greedy):  The capital of France is[ Paris" in words


def test_one_click_takes_the_lesson_to_the_real_model(smollm2):
    at = new_app()  # the Overview, on the default model
    at.run()
    assert at.session_state[state.MODEL] != "smollm2"
    at.button(key="overview_real").click().run()
    assert not at.exception
    assert at.session_state[state.MODEL] == "smollm2" and at.session_state[state.TEXT] == navigation.REAL_EXAMPLE
    assert "a decoder-only model (Llama family)" in text_of(at)
    assert "overview_real" not in [b.key for b in at.button]  # on the real model, nothing to offer
    # a decoder step on MiniLM offers it too
    at = opened("decoding", "minilm", "The cat sat on the mat")
    at.button(key="needs_decoder_real").click().run()
    assert not at.exception and at.session_state[state.MODEL] == "smollm2"


def test_presenter_mode_keeps_a_deep_grid_readable(smollm2):
    """Step 8 in presenter mode: thumbnails of 100 px or more (70 px rows were unreadable from the back of a room),
    a window of layers that fits the first screen, holding the chosen layer, named in the caption."""
    at = new_app("model_view")
    at.query_params.update({"model": "smollm2", "text": TEXT, "present": "1", "layer": "17"})
    at.run()
    grid = spec(at.get("plotly_chart")[0])["layout"]
    assert grid["height"] == 3 * 155 + 60  # SmolLM2's 9 heads across 1400 px: 155 px each, 3 layers at a time
    assert list(grid["yaxis"]["ticktext"]) == ["layer 16", "layer 17", "layer 18"]
    assert "Layers 16-18 of 30" in " ".join(c.value for c in at.caption)
    at = new_app("model_view")
    at.query_params.update({"model": "minilm", "text": TEXT, "present": "1"})
    at.run()
    grid = spec(at.get("plotly_chart")[0])["layout"]
    rows = len(grid["yaxis"]["ticktext"])
    assert (grid["height"] - 60) / rows >= 100 and grid["height"] <= 660  # MiniLM's 12 heads: 116 px, on the screen


def test_the_logit_lens_of_a_long_text_draws_a_window_around_the_picked_row(smollm2):
    """SmolLM2's 61 reads of every row of a long text are 3.5 TFLOP: the map draws the rows around the picked one,
    each cell the model's own (the same numbers as the lens of those rows)."""
    tokens = 300
    long = long_text(smollm2, tokens)
    at = new_app("logit_lens").run()  # as a person types it: the model, the text, then the length
    at.sidebar.selectbox(key=state.widget(state.MODEL)).set_value("smollm2").run()
    at.sidebar.text_area[0].set_value(long).run()
    at.sidebar.number_input[0].set_value(tokens).run()
    assert not at.exception and at.session_state[state.MAX_TOKENS] == tokens
    run = trace.run(smollm2, long, tokens)
    answer = ablate.with_text_end(smollm2, ablate.answer(smollm2, run), run)  # the last row too: the answer's own
    rows = len(answer.decoder_input)
    assert rows == tokens  # a column for every token: the last one too
    for later in (250, 5):  # the row picked (kept from the first model's text), then a late and an early one
        picked = at.session_state["lens_position"]
        window = lens.window(smollm2, rows, picked)
        assert len(window) < rows and picked in window
        found = lens.lens(smollm2, answer, rows=window, run=run)
        drawn = spec(at.get("plotly_chart")[0])["data"][0]
        np.testing.assert_allclose(array(drawn["z"]), found.top_probabilities[..., 0], rtol=1e-6)
        assert drawn["x"][0].startswith(f"{window.start}: ") and len(drawn["x"]) == len(window)
        assert f"The map shows positions {window.start}-{window.stop - 1} of {rows}" in text_of(at)
        at.selectbox(key="lens_position").set_value(later).run()  # the map moves to it
        assert not at.exception


EIFFEL = "The Eiffel Tower is located in the city of"


def test_step_14_asks_at_the_texts_end_where_the_model_answers(smollm2):
    """The last position, the one that predicts ' Paris', is drawn, asked about and split: nothing in the text follows
    it, so its target is the model's own top token."""
    run = trace.run(smollm2, EIFFEL, smollm2.max_tokens)
    n = len(run.source_tokens)
    assert run.top_tokens[-1][0] == "ĠParis"  # the tokenizer's spelling; every page shows it as '␣Paris'
    shown = run.readable(run.source_tokens)
    answer = ablate.with_text_end(smollm2, ablate.answer(smollm2, run), run)
    found = lens.lens(smollm2, answer, run=run)
    at = opened("layer_predictions", text=EIFFEL)
    question = plain(next(m.value for m in at.markdown if "Predict first" in m.value))
    assert f"At position {n - 1} ({shown[-1]}) the text ends: there is no next token in the text" in question
    assert "follow the model's own top prediction, ␣Paris. After which sub-layer does ␣Paris first rank first?" in (
        question
    )
    (guess,) = [s for s in at.selectbox if s.key.startswith("layer_predictions_predict_guess_")]
    assert "not even at the output" not in guess.options  # the model's own top token: first at the output
    at = reveal(at, "layer_predictions_predict")
    assert not at.exception
    ranks = found.target_rank[:, n - 1]
    first = int(np.argmax(ranks == 1))
    assert ranks[-1] == 1 and f"It first ranks first in the row {found.reads[first]}." in text_of(at)
    charts = {c.key: spec(c) for c in at.get("plotly_chart")}
    rank = charts["layer_predictions_rank"]
    np.testing.assert_array_equal(array(rank["data"][0]["y"]), ranks)
    np.testing.assert_array_equal(array(rank["data"][1]["y"]), found.target_probability[:, n - 1])
    assert "the model's own top prediction ␣Paris across the layers" in rank["layout"]["title"]["text"]
    heatmap = charts["layer_predictions_map"]["data"][0]
    assert len(heatmap["x"]) == n and heatmap["x"][-1] == f"{n - 1}: {shown[-1]} (text ends)"
    np.testing.assert_array_equal(array(heatmap["z"]), found.top_probabilities[..., 0])
    assert heatmap["customdata"][-1][-1][0] == "␣Paris"
    states = run.decoder_states
    entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    split = attribution.attribute(smollm2, answer, n - 1, answer.targets[-1], entering)
    assert split.token == "ĠParis"
    assert f"The logit of ␣Paris at position {n - 1} is {split.logit:.3f}" in text_of(at)
    # the attribution page opens there too, and says what the token is
    at = opened("attribution", text=EIFFEL)
    assert at.selectbox(key="attribution_position").value == n - 1
    assert at.radio(key="attribution_token").options == ["the model's own top prediction: ␣Paris"]
    assert [m.value for m in at.metric] == [f"{split.logit:.3f}"]


def test_step_14_on_a_cut_text_says_the_models_read_ends_not_the_text():
    """Cut by Max tokens, the text goes on past the last row the model read: its end is the read's, not the text's."""
    at = new_app("layer_predictions")
    at.query_params["model"] = "smollm2"
    at.query_params["text"] = EIFFEL
    at.session_state[state.MAX_TOKENS] = 3
    at.run()
    assert not at.exception
    question = plain(next(m.value for m in at.markdown if "Predict first" in m.value))
    assert (
        "the model's read ends (the text was cut to the sidebar's Max tokens): there is no next token in what it "
        in (question)
    )
    assert "the text ends" not in question
    assert "At the last position, 2, the model's read ends" in plain(" ".join(m.value for m in opened_lens(3).markdown))


def opened_lens(max_tokens: int):
    at = new_app("logit_lens")
    at.query_params["model"] = "smollm2"
    at.query_params["text"] = EIFFEL
    at.session_state[state.MAX_TOKENS] = max_tokens
    return at.run()
