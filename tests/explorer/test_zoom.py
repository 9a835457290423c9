"""Long maps: block means equal numpy's means of the weights, the overview names its true factor, the region drawn at
full resolution is the weights' own slice, and a map up to zoom.FULL is drawn as it always was."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app import drill
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.run import blocks
from tests import tolerance
from tests.figdata import array


def assert_mean(found, block: np.ndarray, what: str) -> None:
    """A block mean (float64 sums of float32 weights, divided, rounded once to float32) against numpy's float64 mean
    of the block: the float64 mean within its sums' order and its division (pooled_means_bound, terms >= 0), then one
    float32 rounding, IEEE's and monotone: exactly the float32 nearest a value in that interval (between the nearest
    to its two ends, usually one number), on any machine. A bound of that one rounding sat at a 1.1x margin."""
    expected = block.astype(np.float64).mean()
    near = tolerance.pooled_means_bound(block.size, expected)
    low, high = np.float32(expected - near), np.float32(expected + near)
    got = np.float32(found)
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, f"{what}, the float32 of a value")


def causal(n: int, seed: int = 0) -> np.ndarray:
    """A random (n, n) map shaped like a decoder's: zeros above the diagonal, rows summing to 1."""
    w = np.tril(np.random.default_rng(seed).random((n, n))).astype(np.float32)
    return w / w.sum(axis=1, keepdims=True)


def tokens(n: int) -> list[str]:
    return [f"Ġt{i}" for i in range(n)]


@pytest.mark.parametrize(("shape", "f_q", "f_k"), [((2, 37, 45), 4, 6), ((3, 64, 64), 8, 8), ((1, 9, 5), 1, 2)])
def test_block_means_are_numpys_means_of_each_block(shape, f_q, f_k):
    w = np.random.default_rng(1).random(shape).astype(np.float32)
    means = blocks.block_means(w, f_q, f_k)
    assert means.shape == (shape[0], -(-shape[1] // f_q), -(-shape[2] // f_k)) and means.dtype == np.float32
    for h in range(shape[0]):
        for i in range(means.shape[1]):
            for j in range(means.shape[2]):
                block = w[h, i * f_q : (i + 1) * f_q, j * f_k : (j + 1) * f_k]  # the last block: what is left
                assert_mean(means[h, i, j], block, "a block's mean")
    assert blocks.block_means(w, 1, 1) is w  # factor 1: the model's own array, not a copy


def test_thumbnails_reduce_one_layer_to_at_most_32_a_side_with_the_true_factor():
    w = np.stack([causal(100, seed) for seed in range(3)])  # (H, 100, 100)
    thumbs = blocks.thumbnails(w)
    assert blocks.factor(100, blocks.THUMBNAIL) == 4 and thumbs.shape == (3, 25, 25)  # 4 x 4 positions a cell
    assert_mean(thumbs[2, 3, 1], w[2, 12:16, 4:8], "a thumbnail's cell")
    assert blocks.thumbnails(w[:, :20, :20]).shape == (3, 20, 20)  # short: every weight
    stack = blocks.every_layer(iter([w, w[::-1]]))  # one layer at a time, as a run holds them
    assert stack.shape == (2, 3, 25, 25)
    np.testing.assert_array_equal(stack[1, 0], thumbs[2])


def test_up_to_512_a_side_a_map_is_drawn_whole_past_it_as_an_overview():
    assert zoom.FULL == 512 and not zoom.needs_overview(512, 512)  # MiniLM's longest input stays exactly as it was
    assert zoom.needs_overview(513, 513) and zoom.needs_overview(20, 1024)
    assert zoom.overview_factors(1024, 1024) == (4, 4) and zoom.overview_factors(2048, 2048) == (8, 8)


@pytest.mark.parametrize("n", [1027, 2048])
def test_overview_draws_the_block_means_and_says_how_many_weights_a_cell_averages(n):
    w = causal(n)
    region = zoom.region_around(n, n, 700, 650, 64)
    fig = zoom.overview_heatmap(w, tokens(n), tokens(n), "Layer 1, head 2", region)
    f = -(-n // zoom.OVERVIEW_CELLS)  # 1,027 tokens: 5 a cell (206 cells, the last of 2); 2,048: 8 (256 cells)
    z = array(fig.to_dict()["data"][0]["z"])
    assert z.shape == (-(-n // f), -(-n // f))
    np.testing.assert_array_equal(z, blocks.block_means(w, f, f))
    assert_mean(z[40, 3], w[40 * f : 41 * f, 3 * f : 4 * f], "an overview cell")
    assert_mean(z[-1, -1], w[(len(z) - 1) * f :, (len(z) - 1) * f :], "the last, short cell")
    assert f"each cell averages {f} x {f} weights" in fig.layout.title.text
    note = zoom.overview_note(n, n, masked=True)
    assert note.startswith(f"Each cell averages {f} x {f} weights: the mean of the attention weights of {f} queries")
    assert ("the last row and column of cells average fewer" in note) == (n % f != 0) and "mask hides is 0" in note
    # the cells' edges are the positions they average: cell j covers keys j*f .. j*f+f-1
    assert list(fig.data[0].x[:3]) == [-0.5, f - 0.5, 2 * f - 0.5] and fig.data[0].x[-1] == n - 0.5
    (outline,) = fig.layout.shapes
    assert (outline.x0, outline.x1, outline.y0, outline.y1) == (617.5, 681.5, 667.5, 731.5)
    assert len(fig.to_json()) < 1_000_000  # against 22 MB for every weight of a 2,048-token head


def test_a_click_on_the_overview_names_a_tile_and_its_mean_and_centres_the_region_there():
    n = 1024
    w = causal(n, seed=3)
    fig = zoom.overview_heatmap(w, tokens(n), tokens(n), "head")
    (tiles,) = [t for t in fig.data if t.meta == CLICKS]
    assert len(tiles.x) == 64 * 64  # tiles of 16 x 16 positions
    first_q, last_q, first_k, last_k, mean = tiles.customdata[37 * 64 + 20]
    assert (first_q, last_q, first_k, last_k) == (592, 607, 320, 335)
    assert_mean(mean, w[592:608, 320:336], "a tile's mean")
    assert (tiles.x[37 * 64 + 20], tiles.y[37 * 64 + 20]) == (327.5, 599.5)  # drawn on the tile's centre
    session: dict = {}
    point = {"customdata": list(tiles.customdata[37 * 64 + 20])}
    assert drill.select_region(session, point, "q", "k") and session == {"q": 600, "k": 328}
    assert not drill.select_region(session, {"customdata": [3]}, "q", "k")  # not an overview tile


def test_the_region_is_the_weights_own_slice_named_by_the_texts_positions():
    n = 1500
    w, names = causal(n, seed=5), tokens(n)
    region = zoom.region_around(n, n, 1200, 1100, 64)
    assert (region.queries, region.keys) == (range(1168, 1232), range(1068, 1132))
    fig = zoom.region_heatmap(w, names, names, region, "Layer 3, head 4", clickable=True)
    heat = fig.to_dict()["data"][0]
    np.testing.assert_array_equal(array(heat["z"]), w[1168:1232, 1068:1132])
    assert heat["y"][0] == "1168: Ġt1168" and heat["x"][-1] == "1131: Ġt1131"
    assert fig.layout.title.text == "Layer 3, head 4: queries 1168-1231, keys 1068-1131"
    (cells,) = [t for t in fig.data if t.meta == CLICKS]  # 64 x 64: a click target a cell
    query, key, weight = cells.customdata[5 * 64 + 7]  # a click names the text's query (and key)
    assert (query, key) == (1173, 1075) and weight == float(w[1173, 1075])  # the weight itself
    edge = zoom.region_around(n, n, 3, n - 1, 512)  # at the ends: moved in, never cut
    assert (edge.queries, edge.keys) == (range(0, 512), range(n - 512, n))
    full = zoom.region_heatmap(w, names, names, zoom.region_around(n, n, 700, 700, 512), "h", clickable=True)
    assert len(full.to_json()) < 1_600_000  # the largest region: as heavy as a 512-token map today


def test_a_512_token_map_is_unchanged_by_the_offset_and_hostile_tokens_are_escaped_in_the_overview():
    w = causal(512)
    names = tokens(512)
    np.testing.assert_array_equal(
        array(head_heatmap(w, names, names, first=(0, 0)).to_dict()["data"][0]["z"]),
        array(head_heatmap(w, names, names).to_dict()["data"][0]["z"]),
    )
    hostile = ["<b>x</b>", *tokens(599)]
    fig = zoom.overview_heatmap(causal(600), hostile, hostile)
    assert fig.layout.xaxis.ticktext[0] == "0: &lt;b&gt;x&lt;/b&gt;" and "<b>" not in "".join(fig.layout.yaxis.ticktext)


def test_a_difference_map_says_its_cells_average_differences():
    n = 2048
    note = zoom.overview_note(n, n, diverging=True)
    assert note == (
        "Each cell averages 8 x 8 differences: the mean of the differences of the attention weights of 8 queries x 8 "
        "keys."
    )
    moved = causal(n) - causal(n, seed=1)
    fig = zoom.overview_heatmap(moved, tokens(n), tokens(n), "A - B", diverging=True)
    assert fig.layout.title.text == "A - B (each cell averages 8 x 8 differences)"
    heat = fig.data[0]
    assert heat.zmid == 0 and heat.zmin == -heat.zmax  # red-blue, centred on no change
