"""Output and loss: the final linear + softmax, seeded sampling, and the label-smoothed loss train.py minimises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import forward, output, trace
from attention_explorer.models import registry, tasks, train
from tests import tolerance

TEXT = "the small red cat sees a big dog"


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


@pytest.fixture(scope="module")
def translated(translate):
    return trace.run(translate, TEXT, 32)


def test_logits_give_the_traced_top_probabilities(translate, translated):
    probabilities = output.softmax(output.trace_logits(translate, translated))
    top = np.sort(probabilities, axis=-1)[:, ::-1][:, : translated.top_probabilities.shape[1]]
    # numpy's softmax of the trace's logits against torch's: the same logits, each softmax's own rounding
    bound = 2 * tolerance.probabilities_bound(probabilities, 0.0).max(-1, keepdims=True)
    tolerance.assert_within(top, translated.top_probabilities, bound, "top probabilities")
    argmax = [translate.target_vocabulary.id_to_token(int(i)) for i in probabilities.argmax(-1)]
    assert tuple(argmax) == translated.output_tokens


def test_temperature_sharpens_and_flattens():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    base, cold, hot = output.softmax(logits), output.softmax(logits, 0.5), output.softmax(logits, 2.0)
    assert cold[0] > base[0] > hot[0]
    np.testing.assert_allclose([cold.sum(), hot.sum()], 1)


def test_top_k_and_top_p_keep_the_most_probable():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    np.testing.assert_allclose(output.keep(p, "top-k", top_k=2), [0.625, 0.375, 0, 0])
    np.testing.assert_allclose(output.keep(p, "top-p", top_p=0.8), [0.625, 0.375, 0, 0])
    np.testing.assert_allclose(output.keep(p, "top-p", top_p=0.81), [0.5, 0.3, 0.15, 0] / np.float64(0.95))
    np.testing.assert_allclose(output.keep(p, "greedy"), [1, 0, 0, 0])


def test_greedy_sampling_writes_the_traced_output(translate, translated):
    ids = forward.token_ids(translate, translated, "encoder")
    assert output.sample(translate, ids, "greedy").tokens == translated.output_tokens


def test_sampling_with_a_seed_is_repeatable_and_can_write_another_output(translate, translated):
    ids = forward.token_ids(translate, translated, "encoder")
    first = output.sample(translate, ids, "sample", temperature=3.0, seed=7)
    assert output.sample(translate, ids, "sample", temperature=3.0, seed=7) == first
    outputs = {output.sample(translate, ids, "sample", temperature=3.0, seed=s).tokens for s in range(6)}
    assert len(outputs) > 1 and any(o != translated.output_tokens for o in outputs)
    top1 = output.sample(translate, ids, "top-k", temperature=3.0, top_k=1, seed=3)
    assert top1.tokens == translated.output_tokens and set(top1.kept_counts) == {1}


def test_loss_equals_train_py_and_the_right_target_beats_a_wrong_one(translate, translated):
    ids = forward.token_ids(translate, translated, "encoder")
    right = output.right_answer(translate, translated)
    assert right == ("le", "chat", "rouge", "petit", "voit", "un", "chien", "grand")
    scored = output.score(translate, ids, output.ids_of(translate, right))
    assert scored.targets == (*right, "<eos>") and scored.decoder_input[0] == "<bos>"
    # models/train.py's own loss on the same batch of one
    trainer_loss = train.Trainer(tasks.get("translate"), train.RECIPES["translate"]).loss_fn
    src, tgt_in, tgt_out = train.collate(tasks.get("translate"), [tasks.translate(tuple(TEXT.split()))])
    with torch.inference_mode():
        expected = trainer_loss(translate.model(src, tgt_in).logits.flatten(0, 1), tgt_out.flatten()).item()
    # the same forward; the mean of the per-token losses against torch's fused loss: a sum over the vocabulary each
    # (log-sum-exp) and over the tokens
    n = len(scored.per_token) + translate.model.config.target_vocab_size
    tolerance.assert_within(scored.mean, expected, tolerance.reordered(n, abs(expected)), "mean loss")
    assert scored.epsilon == train.RECIPES["translate"].label_smoothing
    wrong = output.score(translate, ids, output.target_ids(translate, "le chien grand voit un chat rouge petit"))
    assert wrong.mean > scored.mean
    floor = output.loss_floor(scored.vocab_size)
    assert np.all(scored.per_token >= floor - 1e-9) and scored.mean > floor


def test_smoothed_target_and_its_floor():
    q = output.smoothed_target(2, 10, 0.1)
    assert q.sum() == pytest.approx(1) and q[2] == pytest.approx(0.91) and q[0] == pytest.approx(0.01)
    logits = np.log(q)[None]  # predicting q itself reaches the floor
    assert output.smoothed_cross_entropy(logits, [2], 0.1)[0] == pytest.approx(output.loss_floor(10, 0.1))
    assert output.loss_floor(10, 0.0) == pytest.approx(0.0, abs=1e-12)


def test_typed_target_for_a_wordpiece_model_ends_with_its_eos(paper_random):
    ids = output.target_ids(paper_random, "hello world")
    assert ids[-1] == paper_random.eos_id and paper_random.bos_id not in ids


def greedy_rows_bound(loaded, result, n_source: int, n_read: int) -> np.ndarray:
    """(n_read, 1) each greedy row's logit error bound (tolerance.state_logits_bound of the trace's last decoder state,
    a post-LN norm's output, over a whole forward's chain), its largest over the vocabulary."""
    config = loaded.model.config
    upstream = tolerance.forward_terms(config, n_source + n_read) - config.d_model
    last = forward.states(result, "decoder")["after_ffn"][-1][:n_read]  # (T, D)
    assert config.n_decoder_layers and not config.norm_first  # post-LN: no final norm between it and W
    return tolerance.state_logits_bound(loaded.model, last, upstream).max(-1, keepdims=True)


def test_greedy_read_from_the_trace_equals_greedy_sampling(translate, translated):
    ids = forward.token_ids(translate, translated, "encoder")
    sampled, read = output.sample(translate, ids, "greedy"), output.greedy_from_trace(translated)
    assert read.tokens == sampled.tokens
    # sampling's one-row products with a key/value cache against the trace's batched forward: a whole forward's chain
    # of each row's terms (tolerance.logits_bound, from the post-LN decoder's last state)
    dz = greedy_rows_bound(translate, translated, len(ids), len(read.tokens))
    bound = tolerance.probabilities_bound(np.asarray(sampled.probabilities)[:, None], dz)[:, 0]
    tolerance.assert_within(read.probabilities, sampled.probabilities, bound, "greedy probabilities")


def test_greedy_read_from_a_trace_that_never_stopped_has_one_probability_per_token(paper_random):
    # an untrained model writes until its budget without EOS: the trace holds one more position (the next pick)
    result = trace.run(paper_random, "a short sentence", 16)
    assert result.output_tokens[-1] != paper_random.target_vocabulary.id_to_token(paper_random.eos_id)
    ids = forward.token_ids(paper_random, result, "encoder")
    sampled, read = (
        output.sample(paper_random, ids, "greedy", max_new=len(result.output_tokens)),
        output.greedy_from_trace(result),
    )
    assert read.tokens == sampled.tokens
    assert len(read.probabilities) == len(read.kept_probabilities) == len(read.kept_counts) == len(read.tokens)
    dz = greedy_rows_bound(paper_random, result, len(ids), len(read.tokens))  # as above
    bound = tolerance.probabilities_bound(np.asarray(sampled.probabilities)[:, None], dz)[:, 0]
    tolerance.assert_within(read.probabilities, sampled.probabilities, bound, "greedy probabilities")
