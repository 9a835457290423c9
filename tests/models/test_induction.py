"""Induction and previous-token scores on hand-made attention, and the shipped induction model's two heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.models import induction, tasks, train


def _pattern(keys: list[int | None]) -> np.ndarray:
    """(1, 1, T, T) attention where query i puts all its weight on keys[i] (None: on itself)."""
    weights = np.zeros((1, 1, len(keys), len(keys)))
    for i, k in enumerate(keys):
        weights[0, 0, i, i if k is None else k] = 1.0
    return weights


def test_repeated_sequence_draws_distinct_tokens_then_repeats_them():
    ids = induction.repeated_sequence(50257, 10, seed=3, start=[50256])
    assert ids[0] == 50256 and ids[1:11] == ids[11:] and len(set(ids[1:11])) == 10
    assert ids == induction.repeated_sequence(50257, 10, seed=3, start=[50256])
    assert ids != induction.repeated_sequence(50257, 10, seed=4, start=[50256])
    assert set(induction.repeated_sequence([7, 8, 9], 3, seed=0)) == {7, 8, 9}
    with pytest.raises(ValueError, match="distinct"):
        induction.repeated_sequence([7, 8, 9], 4)


def test_induction_targets_are_the_tokens_after_earlier_copies():
    ids = [1, 5, 6, 7, 5, 6, 7]  # <bos> A B C A B C
    targets = induction.induction_targets(ids)
    assert [np.flatnonzero(row).tolist() for row in targets] == [[], [], [], [], [2], [3], [4]]
    # a token seen twice before: both tokens that followed it, never a key after the query
    targets = induction.induction_targets([5, 6, 5, 7, 5])
    assert np.flatnonzero(targets[4]).tolist() == [1, 3] and not np.triu(targets, k=1).any()


def test_a_perfect_induction_head_scores_one_and_a_previous_token_head_scores_one_on_its_own_measure():
    ids = [1, 5, 6, 7, 5, 6, 7]
    induction_head = _pattern([None, 0, 0, 0, 2, 3, 4])
    previous_head = _pattern([None, 0, 1, 2, 3, 4, 5])
    assert induction.induction_scores(induction_head, ids) == pytest.approx(np.ones((1, 1)))
    assert induction.induction_scores(previous_head, ids) == pytest.approx(np.zeros((1, 1)))
    assert induction.previous_token_scores(previous_head) == pytest.approx(np.ones((1, 1)))
    assert induction.previous_token_scores(induction_head) == pytest.approx(np.full((1, 1), 1 / 6))  # query 1: 0


def test_scores_are_per_layer_and_head_and_take_tensors():
    ids = torch.tensor([1, 5, 6, 7, 5, 6, 7])
    uniform = np.tril(np.ones((7, 7))) / np.arange(1, 8)[:, None]  # each query spreads evenly over what it sees
    weights = np.stack([np.stack([uniform, _pattern([None, 0, 0, 0, 2, 3, 4])[0, 0]])] * 3)  # (3, 2, T, T)
    scores = induction.induction_scores(torch.tensor(weights), ids)
    assert scores.shape == (3, 2)
    assert scores[:, 0] == pytest.approx(np.full(3, np.mean([1 / 5, 1 / 6, 1 / 7])))  # queries 4..6 see 5..7 keys
    assert scores[:, 1] == pytest.approx(1)
    assert induction.previous_token_scores(weights)[:, 0] == pytest.approx(np.mean(1 / np.arange(2, 8)))


def test_a_text_without_repeats_has_no_induction_score():
    assert np.isnan(induction.induction_scores(_pattern([None, 0, 1]), [1, 5, 6])).all()
    with pytest.raises(ValueError, match="positions"):
        induction.induction_scores(np.zeros((1, 1, 3, 3)), [1, 5, 6, 5])


# --- the shipped checkpoint ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    model, task, record = train.load("induction")
    heldout = tasks.pairs(task, 8, seed=4242)  # a draw neither training nor the recorded evaluation used
    return model, task, record, heldout


def test_shipped_model_records_its_heldout_accuracy(shipped):
    model, _, record, _ = shipped
    assert record["heldout_repeat_accuracy"] >= 0.95 and record["heldout"]["pairs"] == 1000
    assert model.config.shape == "decoder-only" and model.config.n_decoder_layers == 2


def test_shipped_model_predicts_the_repeat_from_its_second_word_on(shipped):
    model, task, _, heldout = shipped
    right = total = 0
    for pair in heldout:
        ids = task.source.encode(" ".join(pair.source), model.config.max_len).ids
        with torch.inference_mode():
            predicted = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()  # predicted[p]: after token p
        n = tasks.repeat_start(pair.source)
        # token p is word p - 1; reading the repeat's word k (p = n + 1 + k) it should write word k + 1
        for k in range(n - 1):
            right += predicted[n + 1 + k] == ids[k + 2]
            total += 1
    assert right / total >= 0.95


def test_shipped_model_has_a_previous_token_head_then_an_induction_head(shipped):
    model, task, _, heldout = shipped
    texts = [task.source.encode(" ".join(p.source), model.config.max_len).ids for p in heldout]
    induction_scores, previous_scores = induction.model_scores(model, texts)
    assert induction_scores.shape == previous_scores.shape == (2, model.config.n_heads)
    assert induction_scores[1].max() > 0.5  # layer 2 copies the word after the earlier occurrence
    assert previous_scores[0].max() > 0.5  # layer 1 tells each position the word before it
    assert induction_scores[0].max() < 0.5  # one layer alone cannot: the composition is the point
