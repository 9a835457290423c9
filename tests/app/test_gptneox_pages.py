"""A GPT-NeoX model (Pythia's shape: a parallel block x + Attn(LayerNorm1(x)) + FFN(LayerNorm2(x)), rotary on a
quarter of each head's dimensions, LayerNorm with biases, GELU, an untied output) through every page (AppTest via
app.py), from tiny random folders: no exception, and what is said and drawn is true for this model, its numbers the
model's own."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import state
from attention_explorer.explorer.experiments import ablate, attribution, lens, patching
from attention_explorer.explorer.run import positions, trace
from attention_explorer.models import registry
from tests import tolerance
from tests.app import new_app, reveal, stepping
from tests.app.test_decoder_only import text_of
from tests.explorer.test_overview_figure import boxes
from tests.figdata import array, spec
from tests.folders import make_gptneox_folder

pytestmark = pytest.mark.slow

TEXT = "the cat sat on the mat because it was tired"
EVERY_PAGE = tuple(page.stem for pages in navigation.MENUS.values() for page in pages)
PARALLEL, SEQUENTIAL = "folder:tiny-neox", "folder:tiny-neox-sequential"
D_HEAD, TURNED = 16, 4  # the folders' 64 / 4 heads; int(16 x 0.25) dimensions turned


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("gptneox")
    return make_gptneox_folder(root / "parallel"), make_gptneox_folder(root / "sequential", parallel=False)


@pytest.fixture
def models(folders, monkeypatch):
    """Both folders in the catalogue: the parallel one and a sequential-residual one; loaded as the app loads them."""
    parallel, sequential = folders
    found = f"tiny-neox={parallel};tiny-neox-sequential={sequential}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: found}))
    return {PARALLEL: registry.load(PARALLEL), SEQUENTIAL: registry.load(SEQUENTIAL)}


def opened(page: str, model: str = PARALLEL, text: str = TEXT):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    at.run()
    if page == "corpus" and any(b.key == "corpus_run" for b in at.button):  # it runs on a click
        at.button(key="corpus_run").click().run()
    return at


def charts(at) -> dict[str, dict]:
    return {c.key: spec(c) for c in at.get("plotly_chart")}


# what no page may say of this model: no RMSNorm or SwiGLU, no encoder, no position added, no rotation of every pair
WRONGS = (
    "RMSNorm",
    "SwiGLU",
    "encoder-only",
    "BERT family",
    "the position it adds",
    f"{D_HEAD // 2} pairs of its {D_HEAD}",
    "each pair of dimensions keeps its length",
    "tied to the embedding",
)


@pytest.mark.parametrize("model", [PARALLEL, SEQUENTIAL])
def test_every_page_opens_and_says_nothing_this_model_lacks(models, model):
    for page in EVERY_PAGE:
        at = opened(page, model)
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
        if page == "train":  # it trains a toy, not the sidebar's model
            continue
        words = text_of(at)
        for wrong in WRONGS:
            assert wrong not in words, (page, wrong)
        if model == PARALLEL:  # the sequential block's words, on a parallel block
            assert "x + Sublayer(LayerNorm(x))" not in words, page
            assert "Then a feed-forward network" not in words, page
        if page == "corpus":
            assert charts(at), "the corpus grid after Run"


def drawn_boxes(model: str) -> tuple[list[dict], str]:
    """The Overview's figure as the app draws it for `model`: its boxes and its title."""
    figure = go.Figure(spec(opened("overview", model).get("plotly_chart")[0]))
    return boxes(figure), figure.layout.title.text


def test_overview_draws_the_parallel_block(models):
    found, title = drawn_boxes(PARALLEL)
    attention = next(b for b in found if b["label"].startswith("Masked attention"))
    ffn = next(b for b in found if b["label"].startswith("Feed-forward"))
    (add,) = [b for b in found if b["label"].startswith("Add")]
    assert add["label"] == "Add both (pre-LN: each reads its own LayerNorm)"
    assert attention["y"] == ffn["y"] < add["y"] and attention["shape"].x1 < ffn["shape"].x0  # side by side
    assert title.endswith("d_model = 64, d_ff = 96, h = 4, pre-LN, parallel block")
    # the sequential folder draws its two sub-layers one above the other, each into its own Add
    found, title = drawn_boxes(SEQUENTIAL)
    adds = [b for b in found if b["label"].startswith("Add")]
    assert len(adds) == 2 and not any(b["label"].startswith("Add both") for b in found)
    attention = next(b for b in found if b["label"].startswith("Masked self-attention"))
    ffn = next(b for b in found if b["label"].startswith("Feed-forward"))
    assert attention["y"] < ffn["y"] and "parallel" not in title


@pytest.mark.parametrize("page", ["add_norm", "forward"])
def test_add_norm_and_forward_draw_the_models_own_feed_forward(models, page):
    loaded = models[PARALLEL]
    at = opened(page)
    words = text_of(at)
    assert "each reads x through its own LayerNorm, with its own gain and bias" in words
    assert "same normed input" not in words
    if page == "add_norm":
        assert "x + Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x))" in words
    position = at.selectbox(key="qkv_query").value
    layer = at.selectbox(key="qkv_layer").value
    result = trace.run(loaded, TEXT, loaded.max_tokens)
    states = result.decoder_states
    own = states["after_ffn"][layer, position] - states["after_self_attn"][layer, position]  # what the FFN added
    drawn = array(charts(at)["forward_sublayer_2"]["data"][0]["z"])  # x, FFN output, x + output
    scale = np.abs(states["after_ffn"][layer, position]) + np.abs(states["after_self_attn"][layer, position])
    # the page runs the model's own FFN on the traced input: the bound of the model's two sums of d_ff and d_model
    bound = tolerance.reordered(loaded.model.config.d_ff + loaded.model.config.d_model, scale)
    tolerance.assert_within(drawn[1], own, bound, "the FFN output drawn against after_ffn - after_self_attn")
    np.testing.assert_array_equal(drawn[0], states["after_self_attn"][layer, position])
    tolerance.assert_within(drawn[2], states["after_ffn"][layer, position], bound, "x + output")
    assert "DIFFERS" not in words


def test_sequential_add_norm_says_one_sub_layer_after_the_other(models):
    words = text_of(opened("add_norm", SEQUENTIAL))
    assert "x + Sublayer(LayerNorm(x))" in words and "through its own LayerNorm" not in words


@pytest.mark.parametrize("model", [PARALLEL, SEQUENTIAL])
def test_the_logit_attribution_parts_sum_to_the_logit(models, model):
    loaded = models[model]
    at = opened("attribution", model)
    position = at.selectbox(key="attribution_position").value
    run = trace.run(loaded, TEXT, loaded.max_tokens)
    answer = ablate.with_text_end(loaded, ablate.answer(loaded, run), run)
    states = run.decoder_states
    entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    split = attribution.attribute(loaded, answer, position, answer.targets[position], entering)
    # the parts' sum against the model's own logit: a few hundred float32 terms of the output row's size
    bound = tolerance.reordered(len(split.values) + loaded.model.config.d_model, np.abs(split.values).sum() + 1.0)
    tolerance.assert_within(split.values.sum(), split.logit, bound, "the parts against the logit")
    assert [m.value for m in at.metric] == [f"{split.logit:.3f}"]
    bars = [c for c in charts(at).values() if c["data"][0]["type"] == "bar"][0]["data"][0]
    assert set(np.round(array(bars["x"]), 5)) <= set(np.round(split.values, 5))


def test_positional_and_qkv_say_only_the_first_quarter_turns(models):
    loaded = models[PARALLEL]
    at = opened("positional")
    words = text_of(at)
    assert f"{TURNED // 2} pairs: its first {TURNED} of {D_HEAD} dimensions; the other {D_HEAD - TURNED} pass" in words
    assert f"over the {TURNED} turned dimensions" in words
    theta = positions.rotary_frequencies(loaded)
    np.testing.assert_allclose(theta, 10000.0 ** (-np.arange(0, TURNED, 2) / TURNED), rtol=1e-5)
    assert positions.turned_dims(loaded) == TURNED
    distance = charts(at)["positional_distance"]["data"]
    result = trace.run(loaded, TEXT, loaded.max_tokens)
    layer, head = at.selectbox(key="qkv_layer").value, at.selectbox(key="qkv_head").value
    query = len(result.source_tokens) - 1
    own = result.decoder_self.scaled_scores[layer, head, query, query - 1]
    assert distance[1]["y"][0] == pytest.approx(float(own))
    # only the first dimensions turn: the rest of q is the same before and after
    q, q_before = result.decoder_self.q[layer, head, query], result.decoder_self.q_unrotated[layer, head, query]
    np.testing.assert_array_equal(q[TURNED:], q_before[TURNED:])
    assert not np.allclose(q[:TURNED], q_before[:TURNED])
    words = text_of(opened("query_key_value"))
    assert f"only its first {TURNED} of {D_HEAD} dimensions turn ({TURNED // 2} pairs" in words
    assert f"the other {D_HEAD - TURNED} pass unturned" in words


@pytest.mark.parametrize(
    ("model", "step_7"),
    [
        (
            PARALLEL,
            "parallel pre-LN, x + Attn(LayerNorm_1(x)) + FFN(LayerNorm_2(x)): each reads x through its own LayerNorm, "
            "with its own gain and bias; "
            "a gelu feed-forward 64 -> 96 -> 64",
        ),
        (SEQUENTIAL, "pre-norm, x + Sublayer(LayerNorm(x)); a gelu feed-forward 64 -> 96 -> 64"),
    ],
)
def test_each_step_says_what_this_model_does(models, model, step_7):
    expected = {
        "positional": "nothing added: queries and keys turned by position (rotary on 25% of each head's dimensions, "
        "base 10000)",
        "query_key_value": "4 heads, each with its own W^Q, W^K and W^V of 16 columns",
        "add_norm": step_7,
        "multi_head": "4 x 16 = 64, concatenated, then W^O (plus a bias)",
        "model_view": "2 decoder layers of 4 heads",
    }
    for stem, said in expected.items():
        words = text_of(opened(stem, model))
        assert "2017 paper:" in words and f"This model: {said}" in words, (stem, words)


def test_tokens_lens_turn_off_patching_and_decoding_show_the_models_own_numbers(models):
    loaded = models[PARALLEL]
    run = trace.run(loaded, TEXT, loaded.max_tokens)
    n = len(run.source_tokens)
    ids = list(loaded.tokenizer.encode(TEXT, loaded.max_tokens).ids)
    # tokens: the count and the ids the tokenizer gives
    at = reveal(opened("tokens"), "tokens_predict")
    assert not at.exception
    assert f"The model reads {n} tokens." in text_of(at)
    (ids_drawn,) = [t["text"] for t in charts(at)["tokens_boxes"]["data"] if t.get("text") and t["text"][0].isdigit()]
    assert list(ids_drawn) == [str(i) for i in ids]
    # logit lens: every cell the lens of the model's own states
    answer = ablate.with_text_end(loaded, ablate.answer(loaded, run), run)
    found = lens.lens(loaded, answer, run=run)
    drawn = spec(opened("logit_lens").get("plotly_chart")[0])["data"][0]
    np.testing.assert_allclose(array(drawn["z"]), found.top_probabilities[..., 0], rtol=1e-6)
    # turn heads off: the ranked layers are the ablation's own
    at = reveal(opened("turn_off"), "turn_off_predict")
    assert not at.exception
    effects = ablate.layer_effects(loaded, ablate.answer(loaded, run))
    assert list(at.dataframe[0].value.iloc[:, 1]) == [round(change, 4) for _, change in effects.ranked()]
    # patching: a corruption typed in, the residual grid the experiment's own
    at = opened("patching", text="the cat sat on the")
    for key, typed in ((state.PATCHING_CORRUPT, "the mat sat on the"), (state.PATCHING_ANSWER, "cat")):
        at.text_input(key=state.widget(key)).set_value(typed).run()
    at.text_input(key=state.widget(state.PATCHING_WRONG)).set_value("mat").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    setup = patching.setup(loaded, "the cat sat on the", "the mat sat on the", "cat", "mat", 128)
    clean, corrupt = (patching.read(loaded, ids_, setup) for ids_ in (setup.clean_ids, setup.corrupt_ids))
    residual = patching.measure(loaded, setup, clean, corrupt, patching.residual_patches(loaded, setup))
    grid = array(charts(at)["patching_residual"]["data"][0]["z"])
    np.testing.assert_allclose(grid.ravel(), np.asarray(residual).ravel(), atol=1e-6)
    # decoding: the text's last position predicts the model's own top token
    words = text_of(stepping(opened("decoding")))
    assert (
        f"Position {n - 1} (0 to {n - 1})" in words
        and f"predicts '{n}: {run.readable(run.output_tokens)[-1]}'" in words
    )
