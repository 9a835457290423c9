"""The window, seen: a local layer's heatmap (a tiny Gemma 3 folder, window 5, text longer than it) greys exactly the
keys its window hides (mask_of False though the causal mask shows them: weight 0 in the model's own run) and dashes
its edge; a global layer's has neither; the overview shades the same region; the words name this model's numbers."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.figures.heatmap import OUTSIDE, head_heatmap
from attention_explorer.explorer.lesson.window_words import layer_span, layers_summary
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests.folders import make_gemma3_folder

TEXT = "the cat sat on the mat because it was tired and the dog sat"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = make_gemma3_folder(tmp_path_factory.mktemp("gemma3") / "g", window=5, layers=3, pattern=3)
    return trace.run(registry.from_path(folder, "gemma3"), TEXT, 64)


def _grey(figure) -> np.ndarray:
    (grey,) = [t for t in figure.data if t.name == OUTSIDE]
    return ~np.isnan(np.asarray(grey.z, dtype=float))


def _steps(path: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", path)]


def test_a_local_layers_map_greys_exactly_what_its_window_hides(run):
    attention = run.decoder_self
    tokens = list(run.labels_for("decoder_self")[0])
    n = len(tokens)
    assert n > 5 and attention.windows == (5, 5, None)
    for layer in range(2):
        weights = attention.layer(layer).weights[0]
        figure = head_heatmap(weights, tokens, tokens, window=attention.windows[layer])
        hidden_by_window = attention.mask & ~attention.mask_of(layer)
        np.testing.assert_array_equal(_grey(figure), hidden_by_window)
        assert hidden_by_window.sum() == (n - 5) * (n - 4) // 2  # a band: every key 5 or more back
        assert (weights[hidden_by_window] == 0).all() and (weights[attention.mask_of(layer)] > 0).all()
        (edge,) = figure.layout.shapes
        # each row's edge sits between the last key it hides and the first it sees, from row 5 (the first that hides
        # a key) down: nothing drawn along the map's left side above it
        steps = _steps(edge.path)
        assert [x for x, _ in steps[::2]] == [i - 4 - 0.5 for i in range(5, n)]
        assert steps[0] == (0.5, 4.5) and steps[-1] == (n - 5 - 0.5, n - 0.5)
    # the global layer: the causal triangle, nothing greyed, no edge
    figure = head_heatmap(attention.layer(2).weights[0], tokens, tokens, window=attention.windows[2])
    assert not any(t.name == OUTSIDE for t in figure.data) and not figure.layout.shapes


def test_a_region_of_a_long_map_greys_by_the_texts_positions(run):
    attention = run.decoder_self
    tokens = list(run.labels_for("decoder_self")[0])
    n = len(tokens)
    weights = attention.layer(0).weights[0]
    region = zoom.Region(range(6, n), range(0, 8))
    figure = zoom.region_heatmap(weights, tokens, tokens, region, window=5)
    expected = (attention.mask & ~attention.mask_of(0))[6:n, 0:8]
    np.testing.assert_array_equal(_grey(figure), expected)


def test_the_overview_shades_below_the_windows_edge(run):
    tokens = list(run.labels_for("decoder_self")[0])
    n = len(tokens)
    figure = zoom.overview_heatmap(run.decoder_self.layer(0).weights[0], tokens, tokens, window=5)
    shade, edge = [s for s in figure.layout.shapes if s.name in ("outside the window", "window edge")]
    # the edge x = y - w + 0.5: between key i - 5 (hidden) and key i - 4 (seen) on every row i
    assert (edge.x0, edge.y0, edge.x1, edge.y1) == (-0.5, 4, n - 5, n - 0.5)
    assert shade.path == f"M -0.5,4 L -0.5,{n - 0.5} L {n - 5},{n - 0.5} Z"


def test_the_words_say_this_models_numbers():
    assert layers_summary((5, 5, None, 5, 5, None)) == (
        "Layers 1-2, 4-5 are local: each token sees at most the 5 keys before it, itself included (a sliding "
        "window). Layers 3, 6 are global: each token sees every key before it, as in the paper."
    )
    assert layers_summary((None, None)) == ""
    said = layer_span(2, 512, 600)
    assert said.startswith("Layer 3 is local: each token sees at most the 512 keys before it, itself included")
    assert "band 512 keys wide" in said and "600 tokens" in said
    assert "fit in the window" in layer_span(0, 512, 40) and "band" not in layer_span(0, 512, 40).split(";")[0]
    assert "global" in layer_span(5, None, 600) and "triangle" in layer_span(5, None, 600)
    assert layer_span(0, None, 600, any_local=False) == ""


def test_step_11_counts_a_local_layers_operations_with_its_window():
    from attention_explorer.explorer.lesson.window_words import windowed_operations

    said = windowed_operations(600, 640, (512, 512, None))
    assert "Layers 1-2 of this model are local" in said
    assert f"n·min(n, w)·d = 600·512·640 = {600 * 512 * 640:,} operations, against n²·d = {600 * 600 * 640:,}" in said
    short = windowed_operations(40, 640, (512, None))
    assert f"40·40·640 = {40 * 40 * 640:,}" in short and "fit in the window" in short
    assert windowed_operations(600, 640, (None, None)) == ""


def test_the_qkv_walkthrough_of_a_local_layer_uses_its_window_scale_and_norm(run):
    from attention_explorer.explorer.run import walkthrough

    attention = run.decoder_self
    n = attention.mask.shape[0]
    s = walkthrough.steps(run, "decoder_self", 0, 1, n - 1)
    np.testing.assert_array_equal(s.mask, attention.mask_of(0)[n - 1])  # the window, not only the causal mask
    assert s.mask.sum() == 5
    np.testing.assert_array_equal(s.scaled_scores, s.raw_scores * np.float32(24**-0.5))  # query_pre_attn_scalar 24
    np.testing.assert_array_equal(s.q_before_norm, attention.layer(0).q_before_norm[1, n - 1])
    assert (s.weights[~s.mask] == 0).all()


def test_the_qkv_score_formula_writes_the_models_own_scale(run):
    """The step's formula divides by sqrt(24), the config's query_pre_attn_scalar, not sqrt(d_k) = sqrt(16)."""
    from attention_explorer.explorer.run import walkthrough
    from attention_explorer.explorer.views.qkv import score_formula

    n = run.decoder_self.mask.shape[0]
    s = walkthrough.steps(run, "decoder_self", 0, 1, n - 1)
    assert s.d_head == 16
    formula = score_formula(s)
    assert r"\sqrt{s}},\ s = 24" in formula and "d_k = 16" in formula
    paper = dataclasses.replace(s, scale=16**-0.5)  # the paper's scale: written as before
    assert score_formula(paper).endswith(r"\sqrt{d_k}},\ d_k = 16")
    assert score_formula(dataclasses.replace(s, scale=0.0)).endswith(r"\sqrt{d_k}},\ d_k = 16")
