"""The logit lens read from a decoder-only trace's kept states (no forward over the whole text) is the model's own:
its window of rows of a long text (SmolLM2 at 300 tokens, where the trace keeps no layer) equals the reads of a full
forward at those rows; a short text's lens reads every row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.experiments import ablate, lens
from attention_explorer.explorer.run import trace
from tests import tolerance

SHORT = "the cat sat on the mat because it was tired"


def logit_error(loaded, state: torch.Tensor, n_keys: int) -> np.ndarray:
    """(n, 1) each row's bound on a read's logits when the window recomputed its state (probable, not worst case: a
    chain this long never rounds all one way). The state is off by one layer's chain of sums relative to each element
    (its kept input is the whole forward's); the final RMSNorm divides by the row's RMS, so the normed row (norm
    sqrt(D)) is off by sqrt(D) times that, and W_out row v carries it at most ||g * W_v|| (Cauchy-Schwarz). Plus the
    read's own product over d_model, in another shape than the whole text's."""
    config = loaded.model.config
    normed = loaded.model.decoder.final_norm(state)
    weight = loaded.model.generator.weight  # (V, D)
    gain = loaded.model.decoder.final_norm.weight
    relative = tolerance.probable(tolerance.layer_terms(config, n_keys), 1.0)
    carried = float((weight * gain).norm(dim=-1).max()) * np.sqrt(config.d_model) * relative
    # sum_k |n_k W_vk| <= ||n|| ||W_v|| (Cauchy-Schwarz): the read's terms without a (n, V) product per read
    terms = normed.norm(dim=-1, keepdim=True).numpy() * float(weight.norm(dim=-1).max())
    read = tolerance.probable(config.d_model, terms)
    return carried + read


@torch.inference_mode()
def test_the_lens_window_of_a_long_text_is_the_forwards_reads(smollm2, long_run):
    answer = ablate.answer(smollm2, long_run)
    rows = len(answer.decoder_input)
    for position in (rows - 1, rows // 2, 3):
        window = lens.window(smollm2, rows, position)
        assert position in window and lens.LEAST_ROWS <= len(window) < rows
        found = lens.lens(smollm2, answer, rows=window, run=long_run)
        assert found.rows == window and found.index(position) == position - window.start
        # the slow path: the forward over the whole text, every state read through the output layer
        out = lens.run_on(smollm2, answer)
        targets = torch.tensor(answer.targets[window.start : window.stop])[:, None]
        for r, (name, state) in enumerate(lens.reads(out)):
            assert found.reads[r] == name
            logits = lens.read_through(smollm2, state)[0, window.start : window.stop]
            p = logits.softmax(-1)
            top = p.topk(lens.TOP)
            dz = logit_error(smollm2, state[0, window.start : window.stop], window.stop)
            expected = top.values.numpy()
            tolerance.assert_within(found.top_probabilities[r], expected, tolerance.probabilities_bound(expected, dz))
            expected = p.gather(-1, targets)[:, 0].numpy()
            bound = tolerance.probabilities_bound(expected[:, None], dz)[:, 0]
            tolerance.assert_within(found.target_probability[r], expected, bound, f"{name}: the answer's probability")
            rank = (logits > logits.gather(-1, targets)).sum(-1) + 1
            assert np.abs(found.target_rank[r] - rank.numpy()).max() <= 1  # a tie within rounding at most
        # the last read is the model's own output (within the bound above): the same top token wherever the first
        # two are further apart than both their bounds (a closer pair may swap on another machine's kernels)
        predicted = found.predicted(len(found.reads) - 1)
        expected = top.values.numpy()
        apart = expected[:, 0] - expected[:, 1] > 2 * tolerance.probabilities_bound(expected, dz)[:, :2].max(-1)
        assert apart.sum() >= len(apart) // 2, "most rows have a clear top token"
        for row in np.flatnonzero(apart):
            assert predicted[row] == smollm2.target_vocabulary.id_to_token(int(top.indices[row, 0]))
    with pytest.raises(IndexError, match="outside the rows read"):
        found.index(rows - 1)


def test_the_lens_of_a_short_text_reads_every_row(gpt2):
    answer = ablate.answer(gpt2, trace.run(gpt2, SHORT))
    rows = len(answer.decoder_input)
    assert lens.window(gpt2, rows, 0) == range(rows)
