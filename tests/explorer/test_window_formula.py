"""The window as the head and model views write and draw it, read from the layer description (models.anatomy), never
from a family: the formula's mask is the picked layer's (a local layer's window, a global layer's causal mask, none
for an encoder), and the model view's dashed edge on a local thumbnail is the window's boundary, key i - w + 1 the
first query i sees."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from attention_explorer.explorer.figures.heatmap import EDGE, OUTSIDE, outside_window, window_edge
from attention_explorer.explorer.figures.model_view import model_view, window_boundary
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.run.blocks import edges, factor
from attention_explorer.models.anatomy import Span, describe
from attention_explorer.models.config import TransformerConfig

# a Gemma-like stack of 3 layers: two local (a window of 7 keys) then one global; QK-norm, rotary
WINDOWED = TransformerConfig(
    vocab_size=100,
    d_model=32,
    n_heads=4,
    d_ff=64,
    n_encoder_layers=0,
    n_decoder_layers=3,
    positional="rotary",
    norm="rms",
    norm_first=True,
    qkv_bias=False,
    scale_embeddings=False,
    pad_id=None,
    qk_norm=True,
    sliding_window=7,
    layer_types=("local", "local", "global"),
)
CAUSAL_ROW = r"M_{qk} = \begin{cases} 0 & k \le q \\ -\infty & k > q \end{cases}"


def test_the_formula_writes_a_local_layers_window_and_a_global_layers_causal_mask():
    local = wording.attention_formula("decoder_self", WINDOWED, 1)
    assert r"M_{qk} = \begin{cases} 0 & q - 7 < k \le q \\ -\infty & \text{otherwise} \end{cases}" in local
    assert r"\text{(layer 2: local, a window of 7 keys)}" in local and r"k > q" not in local
    glob = wording.attention_formula("decoder_self", WINDOWED, 2)
    assert CAUSAL_ROW in glob and r"\text{(layer 3: global, every earlier key)}" in glob and "q - 7" not in glob
    # QK-norm: each head's q and k through the model's norm, then turned by position
    assert r"R_{\text{pos}}(\mathrm{RMSNorm}(Q W^Q_i))" in local and r"\sqrt{d_k}" in local
    # the same model without windows: the causal mask alone, no layer named (nothing to tell apart)
    plain = wording.attention_formula("decoder_self", replace(WINDOWED, sliding_window=None, layer_types=None), 0)
    assert plain.endswith(CAUSAL_ROW) and "layer" not in plain
    assert r"+ M\right), \\ M_{qk}" in local  # the mask on a line of its own
    assert "+ M" not in wording.attention_formula("encoder_self", WINDOWED, 0)  # no mask, whatever the layer


def test_the_formula_reads_the_layer_description_not_the_config_flags(monkeypatch):
    """The window written is the one models.anatomy describes for the layer: another description, another mask."""
    real = describe(WINDOWED)
    spans = (Span(None, 10000.0), Span(3, 10000.0), Span(None, 10000.0))
    monkeypatch.setattr(wording, "describe", lambda config: replace(real, spans=spans))
    assert r"q - 3 < k \le q" in wording.attention_formula("decoder_self", WINDOWED, 1)
    assert CAUSAL_ROW in wording.attention_formula("decoder_self", WINDOWED, 0)


def test_a_scale_other_than_eq_1s_is_written():
    gemma_scale = replace(WINDOWED, query_scale=20.0**-0.5)  # query_pre_attn_scalar 20, not d_head 8
    assert r"\sqrt{20}" in wording.attention_formula("decoder_self", gemma_scale, 0)


def path_points(path: str) -> np.ndarray:
    return np.array([[float(v) for v in p.split(",")] for p in re.findall(r"-?[\d.]+,-?[\d.]+", path)])


def test_a_thumbnail_a_cell_a_token_draws_the_head_views_staircase():
    n, window = 9, 5
    points = window_boundary(n, 32, window)
    hidden = outside_window(np.arange(n), np.arange(n), window)
    assert window_edge(hidden) == "M " + " L ".join(f"{x:g},{y:g}" for x, y in points)
    assert window_boundary(n, 32, 9) is None  # the window holds every key: nothing hidden, no edge


@pytest.mark.parametrize(("n", "window"), [(2048, 512), (100, 50), (700, 512)])
def test_a_pooled_thumbnails_edge_lies_on_the_windows_boundary(n, window):
    """Back in positions, every corner of the edge is a corner of the window's staircase: the line left of key
    i - w + 1 along query row i (its top, or the last row's bottom), from the first query with a key hidden to the
    last; no grey cell (wholly hidden) lies right of it."""
    bounds = edges(n, factor(n, 32))
    points = window_boundary(n, 32, window)
    cells = np.arange(len(bounds), dtype=float)
    keys, queries = (np.interp(points[:, i] + 0.5, cells, bounds) for i in (0, 1))
    close = {"rtol": 0, "atol": 1e-9 * n}  # positions to cells and back in float64: a few ulps of n
    np.testing.assert_allclose(keys[:-1], queries[:-1] - window + 1, **close)
    np.testing.assert_allclose([keys[0], queries[0], keys[-1], queries[-1]], [1, window, n - window, n], **close)
    assert (np.diff(queries) > 0).all()
    grey = outside_window(bounds[:-1], bounds[1:] - 1, window)
    for row, col in zip(*np.nonzero(grey), strict=True):  # the cell's right edge is left of the line at its top
        assert bounds[col + 1] <= bounds[row] - window + 1


def test_the_model_view_dashes_each_local_thumbnail_and_no_global_one():
    n, heads, windows = 40, 3, (7, None, 30)
    weights = np.random.default_rng(0).random((3, heads, n, n)).astype(np.float32)
    figure = model_view(weights, 32, windows=windows, n_tokens=n)
    dashed = [s for s in figure.layout.shapes if s.name == EDGE]
    assert len(dashed) == 2 * heads and all(s.line.dash == "dash" for s in dashed)
    side = -(-n // factor(n, 32))  # cells a thumbnail
    expected = {
        (row, head): window_boundary(n, 32, w) + [head * (side + 1), row * (side + 1)]
        for row, w in enumerate(windows)
        if w is not None
        for head in range(heads)
    }
    drawn = [path_points(s.path) for s in dashed]
    for points in expected.values():
        assert sum(np.allclose(points, d) for d in drawn if d.shape == points.shape) == 1
    assert any(t.name == OUTSIDE for t in figure.data)
    assert not [s for s in model_view(weights, 32, n_tokens=n).layout.shapes if s.name == EDGE]  # no windows


def test_the_overview_map_names_gemmas_block_as_it_is():
    """Figure 1 for a Gemma-like block: GeGLU (not SwiGLU), a sandwich norm's Add, one key/value head (singular),
    local or global attention, all from the layer description."""
    from attention_explorer.explorer.figures.overview import figure_one

    gemma = replace(
        WINDOWED,
        sandwich_norm=True,
        gated_ffn=True,
        activation="gelu_pytorch_tanh",
        n_kv_heads=1,
        rope_theta=1_000_000.0,
        rope_local_theta=10_000.0,
    )
    figure = figure_one(gemma, "G")
    labels = [a.text for a in figure.layout.annotations]
    assert "Gated feed-forward (GeGLU) 32 → 64 → 32" in labels and not [t for t in labels if "SwiGLU" in str(t)]
    assert labels.count("Add (sandwich: an RMSNorm before the sub-layer and one after)") == 2
    assert "Masked self-attention (4 query heads, 1 key/value head; local or global)" in labels
    assert "No position added (rotary: bases 10,000 local, 1,000,000 global)" in labels
    title = figure.layout.title.text
    assert "sharing 1 key/value head," in title and "sandwich RMSNorm (before and after each sub-layer)" in title
    llama_like = replace(WINDOWED, sliding_window=None, layer_types=None, gated_ffn=True, activation="silu")
    labels = [a.text for a in figure_one(llama_like, "L").layout.annotations]
    assert "Gated feed-forward (SwiGLU) 32 → 64 → 32" in labels
    assert "Add (pre-norm: the RMSNorm comes before the sub-layer)" in labels
    assert "No position added (rotary: every layer turns q, k)" in labels  # one base


def test_the_attention_pages_opening_writes_qk_norm_where_the_model_has_it():
    from attention_explorer.explorer.lesson.model_words import attention_formula

    said = attention_formula(describe(WINDOWED))
    assert r"first normed and then turned by its position, $\tilde{q} = R_{\text{pos}}\,\mathrm{RMSNorm}(q)$" in said
    plain = attention_formula(describe(replace(WINDOWED, qk_norm=False)))
    assert r"first turned by its position, $\tilde{q} = R_{\text{pos}}\,q$ (rotary" in plain and "QK-norm" not in plain


def test_the_input_row_is_named_with_the_sandwich_norm_where_the_layer_has_one():
    sandwich = wording.attention_input(replace(WINDOWED, sandwich_norm=True), "decoder_self", 2)
    assert sandwich == "output of decoder layer 2: h + RMSNorm(FFN(RMSNorm(h))) (pre-norm: not yet normalised)"
    assert wording.attention_input(WINDOWED, "decoder_self", 2).startswith(
        "output of decoder layer 2: h + FFN(RMSNorm(h))"
    )
