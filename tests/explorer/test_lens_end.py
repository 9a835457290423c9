"""The answer's own position: a decoder-only text's last row, the one that predicts what follows the whole text, is
read by the logit lens and split by the attribution (its target the model's own top token, since nothing in the text
follows it); the lens map draws it and says so, and fits each cell's token to its cell with the whole token on the
hover."""

from __future__ import annotations

import html

import numpy as np
import pytest

from attention_explorer.explorer.experiments import ablate, attribution, lens
from attention_explorer.explorer.figures.experiments import CELLS_PX, CHAR_PX, lens_map
from attention_explorer.explorer.figures.labels import abbreviated
from attention_explorer.explorer.lesson.model_words import TEXT_END, question_row, target_name
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from tests import tolerance

GPT2_TEXT = "the cat sat on the mat because it was tired"
REPEATED = "kilo seven zulu echo two mike kilo seven zulu echo two mike"


def test_the_last_row_is_read_with_the_models_own_top_token(gpt2):
    run = trace.run(gpt2, GPT2_TEXT)
    n = len(run.source_tokens)
    answer = ablate.answer(gpt2, run)
    assert len(answer.decoder_input) == n - 1  # what ablation and patching score: the rows with a right next token
    ended = ablate.with_text_end(gpt2, answer, run)
    assert ended.decoder_input == ended.source_ids and len(ended.targets) == n
    assert ended.targets[:-1] == answer.targets and ended.counted == (*answer.counted, False)
    own = gpt2.target_vocabulary.id_to_token(ended.targets[-1])
    assert own == run.top_tokens[-1][0]  # the run's own top next token after the whole text
    assert ended.own_row(n - 1) and not ended.own_row(n - 2) and not answer.own_row(n - 2)
    assert ablate.with_text_end(gpt2, ended, run) is ended
    # the step's question and the read-outs open there, and name what its target is
    assert question_row(ended, gpt2.eos_id) == n - 1 and question_row(answer, gpt2.eos_id) == n - 2
    assert target_name(ended, n - 1) == "the model's own top prediction"
    assert target_name(ended, n - 2) == "the right answer"
    found = lens.lens(gpt2, ended, run=run)
    assert len(found.positions) == n and found.rows == range(n)
    assert found.top_tokens[-1][-1][0] == own and found.target_rank[-1, -1] == 1
    assert found.target_probability[-1, -1] == found.top_probabilities[-1, -1, 0]
    # the rows before it read as they did without it
    before = lens.lens(gpt2, answer, run=run)
    np.testing.assert_array_equal(found.target_rank[:, :-1], before.target_rank)
    np.testing.assert_array_equal(found.top_probabilities[:, :-1], before.top_probabilities)
    # the attribution splits the last row's logit too, and its parts add up to the model's own logit
    states = run.decoder_states
    entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    split = attribution.attribute(gpt2, ended, n - 1, ended.targets[-1], entering)
    assert split.token == own and split.position == n - 1
    tolerance.assert_within(
        split.total, split.logit, tolerance.reordered(len(split.values), np.abs(split.values).sum())
    )


@pytest.fixture(scope="module")
def induction_model():
    return registry.load("induction")


def test_only_a_decoder_only_answer_gains_the_last_row(translate, induction_model):
    run = trace.run(translate, "the small red cat sees a big dog")
    answer = ablate.answer(translate, run)
    assert ablate.with_text_end(translate, answer, run) is answer
    # the encoder-decoder's question keeps off its last row, which always writes <eos>
    assert translate.target_vocabulary.id_to_token(answer.targets[question_row(answer, translate.eos_id)]) != "<eos>"
    # a toy task that knows the right word of some rows keeps its question on the last of them
    run = trace.run(induction_model, REPEATED)
    answer = ablate.answer(induction_model, run)
    ended = ablate.with_text_end(induction_model, answer, run)
    last_counted = max(i for i, c in enumerate(answer.counted) if c)
    assert not all(answer.counted) and question_row(ended, induction_model.eos_id) == last_counted


def test_the_lens_map_draws_and_names_the_last_position():
    positions = ["The", "ĠEiffel", "Ġof"]
    top = [["a", "b", "c"], ["x", "Ġcity", "ĠParis"]]
    p = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.7]])
    figure = lens_map(["embedding", "layer 1: after feed-forward"], positions, top, p, 5, 7, TEXT_END)
    heatmap = figure.data[0]
    assert list(heatmap.x) == ["5: The", "6: ĠEiffel", "7: Ġof (text ends)"]
    np.testing.assert_array_equal(heatmap.z, p)
    data = np.asarray(heatmap.customdata)
    assert data.shape == (2, 3, 2) and data[1, 2, 0] == "ĠParis"
    assert data[1, 2, 1] == "<br>" + html.escape(TEXT_END, quote=False) and data[1, 1, 1] == ""
    assert "%{customdata[1]}" in heatmap.hovertemplate
    # a window that does not reach the text's end marks nothing
    plain = lens_map(["embedding", "layer 1: after feed-forward"], positions, top, p, 0, 7, TEXT_END)
    assert not any("text ends" in x for x in plain.data[0].x)
    assert not np.asarray(plain.data[0].customdata)[..., 1].any()


def test_the_lens_cells_fit_their_tokens_and_hover_the_whole_token():
    n = 20
    chars = CELLS_PX // n // CHAR_PX
    long = "Ġraspberries<b>"
    top = [[long if i == 3 else "Ġa" for i in range(n)]]
    figure = lens_map(["embedding"], [f"t{i}" for i in range(n)], top, np.full((1, n), 0.5))
    cell = figure.data[0].text[0][3]
    assert cell == html.escape(long[: chars - 1], quote=False) + "\u2026" and len(long[: chars - 1]) + 1 == chars
    assert figure.data[0].text[0][0] == "Ġa"  # a token that fits is drawn whole
    assert np.asarray(figure.data[0].customdata)[0, 3, 0] == html.escape(long, quote=False)  # the hover: all of it
    assert abbreviated("&<>", 2) == "&\u2026"  # cut before escaping: no entity is split
