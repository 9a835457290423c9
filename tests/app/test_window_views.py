"""The window on every attention view (a tiny Gemma 3 folder: layers 1-2 local with a window of 5 keys, layer 3
global; a text longer than the window): on the head view, compare sentences, decoding, aggregation, reference and
patching pages, the cells drawn as hidden by the window are exactly the keys the layer's mask hides and the causal
mask shows (AttentionTrace.mask_of), where the drawn weight is 0; a global layer draws none and no edge. A Mistral
folder (every layer local) the same; Add & Norm's sandwich strips are the model's own post-norm and stream."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests.app import new_app, stepping
from tests.figdata import array
from tests.folders import make_gemma3_folder

TEXT = "the cat sat on the mat because it was tired and the dog sat on the rug"
CORRUPT = "the cat sat on the mat because it was tired and the cat sat on the rug"  # one token changed
WINDOWS = (5, 5, None)
OUTSIDE, EDGE = "outside the window", "window edge"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_gemma3_folder(tmp_path_factory.mktemp("gemma3") / "g", window=5, layers=3, pattern=3)


@pytest.fixture(scope="module")
def attention(folder):
    """The model's own decoder self-attention on TEXT: its causal mask and each layer's (mask_of)."""
    run = trace.run(registry.from_path(folder, "gemma3"), TEXT, 64)
    assert run.decoder_self.windows == WINDOWS and run.decoder_self.mask.shape[0] > 5
    return run.decoder_self


def hidden_by_window(attention, layer: int) -> np.ndarray:
    return attention.mask & ~attention.mask_of(layer)


def boundary(hidden: np.ndarray, row: int, head: int) -> list[tuple[float, float]]:
    """The staircase between the keys `hidden` hides and those it shows, one corner pair a row (cell coordinates of
    the thumbnail in the grid's `row` and `head`: n + 1 cells apart), from the first row hiding any key."""
    n = len(hidden)
    x0, y0 = head * (n + 1), row * (n + 1)
    counts = hidden.sum(axis=1)
    return [(x0 + c - 0.5, y0 + i + d - 0.5) for i, c in enumerate(counts) if c for d in (0, 1)]


def _open(monkeypatch, folder, page: str, **session):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gemma3={folder}"}))
    at = new_app(page)
    at.query_params["model"] = "folder:tiny-gemma3"
    at.query_params["text"] = TEXT
    at.run()
    for name, value in session.items():  # after the first run: a page fills its own defaults on it
        at.session_state[name] = value
    if session:
        at.run()
    assert not at.exception and not at.error, (page, at.exception, [e.value for e in at.error])
    return at


def charts(at) -> dict[str, dict]:
    return {c.key: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


def greyed(figure: dict) -> np.ndarray | None:
    """The cells a heatmap draws as hidden by the window (its OUTSIDE trace), or None where it draws none."""
    found = [t for t in figure["data"] if t.get("name") == OUTSIDE]
    if not found:
        return None
    return ~np.isnan(np.asarray(decoded(found[0]["z"]), dtype=float))


def decoded(z) -> np.ndarray:
    return np.asarray(array(z), dtype=float)


def edges(figure: dict) -> list[dict]:
    return [s for s in figure["layout"].get("shapes", []) if s.get("name") == EDGE]


def said(at) -> str:
    return " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)


def assert_window_drawn(figure: dict, expected: np.ndarray, weights_drawn: bool = True) -> None:
    np.testing.assert_array_equal(greyed(figure), expected)
    assert expected.any() and len(edges(figure)) == 1
    if weights_drawn:  # the model's weight under each grey cell is 0 (a difference map: 0 - 0)
        assert (decoded(figure["data"][0]["z"])[expected] == 0).all()


def assert_none_drawn(figure: dict) -> None:
    grey = greyed(figure)
    assert (grey is None or not grey.any()) and not edges(figure)


def test_the_head_view_greys_the_keys_the_window_hides_from_the_highlighted_token(monkeypatch, folder, attention):
    n = attention.mask.shape[0]
    for focus in (n - 1, 7):
        at = _open(monkeypatch, folder, "head_view", head_layer=0, head_focus=focus)
        figure = charts(at)["head_lines"]
        (marks,) = [t for t in figure["data"] if t.get("name") == OUTSIDE]
        hidden = np.flatnonzero(hidden_by_window(attention, 0)[focus])
        assert decoded(marks["y"]).tolist() == hidden.tolist() and len(hidden) == focus - 4  # keys 5 or more back
        (edge,) = edges(figure)
        assert edge["y0"] == edge["y1"] == len(hidden) - 0.5  # between the last key hidden and the first seen
        keys = next(t for t in figure["data"] if t.get("mode") == "text" and t["x"][0] == 1)
        grey = [i for i, c in enumerate(keys["textfont"]["color"]) if c == "#9e9e9e"]
        assert grey == hidden.tolist()
        assert "Layer 1 is local: each token sees at most the 5 keys before it" in said(at)
        assert f"It hides {len(hidden)} keys from the highlighted token, all those above the dashed edge" in said(at)
        (formula,) = at.latex  # the layer's own mask in the formula: the window's, not the causal one
        assert r"0 & q - 5 < k \le q \\ -\infty & \text{otherwise}" in formula.value and "k > q" not in formula.value
    at = _open(monkeypatch, folder, "head_view", head_layer=0, head_focus=3)  # 4 keys: all inside the window
    assert not [t for t in charts(at)["head_lines"]["data"] if t.get("name") == OUTSIDE]
    assert "The highlighted token, at position 3, sees every key before it: none is hidden." in said(at)
    at = _open(monkeypatch, folder, "head_view", head_layer=2, head_focus=n - 1)
    figure = charts(at)["head_lines"]
    assert not [t for t in figure["data"] if t.get("name") == OUTSIDE] and not edges(figure)
    assert "Layer 3 is global" in said(at)
    # a global layer opened on a text longer than the window points to a local one, with its window
    assert "Layer 1 is local, with a window of 5 keys shorter than this text: pick it" in said(at)
    (formula,) = at.latex
    assert r"0 & k \le q \\ -\infty & k > q" in formula.value and "q - 5" not in formula.value


def test_compare_sentences_greys_a_b_and_their_difference(monkeypatch, folder, attention):
    at = _open(monkeypatch, folder, "compare_sentences", compare_layer=1, compare_head=0)
    drawn = charts(at)
    n_b = len(decoded(drawn["compare_b_map"]["data"][0]["z"]))
    assert_window_drawn(drawn["compare_a"], hidden_by_window(attention, 1))
    expected_b = np.tril(np.ones((n_b, n_b), bool), -5)  # B's own positions: every key 5 or more back
    assert_window_drawn(drawn["compare_b_map"], expected_b)
    n = len(decoded(drawn["compare_difference"]["data"][0]["z"]))  # lined up by position: the first n of each
    assert_window_drawn(drawn["compare_difference"], hidden_by_window(attention, 1)[:n, :n])
    assert "Layer 2 is local" in said(at)
    at = _open(monkeypatch, folder, "compare_sentences", compare_layer=2, compare_head=0)
    for key in ("compare_a", "compare_b_map", "compare_difference"):
        assert_none_drawn(charts(at)[key])


def test_decoding_greys_the_map_and_the_steps_keys(monkeypatch, folder, attention):
    n = attention.mask.shape[0]
    at = _open(monkeypatch, folder, "decoding")
    stepping(at)
    at.selectbox(key="decoding_layer").set_value(0).run()
    assert not at.exception
    drawn = charts(at)
    assert_window_drawn(drawn["decoding_self_all"], hidden_by_window(attention, 0))
    # the step (the last position) as bars: the keys its window hides shaded, the edge after them on the overview
    step = hidden_by_window(attention, 0)[n - 1]
    bars = drawn["decoding_self"]
    shapes = bars["layout"]["shapes"]
    (run,) = [s for s in shapes if s.get("name") == "outside the window (overview)"]
    (edge,) = edges(bars)
    assert run["x1"] == edge["x0"] == step.sum() - 0.5 and run["x0"] == -0.5
    positions = [int(label.split(":")[0]) for label in bars["data"][0]["customdata"]]  # '12: dog': the bars drawn
    shaded = sorted(positions[round(s["x0"] + 0.5)] for s in shapes if s.get("name") == OUTSIDE)
    assert shaded == [p for p in sorted(positions) if step[p]]
    assert f"the {int(step.sum())} before them are shaded grey" in said(at)
    at.selectbox(key="decoding_layer").set_value(2).run()
    drawn = charts(at)
    assert_none_drawn(drawn["decoding_self_all"])
    assert not [s for s in drawn["decoding_self"]["layout"].get("shapes", []) if "window" in (s.get("name") or "")]


def test_aggregation_greys_the_raw_layer_and_says_how_local_layers_enter_rollout(monkeypatch, folder, attention):
    at = _open(monkeypatch, folder, "aggregation", aggregate_layer=1)
    drawn = charts(at)
    assert_window_drawn(drawn["aggregate_raw"], hidden_by_window(attention, 1))
    for key in ("aggregate_rollout", "aggregate_flow"):  # many layers: no one window is theirs
        assert_none_drawn(drawn[key])
    assert "Rollout and flow combine layers 1-2, so no one window applies to them" in said(at)
    # a product of two local layers reaches further back than one window: rollout is not 0 where layer 2's hides
    rollout = decoded(drawn["aggregate_rollout"]["data"][0]["z"])
    assert (rollout[hidden_by_window(attention, 1)] > 0).any()
    at = _open(monkeypatch, folder, "aggregation", aggregate_layer=2)
    assert_none_drawn(charts(at)["aggregate_raw"])


def test_rollout_words_say_when_the_text_fits_the_window():
    from attention_explorer.explorer.lesson.window_words import rollout_window_words

    assert rollout_window_words((512, None), 1, 16).startswith(
        "These 16 tokens fit in the local layers' window of 512 keys, so no layer hides any key here"
    )
    assert rollout_window_words((512, None), 1, 600).startswith("Rollout and flow combine layers 1-2")
    assert "0 on the keys its window hides" in rollout_window_words((512,), 0, 600)
    assert (
        rollout_window_words((None, None), 1, 600)
        == "Layers 1-2 are all global: no window enters rollout and flow here."
    )


def test_the_reference_greys_ours_theirs_and_the_difference(monkeypatch, folder, attention):
    at = _open(monkeypatch, folder, "reference", reference_layer=0, reference_head=1)
    drawn = charts(at)
    for key in ("reference_ours", "reference_theirs", "reference_difference"):
        assert_window_drawn(drawn[key], hidden_by_window(attention, 0))
    at = _open(monkeypatch, folder, "reference", reference_layer=2, reference_head=1)
    for key in ("reference_ours", "reference_theirs", "reference_difference"):
        assert_none_drawn(charts(at)[key])


def test_patching_greys_the_heads_map_in_both_runs(monkeypatch, folder, attention):
    inputs = {state.PATCHING_CORRUPT: CORRUPT, state.PATCHING_ANSWER: "cat", state.PATCHING_WRONG: "dog"}
    for layer in (1, 2):
        at = _open(monkeypatch, folder, "patching", **inputs, **{state.PATCHING_HEAD: ("decoder_self", layer, 0)})
        drawn = charts(at)
        title = drawn["patching_clean_map"]["layout"]["title"]["text"]
        assert re.search(rf"head {layer + 1}\.1\b", title), title
        for key in ("patching_clean_map", "patching_corrupted_map"):  # one token changed: the same positions
            if layer == 1:
                assert_window_drawn(drawn[key], hidden_by_window(attention, 1))
            else:
                assert_none_drawn(drawn[key])


def test_add_and_norm_draws_each_sublayers_post_norm_from_the_models_internals(monkeypatch, folder):
    """Gemma 3's sandwich norms: each sub-layer's strips are x, its output, that output through the layer's own
    post-norm module, and x plus it, which is the model's own stream after the sub-layer."""
    import torch

    from attention_explorer.explorer.run import forward
    from tests import tolerance

    at = _open(monkeypatch, folder, "add_norm", **{state.FOCUS_LAYER: 1, state.FOCUS_TOKEN: 12})
    drawn = charts(at)
    loaded = registry.load("folder:tiny-gemma3")
    run = trace.run(loaded, TEXT, 64)
    found = forward.states(run, "decoder")
    n_keys = len(found["after_ffn"][0])
    module = loaded.model.decoder.layers[1]
    before = found["after_ffn"][0][12]  # layer 2's input at token 12
    for number, sub in enumerate(forward.described(loaded, "decoder").sublayers, start=1):
        assert sub.post_norm is not None  # every sub-layer of Gemma 3 has one
        x, output, normed, added = decoded(drawn[f"forward_sublayer_{number}"]["data"][0]["z"])
        np.testing.assert_array_equal(x, before)
        with torch.inference_mode():  # the model's own sub-layer output for this token, then its own post-norm
            if sub.is_attention:
                own = run.decoder_self.output[1, 12]
            else:
                own = module.ffn(getattr(module, sub.norm)(torch.from_numpy(before.copy())[None, None]))[0, 0].numpy()
            post = getattr(module, sub.post_norm)(torch.from_numpy(np.array(output, np.float32))[None, None])[0, 0]
            post = post.numpy()
        traced = found[sub.state][1, 12]
        bound = forward.rounding_bound(loaded.model.config, n_keys, traced)  # the page's own (test_forward.py)
        tolerance.assert_within(output, own, forward.rounding_bound(loaded.model.config, n_keys, own), "output")
        np.testing.assert_array_equal(normed, post)  # the layer's post-norm module on the drawn output
        assert not np.allclose(normed, output)  # the norm changes it: it is drawn before and after
        tolerance.assert_within(added, traced, bound, "x + post-norm(output)")  # the model's stream after it
        np.testing.assert_array_equal(added, (x + normed).astype(np.float32))
        before = traced
    assert "Post-norm (a sandwich norm)" in said(at)


def test_a_mistral_folder_greys_every_layer_on_the_views(tmp_path, monkeypatch):
    """Mistral: every layer local (window 5); the aggregation's raw map and the decoding map grey exactly its mask."""
    from tests.folders import make_mistral_folder

    folder = make_mistral_folder(tmp_path / "m", window=5)
    run = trace.run(registry.from_path(folder, "mistral"), TEXT, 64)
    attention = run.decoder_self
    assert attention.windows == (5, 5)
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-mistral={folder}"}))
    at = new_app("aggregation")
    at.query_params["model"] = "folder:tiny-mistral"
    at.query_params["text"] = TEXT
    at.run()
    assert not at.exception and not at.error
    for layer in (0, 1):
        at.selectbox(key="aggregate_layer").set_value(layer).run()
        assert_window_drawn(charts(at)["aggregate_raw"], hidden_by_window(attention, layer))


def test_the_model_view_and_the_layers_small_multiples_grey_each_local_thumbnail(monkeypatch, folder, attention):
    """Each local layer's thumbnails grey exactly its window's hidden keys (19 tokens: a cell a token); global none."""
    n = attention.mask.shape[0]

    def thumbnails(figure, n_layers, n_heads):
        grey = greyed(figure)
        return [
            [grey[i * (n + 1) : i * (n + 1) + n, h * (n + 1) : h * (n + 1) + n] for h in range(n_heads)]
            for i in range(n_layers)
        ]

    at = _open(monkeypatch, folder, "model_view")
    figure = charts(at)["model_grid"]
    drawn = [int(re.match(r"layer (\d+)", tick)[1]) - 1 for tick in figure["layout"]["yaxis"]["ticktext"]]
    assert drawn and 0 in drawn  # the lesson's grid may draw a window of layers: layer 1 (local) among them
    assert "A local layer's thumbnails grey the cells whose every key its window hides." in said(at)
    assert "The dashed line is the window's edge: the keys left of it are 5 or more back from the query." in said(at)
    grid = thumbnails(figure, len(drawn), 4)
    for row, layer in enumerate(drawn):
        for head in range(4):
            np.testing.assert_array_equal(grid[row][head], hidden_by_window(attention, layer))
    # a dashed edge on each local thumbnail, along its window's boundary (the head view's staircase: a cell a token)
    expected = sorted(
        "M " + " L ".join(f"{x:g},{y:g}" for x, y in boundary(hidden_by_window(attention, layer), row, head))
        for row, layer in enumerate(drawn)
        if attention.windows[layer] is not None
        for head in range(4)
    )
    assert expected and sorted(e["path"] for e in edges(figure)) == expected
    assert all(e["line"]["dash"] == "dash" for e in edges(figure))
    for layer in (0, 2):  # the picked layer's mask in the formula beside the grid: layer 1's window, layer 3's causal
        at.selectbox(key=state.FOCUS_LAYER).set_value(layer).run()
        assert (r"q - 5 < k" in at.latex[0].value) == (layer == 0) and ("k > q" in at.latex[0].value) == (layer == 2)
    at = _open(monkeypatch, folder, "attention", attention_layer=1)
    (row,) = thumbnails(charts(at)["attention_layer_heads"], 1, 4)
    for head in range(4):
        np.testing.assert_array_equal(row[head], hidden_by_window(attention, 1))
    assert "Grey: the cells whose every key the window hides." in said(at)
    assert len(edges(charts(at)["attention_layer_heads"])) == 4  # each head's small multiple: its window's edge
    at = _open(monkeypatch, folder, "attention", attention_layer=2)
    assert greyed(charts(at)["attention_layer_heads"]) is None and "Grey: the cells" not in said(at)


def test_compare_weights_pairs_a_gemma3_folder_with_its_random_copy_and_greys_both(
    tmp_path, monkeypatch, folder, attention
):
    """A folder offered beside NAME-random (another seed's weights, the same shape and tokenizer) is a pair on Compare
    weights: both maps are the models' own weights, greyed exactly where a local layer's window hides keys."""
    copy = make_gemma3_folder(tmp_path / "r", window=5, layers=3, pattern=3, seed=1)
    offered = f"tiny-gemma3={folder};tiny-gemma3-random={copy}"
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: offered}))
    runs = {
        "folder:tiny-gemma3": attention,
        "folder:tiny-gemma3-random": trace.run(registry.load("folder:tiny-gemma3-random"), TEXT, 64).decoder_self,
    }
    assert not np.allclose(runs["folder:tiny-gemma3"].weights, runs["folder:tiny-gemma3-random"].weights)
    for model in runs:  # opened on either of the two
        at = new_app("compare")
        at.query_params["model"] = model
        at.query_params["text"] = TEXT
        at.run()
        for layer in (0, 2):
            at.selectbox(key="compare_layer").set_value(layer).run()
            at.selectbox(key="compare_head").set_value(1).run()
            assert not at.exception and not at.error and not at.info, [i.value for i in at.info]
            drawn = charts(at)
            for key, run in runs.items():
                figure = drawn[f"compare_{key}"]
                np.testing.assert_array_equal(decoded(figure["data"][0]["z"]), run.weights[layer, 1])
                if layer == 0:
                    assert_window_drawn(figure, hidden_by_window(attention, 0))
                else:
                    assert_none_drawn(figure)
        assert "offered beside it as its copy with random weights" in said(at)
    at = _open(monkeypatch, folder, "compare")  # the folder alone: no copy to pair it with
    assert "a folder offered beside its copy named with -random" in " ".join(i.value for i in at.info)


def test_query_key_value_writes_qk_norm_and_a_head_width_other_than_d_model_over_heads(monkeypatch, folder):
    """Gemma 3's heads are wider than d_model / n_heads (the folder: d_model 48, 4 heads of 16 side by side = 64):
    W^Q multiplies the d_model-wide stream, and q and k pass through their own RMSNorm (QK-norm) before rotary."""
    config = registry.from_path(folder, "tiny-gemma3").model.config
    assert (config.d_model, config.n_heads * config.d_head) == (48, 64)  # the folder's shape: they differ
    at = _open(monkeypatch, folder, "query_key_value", **{state.FOCUS_LAYER: 0, state.FOCUS_HEAD: 0})
    formula = at.latex[0].value
    assert r"q &= R_{\text{pos}}(\mathrm{RMSNorm}(\mathrm{RMSNorm}(x) W^Q_{1}))" in formula
    assert r"v_j &= \mathrm{RMSNorm}(x_j) W^V_{1}" in formula and r"\mathbb{R}^{48 \times 16}" in formula
    title = charts(at)["qkv_matrices"]["layout"]["title"]["text"]
    assert "48 rows (input dimensions) x 16 columns" in title
    rows = {len(array(t["z"])) for t in charts(at)["qkv_matrices"]["data"] if "z" in t}
    assert rows == {48}  # the drawn matrices are that many rows: the model's own W^Q, W^K, W^V
    assert "of the layer's 48 x 64 matrix" in said(at)
    at = _open(monkeypatch, folder, "multi_head", **{state.FOCUS_LAYER: 0, state.FOCUS_HEAD: 0})
    assert r"W^O \in \mathbb{R}^{64 \times 48}" in " ".join(f.value for f in at.latex)  # concat back to d_model
