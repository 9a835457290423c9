"""Decoding step by step: each step's rows are the trace's own, and the trace's top-k is the model's softmax."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from attention_explorer.explorer.figures.decoding import mark_row, top_k_bars
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.run import decoding, trace
from attention_explorer.explorer.run.heads import MEAN
from attention_explorer.models import registry
from tests import tolerance


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


@pytest.fixture(scope="module")
def translated(translate):
    return trace.run(translate, "the small red cat sees a big dog")


def test_trace_of_a_trained_model_writes_the_right_translation(translated):
    assert translated.source_tokens[-1] == "<eos>"
    assert translated.output_tokens == ("le", "chat", "rouge", "petit", "voit", "un", "chien", "grand", "<eos>")
    assert translated.target_tokens == ("<bos>", *translated.output_tokens[:-1])


def test_top_k_is_the_models_own_softmax(translate, translated):
    enc = translate.tokenizer.encode(translated.text, 32)
    tgt = [translate.target_vocabulary.token_to_id(t) for t in translated.target_tokens]
    with torch.inference_mode():
        probabilities = translate.model(torch.tensor([enc.ids]), torch.tensor([tgt])).probabilities[0].numpy()
    order = np.argsort(-probabilities, axis=-1)[:, : trace.TOP_K]
    # exp(logit - log sum exp), as trace._top takes them, against the softmax of the same logits: its own rounding
    expected = np.take_along_axis(probabilities, order, -1)
    bound = np.take_along_axis(tolerance.probabilities_bound(probabilities, 0.0), order, -1)
    tolerance.assert_within(translated.top_probabilities, expected, bound, "top probabilities")
    names = [[translate.target_vocabulary.id_to_token(int(i)) for i in row] for row in order]
    assert [list(row) for row in translated.top_tokens] == names
    # greedy decoding chose the most probable token at every step
    assert [row[0] for row in translated.top_tokens] == list(translated.output_tokens)


@pytest.mark.parametrize("head", [MEAN, 2])
def test_each_step_reads_its_own_row(translated, head):
    total = decoding.n_positions(translated)
    assert total == len(translated.output_tokens)
    for index in range(total):
        current = decoding.step(translated, index, layer=1, head=head)
        self_rows = translated.decoder_self.weights[1, :, index]
        cross_rows = translated.cross.weights[1, :, index]
        expected_self = self_rows.mean(0) if head == MEAN else self_rows[head]
        expected_cross = cross_rows.mean(0) if head == MEAN else cross_rows[head]
        np.testing.assert_array_equal(current.self_weights, expected_self)
        np.testing.assert_array_equal(current.cross_weights, expected_cross)
        assert current.visible.tolist() == [i <= index for i in range(len(translated.target_tokens))]
        assert (current.self_weights[~current.visible] == 0).all()
        assert current.chosen == translated.output_tokens[index]
        assert current.done_so_far == translated.output_tokens[:index]


def test_steps_outside_the_decode_and_encoder_only_models_are_refused(translated, minilm):
    with pytest.raises(IndexError):
        decoding.step(translated, decoding.n_positions(translated), 0)
    with pytest.raises(ValueError, match="encoder-only"):
        decoding.n_positions(trace.run(minilm, "hello"))


def test_top_k_figure_marks_the_greedy_pick_and_escapes_tokens():
    figure = top_k_bars(["<b>x</b>", "le"], np.array([0.7, 0.2], np.float32), "<b>x</b>", "t")
    bar = figure.data[0]
    assert list(figure.layout.yaxis.ticktext) == ["&lt;b&gt;x&lt;/b&gt;", "le"]
    assert bar.marker.color[0] != bar.marker.color[1]


def test_the_answer_is_checked_against_the_tasks_right_one(translate, translated):
    answer = decoding.check(translated, translate.task)
    assert answer.correct and answer.written == ("le", "chat", "rouge", "petit", "voit", "un", "chien", "grand")
    wrong = replace(translated, output_tokens=("le", "chien", "<eos>"))
    answer = decoding.check(wrong, translate.task)
    assert not answer.correct and answer.written == ("le", "chien") and answer.right[:2] == ("le", "chat")
    outside = trace.run(translate, "cat the sees")
    assert decoding.check(outside, translate.task).right is None


def test_an_encoder_only_trace_has_no_answer_to_check(translate, minilm):
    with pytest.raises(ValueError, match="encoder-only"):
        decoding.check(trace.run(minilm, "hello"), translate.task)


def test_mark_row_outlines_the_row_on_a_copy():
    figure = head_heatmap(np.full((3, 4), 0.25), ["a", "b", "c"], ["w", "x", "y", "z"])
    marked = mark_row(figure, 1, 4)
    assert figure.layout.shapes == () and marked is not figure
    (shape,) = marked.layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (-0.5, 3.5, 0.5, 1.5)
    np.testing.assert_array_equal(marked.data[0].z, figure.data[0].z)


@pytest.mark.parametrize("head", [MEAN, 1])
def test_a_long_texts_step_recomputes_only_the_layer_it_shows(translate, head, monkeypatch):
    """A run that kept no layer (a long text's) gives each step's row from that one layer, recomputed: the same row
    as a run that kept every layer, and no other layer is run again."""
    from attention_explorer.explorer.run import layers

    text = "the small red cat sees a big dog"
    kept, recomputed = trace.run(translate, text, keep_all=True), trace.run(translate, text, keep_all=False)
    layers.cache().clear()
    computed = []
    compute = layers.StackLayers._compute
    monkeypatch.setattr(layers.StackLayers, "_compute", lambda self, i: computed.append(i) or compute(self, i))
    for index in range(decoding.n_positions(kept)):
        found, expected = decoding.step(recomputed, index, 1, head), decoding.step(kept, index, 1, head)
        np.testing.assert_array_equal(found.self_weights, expected.self_weights)
        np.testing.assert_array_equal(found.cross_weights, expected.cross_weights)
    assert set(computed) == {1}  # the decoder's layer 1, once (then from the cache)
