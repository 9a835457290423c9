"""W^Q, W^K, W^V past walkthrough.MATRIX_CELLS (Gemma 3 270M's three 640 x 256): each cell the mean of its block of the
model's own entries (checked against numpy), the block's size in the title and the hover, the figure under an
overview's size to send; every entry as it is when asked, and a small model's matrices whole as before."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_explorer.explorer.figures import walkthrough, zoom
from attention_explorer.explorer.run import blocks
from tests import tolerance
from tests.figdata import array

GEMMA3 = (640, 256)  # Gemma 3 270M: d_model x d_head


def matrices(shape: tuple[int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * 0.05).astype(np.float32) for _ in range(3)]


def assert_block_means(drawn: np.ndarray, matrix: np.ndarray, f_r: int, f_c: int) -> None:
    """Each drawn cell against numpy's float64 mean of its block of signed entries: the float64 mean within its sums'
    order and division (pooled_means_bound of the block's mean magnitude, which bounds the signed sum's reordering),
    then one float32 rounding, IEEE's and monotone: exactly the float32 nearest a value in that interval."""
    n_r, n_c = matrix.shape
    expected = np.empty(drawn.shape)
    magnitude = np.empty(drawn.shape)
    for i, r in enumerate(range(0, n_r, f_r)):
        for j, c in enumerate(range(0, n_c, f_c)):
            block = matrix[r : r + f_r, c : c + f_c].astype(np.float64)
            expected[i, j], magnitude[i, j] = block.mean(), np.abs(block).mean()
    near = tolerance.pooled_means_bound(f_r * f_c, magnitude)
    low, high = (expected - near).astype(np.float32), (expected + near).astype(np.float32)
    got = drawn.astype(np.float32)
    tolerance.assert_within(got, np.clip(got, low, high), 0.0, "a block mean, the float32 of a value")


def test_the_fewest_entries_a_block_that_fit():
    budget = walkthrough.MATRIX_CELLS // 3
    assert blocks.fewest_within(*GEMMA3, budget) == (8, 1)  # 80 x 256 cells: every head dimension kept
    assert blocks.fewest_within(576, 64, budget) == (2, 1)  # SmolLM2: 288 x 64
    assert blocks.fewest_within(384, 32, budget) == (1, 1)  # MiniLM: whole
    for shape, cells in (((640, 256), budget), ((100, 30), 7), ((7, 300), 20), ((1, 1), 1)):
        f_r, f_c = blocks.fewest_within(*shape, cells)
        assert -(-shape[0] // f_r) * -(-shape[1] // f_c) <= cells
        smaller = [
            (a, b)
            for a in range(1, shape[0] + 1)
            for b in range(1, shape[1] + 1)
            if a * b < f_r * f_c and -(-shape[0] // a) * -(-shape[1] // b) <= cells
        ]
        assert not smaller, (shape, cells, smaller[:3])  # none with fewer entries a block fits


def test_gemma3_shaped_matrices_are_block_means_of_their_entries_and_small_to_send():
    w = matrices(GEMMA3)
    figure = walkthrough.projection_matrices(w, ["W^Q", "W^K", "W^V"], "Layer 1, head 1", height=320)
    spec = json.loads(figure.to_json())
    heat = [t for t in spec["data"] if t["type"] == "heatmap"]
    assert len(heat) == 3
    for trace, matrix in zip(heat, w, strict=True):
        z = np.asarray(array(trace["z"]))
        assert z.shape == (80, 256)
        assert_block_means(z, matrix, 8, 1)
        assert trace["y"] == [f"{r}-{r + 7}" for r in range(0, 640, 8)] and "x" not in trace
        assert "rows %{y} (input dim)" in trace["hovertemplate"] and "mean of these entries" in trace["hovertemplate"]
    assert sum(np.asarray(array(t["z"])).size for t in heat) <= walkthrough.MATRIX_CELLS == zoom.OVERVIEW_CELLS**2
    assert "each cell the mean of 8 entries: 8 input dimensions x one head dimension" in spec["layout"]["title"]["text"]
    whole = walkthrough.projection_matrices(w, ["W^Q", "W^K", "W^V"], "t", cells=None).to_json()
    # the whole three were 2.8 MB to send, more than the rest of the page at 2,048 tokens; drawn in blocks, an eighth
    assert len(spec_text := figure.to_json()) < 0.45e6 and len(whole) > 7 * len(spec_text)


def test_every_entry_when_asked_and_a_small_model_whole():
    w = matrices(GEMMA3, seed=1)
    figure = json.loads(walkthrough.projection_matrices(w, ["Q", "K", "V"], "t", cells=None).to_json())
    for trace, matrix in zip((t for t in figure["data"] if t["type"] == "heatmap"), w, strict=True):
        np.testing.assert_array_equal(np.asarray(array(trace["z"])), matrix)  # the entries themselves, bit for bit
        assert "mean" not in trace["hovertemplate"] and "y" not in trace
    assert "mean" not in figure["layout"]["title"]["text"]
    small = matrices((384, 32), seed=2)  # MiniLM's head: 36,864 entries in all, within the budget
    drawn = json.loads(walkthrough.projection_matrices(small, ["Q", "K", "V"], "t").to_json())
    for trace, matrix in zip((t for t in drawn["data"] if t["type"] == "heatmap"), small, strict=True):
        np.testing.assert_array_equal(np.asarray(array(trace["z"])), matrix)


def label(n: int, f: int) -> str:
    """The last block's name: its first to its last dimension, or the one dimension it holds."""
    last = (n - 1) // f * f
    return f"{last}-{n - 1}" if last < n - 1 else str(last)


@pytest.mark.parametrize(("shape", "cells", "short"), [((100, 30), 3 * 7 * 30, "row"), ((3, 101), 3 * 33, "column")])
def test_a_short_last_block_is_named_and_said(shape, cells, short):
    """Dimensions that do not divide evenly: the last block holds what is left, its label and the title say so."""
    w = matrices(shape, seed=3)
    f_r, f_c = blocks.fewest_within(*shape, cells // 3)
    assert (bool(shape[0] % f_r), bool(shape[1] % f_c)) == (short == "row", short == "column")
    spec = json.loads(walkthrough.projection_matrices(w, ["Q", "K", "V"], "t", cells=cells).to_json())
    trace = spec["data"][0]
    axis, n, f = ("y", shape[0], f_r) if short == "row" else ("x", shape[1], f_c)
    assert trace[axis][-1] == label(n, f)
    assert_block_means(np.asarray(array(trace["z"])), w[0], f_r, f_c)
    assert f"(the last {short} of cells average fewer)" in spec["layout"]["title"]["text"]


def test_a_strip_names_each_row_once_not_each_cell():
    """K's strip of 16 of 2,048 keys, 256 wide (Gemma 3's heads): each row's name is its category, read by the hover
    ('17: cat'), no label a cell; the rows are the model's own; two rows of one token stay two rows."""
    rows = np.random.default_rng(4).standard_normal((2048, 256)).astype(np.float32)
    keys = [f"<b>t{i % 7}" for i in range(2048)]  # repeated tokens, each a hostile label
    shown = np.arange(0, 2048, 128)
    spec = json.loads(walkthrough.vector_strip(rows, keys, "K", shown).to_json())
    trace = spec["data"][0]
    np.testing.assert_array_equal(np.asarray(array(trace["z"])), rows[shown])
    assert trace["y"] == [f"{i}: &lt;b&gt;t{i % 7}" for i in shown] and "customdata" not in trace
    assert trace["hovertemplate"].startswith("%{y}<br>") and spec["layout"]["yaxis"]["type"] == "category"
    assert len(json.dumps(spec)) < 16 * 256 * 6 + 20_000  # the numbers, and little besides (it was 80 KB)
    whole = json.loads(walkthrough.vector_strip(rows[:5], keys[:5] * 1, "K").to_json())
    assert whole["data"][0]["y"] == [f"{i}: &lt;b&gt;t{i}" for i in range(5)]  # every key: named by position
    assert whole["layout"]["yaxis"]["ticktext"] == [f"&lt;b&gt;t{i}" for i in range(5)]  # drawn: the tokens alone
    repeated = json.loads(walkthrough.vector_strip(rows[:2], ["the", "the"], "K").to_json())
    assert repeated["data"][0]["y"] == ["0: the", "1: the"]  # a category axis would merge two rows named "the"
