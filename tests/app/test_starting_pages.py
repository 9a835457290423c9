"""Pages open on something worth seeing, from the sentence's own numbers; Find heads ranks the trace's weights."""

from __future__ import annotations

import numpy as np

from attention_explorer.explorer.figures.clicks import CLICKS
from attention_explorer.explorer.run import compare, starting, trace
from tests.app import new_app
from tests.figdata import array, spec

EXAMPLE = "The animal didn't cross the street because it was too tired"


def opened(page: str, minilm):
    """A new session on `page` with the example, its trace and the starting link the page should open on."""
    at = new_app()
    at.switch_page(f"explorer/pages/{page}.py").run()
    assert not at.exception
    result = trace.run(minilm, EXAMPLE, 128)
    return at, result, starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)


def test_qkv_opens_on_a_content_word_of_the_starting_head(minilm):
    at, result, link = opened("qkv", minilm)
    query = at.selectbox(key="qkv_query").value
    assert query == link.query and starting.is_content(result.source_tokens[query])
    assert (at.selectbox(key="qkv_layer").value, at.selectbox(key="qkv_head").value) == (link.layer, link.head)


def test_compare_sentences_starts_one_word_apart_on_the_head_that_changed_most(minilm):
    at = new_app()
    at.switch_page("explorer/pages/compare_sentences.py").run()
    assert not at.exception
    b_text = at.text_input(key="compare_b").value
    assert b_text != EXAMPLE and b_text == compare.variants(EXAMPLE)[0]
    a, b = trace.run(minilm, EXAMPLE, 128), trace.run(minilm, b_text, 128)
    alignment = compare.by_position(a.source_tokens, b.source_tokens)
    worst, _ = compare.changed_most(compare.difference(a.encoder_self.weights, b.encoder_self.weights, alignment))
    assert worst.max() > 0.05  # not all zeros
    layer, head = np.unravel_index(worst.argmax(), worst.shape)
    assert (at.selectbox(key="compare_layer").value, at.selectbox(key="compare_head").value) == (layer, head)


def test_find_heads_ranks_every_head_by_the_traces_weight(minilm):
    at = new_app()
    at.switch_page("explorer/pages/find_heads.py").run()
    assert not at.exception
    result = trace.run(minilm, EXAMPLE, 128)
    tokens, weights = result.source_tokens, result.encoder_self.weights
    it, animal = tokens.index("it"), tokens.index("animal")
    at.selectbox(key="find_query").set_value(it).run()
    at.selectbox(key="find_key").set_value(animal).run()
    table = at.dataframe[0].value
    assert len(table) == 72
    np.testing.assert_array_equal(table["weight"].to_numpy(), np.sort(weights[:, :, it, animal].ravel())[::-1])
    grid = spec(next(c for c in at.get("plotly_chart") if c.key == "find_grid"))
    np.testing.assert_array_equal(array(grid["data"][0]["z"]), weights[:, :, it, animal])
    assert grid["data"][1]["meta"] == CLICKS
    best = int(table["layer"][0]) - 1, int(table["head"][0]) - 1
    at.button(key="find_open").click().run()
    assert not at.exception
    assert (at.selectbox(key="attention_layer").value, at.selectbox(key="attention_head").value) == best
    heatmap = spec(next(c for c in at.get("plotly_chart") if c.key == "attention_heatmap"))
    np.testing.assert_array_equal(array(heatmap["data"][0]["z"]), weights[best])
    assert len(array(heatmap["data"][1]["x"])) == len(tokens) ** 2  # rows clickable at this length


def test_head_view_opens_on_the_starting_head_and_follows_a_new_sentence_until_one_is_picked(minilm):
    at, result, link = opened("head_view", minilm)
    assert (link.layer, link.head) != (0, 0)  # not layer 1 head 1 by default
    assert at.selectbox(key="head_layer").value == link.layer and at.multiselect(key="head_heads").value == [link.head]
    assert at.selectbox(key="head_focus").value == link.query  # its link's query token highlighted
    drawn = next(c for c in at.get("plotly_chart") if c.key == "head_lines")  # under the heads' colour key
    lines = [t for t in spec(drawn)["data"] if t.get("mode") == "lines"]
    assert lines and {t["name"] for t in lines} == {f"head {link.head + 1}"}

    other = "The trophy didn't fit into the suitcase because it was too big"
    at.sidebar.text_area[0].set_value(other).run()  # a new sentence: its own starting head
    result = trace.run(minilm, other, 128)
    moved = starting.best_link(result.encoder_self.weights, result.source_tokens, result.source_tokens)
    assert (moved.layer, moved.head) != (link.layer, link.head)
    assert at.selectbox(key="head_layer").value == moved.layer
    assert at.multiselect(key="head_heads").value == [moved.head]

    at.multiselect(key="head_heads").set_value([0, 1]).run()  # picked: a new sentence keeps it
    at.sidebar.text_area[0].set_value(EXAMPLE).run()
    assert at.multiselect(key="head_heads").value == [0, 1] and at.selectbox(key="head_layer").value == link.layer


def test_reference_opens_on_the_starting_head_with_both_models_weights(minilm):
    from attention_explorer.explorer.run import reference_view

    at = new_app()
    at.switch_page("explorer/pages/reference.py").run()
    assert not at.exception
    result = trace.run(minilm, EXAMPLE, 128)
    weights = result.encoder_self.weights
    link = starting.best_link(weights, result.source_tokens, result.source_tokens)
    assert (link.layer, link.head) != (0, 0)  # not the faint layer 1 head 1 it used to open on
    assert (at.selectbox(key="reference_layer").value, at.selectbox(key="reference_head").value) == (
        link.layer,
        link.head,
    )
    charts = {c.key: spec(c) for c in at.get("plotly_chart")}
    np.testing.assert_array_equal(array(charts["reference_ours"]["data"][0]["z"]), weights[link.layer, link.head])
    theirs = reference_view.attention(reference_view.load(), minilm, EXAMPLE, 128)
    np.testing.assert_array_equal(array(charts["reference_theirs"]["data"][0]["z"]), theirs[link.layer, link.head])
    np.testing.assert_array_equal(
        array(charts["reference_grid"]["data"][0]["z"]), reference_view.max_abs_difference(weights, theirs)
    )
