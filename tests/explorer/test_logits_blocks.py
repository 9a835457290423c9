"""A run reads its logits in row blocks (explorer/run/logits.py), never as one (T, V) matrix: what it keeps (each row's
top tokens and probabilities, the next token's logit and rank, the loss's sums, a row on demand) equals what the whole
matrix gives, within the bound of a product computed in other blocks (tests/tolerance.py), and the memory it takes no
longer grows with T * V (torch's own allocations counted, tests/allocations.py). On a tiny Gemma 3 with soft-capped
logits and a vocabulary padded to 131,072 tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.run import forward, output, trace
from attention_explorer.explorer.run import logits as final_linear
from attention_explorer.explorer.run.answers import Answer
from attention_explorer.models import registry
from bench.inputs import text_of
from tests import tolerance
from tests.allocations import PeakAllocations
from tests.folders import make_gemma3_folder

VOCAB = 131_072  # half of Gemma 3's: (512, V) float32 logits are 268 MB
LENGTH = 512


@pytest.fixture(scope="module")
def big_vocabulary(tmp_path_factory):
    folder = make_gemma3_folder(
        tmp_path_factory.mktemp("gemma3") / "gemma3", vocab_size=VOCAB, layers=2, positions=LENGTH, softcap=30.0
    )
    return registry.from_path(folder, "gemma3")


@pytest.fixture(scope="module")
def whole(big_vocabulary):
    """The text's ids, the run and the old way's numbers: the forward's own (T, V) logits and its last states."""
    loaded = big_vocabulary
    text = text_of(loaded, 200)
    run = trace.run(loaded, text, 200)
    ids = forward.token_ids(loaded, run, "decoder")
    with torch.inference_mode():
        out = loaded.model(torch.tensor([ids]))
    return ids, run, out.logits[0].double().numpy(), out.decoder.output[0].numpy()


def error(loaded, states: np.ndarray) -> np.ndarray:
    """(T, 1) each row's bound on |a logit - the same logit from another blocking| (the same states, the output
    product's d_model sum added in another order; soft-capping's tanh is 1-Lipschitz and adds the same roundings)."""
    weight = loaded.model.generator.weight.detach()
    return tolerance.product_bound(states, weight.T).max(-1, keepdims=True)


def test_a_runs_top_tokens_and_probabilities_are_the_whole_matrixs(big_vocabulary, whole):
    ids, run, logits, states = whole
    dz = error(big_vocabulary, states)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) + logits.max(-1, keepdims=True)
    p = np.exp(logits - lse)  # (T, V) float64: what the whole matrix's softmax gives
    k = run.top_probabilities.shape[1]
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    expected = np.take_along_axis(p, order, -1)
    tolerance.assert_within(run.top_probabilities, expected, tolerance.probabilities_bound(expected, dz), "top p")
    # the most probable token is the whole matrix's wherever rounding cannot swap the first two
    first, second = np.take_along_axis(logits, order[:, :2], -1).T
    clear = first - second > 2 * dz[:, 0]
    vocabulary = big_vocabulary.target_vocabulary
    found = np.array([vocabulary.token_to_id(row[0]) for row in run.top_tokens])
    assert clear.sum() > len(ids) // 2 and (found[clear] == order[clear, 0]).all()
    assert run.output_tokens == tuple(row[0] for row in run.top_tokens) and len(run.top_tokens) == len(ids)


def test_a_texts_loss_sums_next_logit_and_rank_are_the_whole_matrixs(big_vocabulary, whole):
    ids, run, logits, states = whole
    dz = error(big_vocabulary, states)[:, 0]
    kept = run.text_logits
    shift = logits.max(-1)
    lse = np.log(np.exp(logits - shift[:, None]).sum(-1)) + shift
    # log sum exp and a mean move by at most the largest logit's error, plus their own float32 sums' rounding
    tolerance.assert_within(kept.normaliser, lse, dz + tolerance.reordered(VOCAB + 3, np.abs(lse)), "log sum exp")
    mean_terms = np.abs(logits).mean(-1)
    tolerance.assert_within(kept.mean, logits.mean(-1), dz + tolerance.reordered(VOCAB, mean_terms), "mean logit")
    rows = np.arange(len(ids) - 1)
    right = logits[rows, ids[1:]]
    tolerance.assert_within(kept.next, right, dz[:-1], "the next token's logit")
    # its rank: the logits above it, give or take those close enough for rounding to reorder
    above = (logits[:-1] > right[:, None]).sum(-1) + 1
    close = (np.abs(logits[:-1] - right[:, None]) <= 2 * dz[:-1, None]).sum(-1) - 1
    assert (np.abs(kept.rank - above) <= close).all() and (kept.rank >= 1).all()
    # p = exp(logit - log sum exp): the difference's error (both terms' bounds above) scales p
    p_right = np.exp(right - lse[:-1])
    moved = 2 * dz[:-1] + tolerance.reordered(VOCAB + 3, np.abs(lse[:-1]))
    tolerance.assert_within(kept.next_probabilities(), p_right, p_right * np.expm1(moved), "p(next token)")


def test_one_row_on_demand_and_the_experiments_blocks_are_the_whole_matrixs(big_vocabulary, whole):
    loaded = big_vocabulary
    ids, run, logits, states = whole
    dz = error(loaded, states)
    final = forward.states(run, "decoder")["after_ffn"][-1]
    for row in (0, 17, len(ids) - 1):
        tolerance.assert_within(output.row_logits(loaded, final, row), logits[row], dz[row], f"row {row} on demand")
    # the ablation experiment's log p(right token), block by block in float64, against the whole matrix's
    answer = Answer(tuple(ids), tuple(ids[:-1]), tuple(ids[1:]), (True,) * (len(ids) - 1))
    found = ablate._forward(loaded, answer, None, 1)[0]
    log_p = torch.from_numpy(logits[:-1]).log_softmax(-1).numpy()[np.arange(len(ids) - 1), ids[1:]]
    tolerance.assert_within(found, log_p, 2 * dz[:-1, 0] + tolerance.reordered(VOCAB + 3, 1.0), "log p(right)")


def _peak(fn) -> int:
    with torch.inference_mode(), PeakAllocations() as count:
        fn()
    return count.peak


def test_a_runs_memory_no_longer_grows_with_length_times_vocabulary(big_vocabulary, monkeypatch):
    loaded = big_vocabulary
    monkeypatch.setattr(final_linear, "BLOCK_BYTES", 2**20)  # blocks of LEAST_ROWS rows: 8 MB of logits each
    matrix = LENGTH * VOCAB * 4  # what the (T, V) logits alone take: 268 MB
    long_text, short_text = text_of(loaded, LENGTH), text_of(loaded, LENGTH // 2)
    ids = loaded.tokenizer.encode(long_text, LENGTH).ids
    # the count sees a (T, V) matrix where one is made: the model's forward with its logits
    assert _peak(lambda: loaded.model(torch.tensor([ids]))) >= matrix
    long_run = _peak(lambda: trace.run(loaded, long_text, LENGTH))
    short_run = _peak(lambda: trace.run(loaded, short_text, LENGTH // 2))
    assert long_run < matrix / 4, f"{long_run / 2**20:.0f} MB for a run whose logits are {matrix / 2**20:.0f} MB"
    # twice the text: its attention and states grow, its logits' blocks do not (half the matrix would be 134 MB)
    assert long_run - short_run < matrix / 2 / 4
