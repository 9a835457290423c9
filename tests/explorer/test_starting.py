"""Starting points and click drill-down as pure functions: scores against hand-made weights and a real trace."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app import drill, state
from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.figures.heatmap import CLICK_CELLS, HOVER, head_heatmap
from attention_explorer.explorer.figures.model_view import layer_heads, model_view
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import compare, starting, trace

TOKENS = ["[CLS]", "the", "dog", "barked", "because", "it", ".", "[SEP]"]


def uniform(n_layers: int = 2, n_heads: int = 3) -> np.ndarray:
    t = len(TOKENS)
    return np.full((n_layers, n_heads, t, t), 1.0 / t)


def test_best_link_ignores_markers_punctuation_self_and_neighbours():
    w = uniform()
    w[0, 0, 5, 0] = 0.99  # it -> [CLS]: a marker
    w[0, 1, 5, 6] = 0.98  # it -> '.': punctuation
    w[0, 2, 5, 5] = 0.97  # it -> it: self
    w[1, 0, 5, 4] = 0.96  # it -> because: a neighbour
    w[1, 2, 5, 2] = 0.60  # it -> dog: the link worth seeing
    link = starting.best_link(w, TOKENS, TOKENS)
    assert (link.layer, link.head, link.query, link.key) == (1, 2, 5, 2)
    assert link.weight == 0.60  # a weight read, not computed: exact
    scores = starting.links(w, TOKENS, TOKENS)
    assert scores.shape == (2, 3) and scores.argmax() == 5 and scores[0, 0] == 1 / 8


def test_cross_attention_counts_neighbours_and_short_sentences_fall_back():
    w = uniform(1, 2)
    w[0, 1, 5, 4] = 0.9  # a neighbour in position, but across two sequences position means nothing
    assert starting.best_link(w, TOKENS, TOKENS, self_attention=False).head == 1
    short = ["[CLS]", "thinking", "machines", "[SEP]"]
    w = np.full((1, 2, 4, 4), 0.25)
    w[0, 1, 1, 2] = 0.7  # the only content pair is adjacent: still found, not layer 1 head 1
    assert (starting.best_link(w, short, short).head, starting.best_link(w, short, short).key) == (1, 2)
    markers = ["[CLS]", "[SEP]"]
    assert starting.best_link(np.full((1, 1, 2, 2), 0.5), markers, markers) == starting.Link(0, 0, 0, 0, 0.0)


def test_content_query_and_rank_heads():
    assert starting.content_query(TOKENS) == 1
    assert starting.content_query(TOKENS, 5) == 5
    assert starting.content_query(TOKENS, 6) == 1  # '.' is not a content word
    w = uniform()
    w[1, 1, 5, 2], w[0, 2, 5, 2] = 0.7, 0.5
    ranked = starting.rank_heads(w, 5, 2)
    assert ranked[:2] == [(1, 1, 0.7), (0, 2, 0.5)]  # the weights themselves
    assert len(ranked) == 6 and [r[2] for r in ranked] == sorted((r[2] for r in ranked), reverse=True)


def test_rank_heads_on_the_trace_is_the_models_own_weights(minilm):
    result = trace.run(minilm, "The animal didn't cross the street because it was too tired", 128)
    tokens = result.source_tokens
    weights = result.encoder_self.weights
    it, animal = tokens.index("it"), tokens.index("animal")
    ranked = starting.rank_heads(weights, it, animal)
    layer, head, weight = ranked[0]
    assert weight == weights[:, :, it, animal].max() == weights[layer, head, it, animal]
    link = starting.best_link(weights, tokens, tokens)
    assert starting.is_content(tokens[link.query]) and starting.is_content(tokens[link.key])
    assert abs(link.query - link.key) > starting.NEAR
    assert link.weight == starting.links(weights, tokens, tokens).max()  # the same weight, read twice
    assert (link.layer, link.head) != (0, 0)  # not the faint first head


def test_twins_differ_from_a_by_one_word():
    a, b = compare.MINIMAL_PAIRS[0]
    assert compare.variants(a)[0] == b and compare.variants(b)[0] == a
    sentence = "Bark is very cute and he is a dog"
    made = compare.variants(sentence)
    assert made and sentence not in made
    for twin in made:  # each one word away
        assert sum(x != y for x, y in zip(twin.split(), sentence.split(), strict=True)) == 1
    assert compare.variants("!") == []


def clicks(figure):
    return next(t for t in figure.data if t.meta == CLICKS)


def test_click_targets_name_their_cells():
    w = uniform(3, 4)
    grid = model_view(w)
    targets = clicks(grid)
    assert len(targets.x) == 12 and [list(c[:2]) for c in targets.customdata][5] == [1, 1]
    assert grid.layout.hoverdistance == -1
    one = clicks(layer_heads(w[2], 2))
    assert [tuple(c[:2]) for c in one.customdata] == [(2, h) for h in range(4)]
    stats = statistic_grid(w[..., 0, 0], np.full((3, 4), "broad", dtype=object), "entropy")
    assert [tuple(c[:2]) for c in clicks(stats).customdata][-1] == (2, 3)
    heat = head_heatmap(w[0, 0], TOKENS, TOKENS, clickable=True)
    cells = clicks(heat)
    assert len(cells.x) == len(TOKENS) ** 2 and list(cells.customdata[9][:2]) == [1, 1]
    assert cells.y[9] == heat.data[0].y[1] and cells.x[9] == heat.data[0].x[1]
    assert len(head_heatmap(w[0, 0], TOKENS, TOKENS).data) == 1  # not asked: no targets


def long_map(n: int) -> np.ndarray:
    w = np.random.default_rng(n).random((n, n)).astype(np.float32)
    return w / w.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n", [65, 128, 512])
def test_a_long_heatmap_has_one_click_target_a_row_and_keeps_its_own_hover(n):
    tokens = [f"t{i}" for i in range(n)]
    heat = head_heatmap(long_map(n), tokens, tokens, clickable=True)
    assert n * n > CLICK_CELLS
    rows = clicks(heat)
    assert len(rows.y) == n and [c[0] for c in rows.customdata] == list(range(n))  # row i names query i
    cells = heat.data[0]
    assert cells.hoverinfo != "skip" and cells.hovertemplate == HOVER  # the exact query, key and weight
    # hovermode "y" with the markers on a hidden axis past the drawn rows (clicks.row_targets): never drawn on the
    # map, found at the hovered cell's row number
    assert heat.layout.hovermode == "y" and heat.layout.hoverdistance >= 0 and rows.yaxis == "y2"
    assert rows.xaxis == "x2" and heat.layout.xaxis2.overlaying == "x"  # the map's x range is not padded for them
    low, high = sorted(heat.layout.yaxis2.range)
    assert heat.layout.yaxis2.overlaying == "y" and high - low == n and low > 2 * n - 1
    assert len(heat.to_json()) < 2_000_000  # a marker a cell at 512 tokens would be over 20 MB


def test_a_pooled_heatmap_maps_a_click_to_the_first_query_of_its_block():
    tokens = [f"t{i}" for i in range(512)]
    small = head_heatmap(long_map(128), tokens[:128], tokens[:128], clickable=True, overview=32)  # 32 x 32 blocks
    cells = clicks(small)
    assert len(cells.x) == 32 * 32
    assert cells.y[5 * 32 + 7].startswith("20-23: ") and list(cells.customdata[5 * 32 + 7][:2]) == [20, 28]
    big = head_heatmap(long_map(512), tokens, tokens, clickable=True, overview=256)  # 256 blocks of 2 rows
    rows = clicks(big)
    assert [c[0] for c in rows.customdata] == list(range(0, 512, 2))
    assert big.data[0].y[100].startswith("200-201: ")


def test_clicked_point_sets_the_pickers_and_ends_the_starting_point():
    point = {"curve_number": 1, "point_index": 7, "customdata": [4, 1, "layer 5, head 2"]}
    chart_state = {"selection": {"points": [point], "point_indices": [7], "box": [], "lasso": []}}
    assert drill.clicked(chart_state) == point and drill.clicked({"selection": {"points": []}}) is None
    assert drill.clicked(None) is None
    session: dict = {}
    state.start(session, "model_layer", 2)
    assert state.at_start(session, "model_layer")
    assert drill.select_head(session, drill.clicked(chart_state), "model_layer", "model_head")
    assert (session["model_layer"], session["model_head"]) == (4, 1)
    assert not state.at_start(session, "model_layer")  # a click is a choice: a new sentence keeps it
    assert drill.select_token(session, {"customdata": [3, 0, 0.25]}, "qkv_query") and session["qkv_query"] == 3
    assert not drill.select_head(session, {"customdata": ["x"]}, "a", "b") and "a" not in session
    assert drill.token_of({"x": 1}) is None and drill.head_of({"customdata": [True, 1]}) is None


def test_a_layers_link_is_the_first_largest_counted_weight_of_the_masked_layer():
    """layer_link equals the argmax of the whole masked layer, ties to the first (head, query, key)."""
    rng = np.random.default_rng(3)
    tokens = tuple(f"w{i}" for i in range(12))
    for weights in (rng.random((3, 12, 12), dtype=np.float32), np.full((2, 12, 12), 0.25, np.float32)):
        allowed = starting.counted(tokens, tokens, True)
        masked = np.where(allowed, weights, 0.0)
        head, query, key = np.unravel_index(int(np.argmax(masked)), masked.shape)
        expected = [masked[head, query, key], head, query, key]
        np.testing.assert_array_equal(starting.layer_link(weights, tokens, tokens), expected)


def test_a_causal_focus_never_opens_on_the_last_token_where_the_mask_hides_nothing():
    tokens = ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]
    assert starting.masked_query(tokens, 4) == 2  # the middle: 'Ġis' and 'ĠFrance' are hidden from it
    assert starting.masked_query(tokens, 3) == 3  # not the last: kept
    six = ["<bos>", "a", "b", ",", "c", "d"]
    assert starting.masked_query(six, 5) == 2  # nearest the middle (2.5), the earlier on a tie
    assert starting.masked_query(["<bos>", ",", "x"], 2) == 2  # nothing worth a look before it: as it was
    assert starting.masked_query(["x"], 0) == 0
