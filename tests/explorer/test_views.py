"""Model view, head view and positional figures on small synthetic arrays."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.figures import positional
from attention_explorer.explorer.figures.head_view import WINDOW, head_view, window_start
from attention_explorer.explorer.figures.model_view import grid, model_view, pool
from attention_explorer.models.positional import sinusoidal_table
from tests import tolerance
from tests.figdata import array


def test_pool_is_block_mean_and_identity_when_small():
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(pool(w, 8), w)
    np.testing.assert_array_equal(pool(w, 2), [[2.5, 4.5], [10.5, 12.5]])


def test_grid_places_each_head_scaled_to_its_max():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(5), size=(2, 3, 5)).astype(np.float32)  # (L=2, H=3, 5, 5)
    image = grid(w, size=32)
    assert image.shape == (2 * 6 - 1, 3 * 6 - 1)
    # a 5 x 5 map is its own thumbnail: the same float32 division by its maximum, bit for bit
    np.testing.assert_array_equal(image[6:11, 12:17], w[1, 2] / w[1, 2].max())
    assert np.isnan(image[5]).all() and np.isnan(image[:, 5]).all()


def test_model_view_at_512_tokens_stays_small():
    w = np.full((6, 12, 512, 512), 1 / 512, dtype=np.float32)
    fig = model_view(w, 32, selected=(2, 3))
    z = array(fig.to_dict()["data"][0]["z"])
    assert z.shape == (6 * 33 - 1, 12 * 33 - 1)
    assert len(fig.to_json()) < 1_000_000
    assert fig.layout.shapes[0].x0 == 3 * 33 - 0.5


def test_head_view_lines_follow_the_weights():
    w = np.zeros((2, 3, 3), dtype=np.float32)
    w[0] = np.eye(3)
    w[1, :, 0] = 1.0
    fig = head_view(w, ["a", "<b>", "c"], ["a", "<b>", "c"], heads=[0, 1])
    lines = [t for t in fig.data if t.mode == "lines"]
    head0 = [t for t in lines if t.legendgroup == "h0"]
    ys = [y for t in head0 for y in t.y if y is not None]
    assert ys == [0, 0, 1, 1, 2, 2]  # each query to itself
    head1_targets = [t.y[1::3] for t in lines if t.legendgroup == "h1"]
    assert all(k == 0 for ks in head1_targets for k in ks)
    texts = [t for t in fig.data if t.mode == "text"]
    assert list(texts[0].text) == ["a", "&lt;b&gt;", "c"]
    focused = head_view(w, ["a", "b", "c"], ["a", "b", "c"], heads=[0], focus=1)
    assert [y for t in focused.data if t.mode == "lines" for y in t.y if y is not None] == [1, 1]


def test_positional_figures_carry_the_table():
    table = sinusoidal_table(20, 8).numpy()
    fig = positional.curves(table, [0, 3])
    np.testing.assert_array_equal(array(fig.data[1].y), table[:, 3])
    sim = positional.similarity(table)
    d = table.shape[-1]
    # float32: each norm's d squares and its square root, the division, then the product's d terms: the unit rows'
    # squared length within (d + 1) eps twice over, plus d eps for the product's own sum, of 1
    bound = tolerance.reordered(2 * d + 2, 1.0)
    tolerance.assert_within(np.diag(sim), np.ones(len(sim)), bound, "a position's cosine with itself")
    # (i, j) and (j, i): the same d-term dot product, perhaps summed in another order by the matrix product's blocking
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    tolerance.assert_within(sim, sim.T, tolerance.product_bound(unit, unit.T), "symmetric")
    heat = positional.table_heatmap(table, "t")
    np.testing.assert_array_equal(array(heat.data[0].z), table)


def test_head_view_at_512_tokens_is_one_window_with_stubs_for_the_rest():
    from attention_explorer.explorer.figures.head_view import WINDOW

    n = 512
    w = np.zeros((2, n, n), dtype=np.float32)
    w[0] = np.eye(n)
    w[1, :, 0] = 1.0  # every query on the first token
    tokens = [f"t{i}" for i in range(n)]
    fig = head_view(w, tokens, tokens, heads=[0, 1], focus=300)
    assert fig.layout.height <= 1000  # one screen, not 12,000 px
    texts = [t for t in fig.data if t.mode == "text"]
    assert len(texts[0].text) == WINDOW + 2
    assert texts[0].text[0] == "\u25b2 284 earlier tokens" and texts[0].text[-1] == "\u25bc 196 later tokens"
    assert texts[0].text[1 + 300 - 284] == "300: t300"  # each token in a window of a longer text named by position
    lines = [t for t in fig.data if t.mode == "lines"]
    ends = {t.legendgroup: [y for y in t.y[1::3]] for t in lines}
    assert ends["h0"] == [300 - 284]  # to itself, inside the window
    assert ends["h1"] == [-1]  # to token 0: the "earlier" stub
    clicks = [t for t in fig.data if t.mode == "markers"]
    assert [c[0] for c in clicks[0].customdata] == list(range(284, 284 + WINDOW))


def test_head_view_window_shows_a_query_and_its_key_together_where_they_fit():
    first = window_start(512, 73, also=90)
    assert first <= 73 < first + WINDOW and first <= 90 < first + WINDOW
    assert window_start(512, 73, also=300) == window_start(512, 73) == 73 - WINDOW // 2  # too far apart: the query
    late = window_start(512, 500, also=511)
    assert late == 512 - WINDOW and window_start(20, 5, also=15) == 0  # never past the end; short: no window


def test_the_lessons_grid_draws_thumbnails_a_class_can_read():
    """Step 8: each thumbnail as wide as the plot allows (at most 160 px), never the 70 px rows a 340 px grid gave
    MiniLM's 6 layers; a stack too deep for the screen draws a window of layers that holds the chosen one."""
    from attention_explorer.explorer.figures.model_view import GRID_PX, layer_window, thumbnail_px

    assert thumbnail_px(4) == 160  # the toy models' 4 heads: as large as a thumbnail gets
    assert thumbnail_px(12) == 83 and thumbnail_px(12, present=True) == 116  # MiniLM: the sidebar open / folded
    assert thumbnail_px(9, present=True) == 155  # SmolLM2
    assert list(layer_window(6, 5, 83, present=True)) == list(range(6))  # 6 rows of 83 px fit 600 px
    # the sidebar open leaves 400 px under the pickers: MiniLM in two windows of 3 layers, each holding its layer
    assert [list(layer_window(6, layer, 83)) for layer in (0, 2, 3, 5)] == [[0, 1, 2]] * 2 + [[3, 4, 5]] * 2
    assert list(layer_window(2, 1, 160)) == [0, 1]  # the toy models: both layers at once
    for layer in range(30):  # SmolLM2 presenting: 3 rows of 155 px at a time, holding the chosen layer
        window = layer_window(30, layer, 155, present=True)
        assert len(window) == GRID_PX[True] // 155 == 3 and layer in window and window.start % 3 == 0
    for layer in range(7):  # windows as even as they come: 7 layers that fit 5 at a time go 1-4 and 4-7
        window = layer_window(7, layer, 120, present=True)
        assert len(window) == 4 and layer in window and window.stop <= 7
    w = np.random.default_rng(1).dirichlet(np.ones(8), size=(3, 9, 8)).astype(np.float32)
    fig = model_view(w, 32, selected=(13, 2), first_layer=12, row_px=155)
    assert fig.layout.height == 3 * 155 + 60
    assert list(fig.layout.yaxis.ticktext) == ["layer 13", "layer 14", "layer 15"]
    assert fig.layout.shapes[0].y0 == 1 * 9 - 0.5  # the chosen layer's row in the window outlined
    clicked = fig.data[1].customdata
    assert [tuple(c[:2]) for c in clicked][:2] == [(12, 0), (12, 1)]  # clicks name the model's own layer
