"""The logit lens read from a decoder-only trace's kept states (no forward over the whole text) is the model's own:
its window of rows of a long text (SmolLM2 at 300 tokens, where the trace keeps no layer) equals the reads of a full
forward at those rows; a short text's lens reads every row."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.experiments import ablate, lens
from explorer.run import trace

SHORT = "the cat sat on the mat because it was tired"


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
            np.testing.assert_allclose(found.top_probabilities[r], top.values.numpy(), atol=1e-6, rtol=0)
            np.testing.assert_allclose(found.target_probability[r], p.gather(-1, targets)[:, 0], atol=1e-6, rtol=0)
            rank = (logits > logits.gather(-1, targets)).sum(-1) + 1
            assert np.abs(found.target_rank[r] - rank.numpy()).max() <= 1  # a tie within rounding at most
        # the last read is the model's own output, bit for bit
        np.testing.assert_array_equal(found.top_probabilities[-1], top.values.numpy())
        assert found.predicted(len(found.reads) - 1) == tuple(
            smollm2.target_vocabulary.id_to_token(int(i)) for i in top.indices[:, 0]
        )
    with pytest.raises(IndexError, match="outside the rows read"):
        found.index(rows - 1)


def test_the_lens_of_a_short_text_reads_every_row(gpt2):
    answer = ablate.answer(gpt2, trace.run(gpt2, SHORT))
    rows = len(answer.decoder_input)
    assert lens.window(gpt2, rows, 0) == range(rows)
