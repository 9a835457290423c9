"""Greedy decoding with a key/value cache picks exactly the tokens of the step-by-step loop (Transformer.generate)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from models import greedy
from models.config import TOY
from models.transformer import Transformer


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_cached_greedy_equals_the_loop_on_a_batch_with_padding(norm_first):
    torch.manual_seed(0)
    model = Transformer(replace(TOY, dropout=0.0, norm_first=norm_first)).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 0, 0, 0]])  # the second row is padded
    loop = model.generate(src, bos_id=1, eos_id=2, max_len=TOY.max_len)
    cached = greedy.generate(model, src, bos_id=1, eos_id=2, max_len=TOY.max_len)
    assert cached.shape[1] > 3  # more than a token or two: the cache is read at many steps
    torch.testing.assert_close(cached, loop, rtol=0, atol=0)


def test_cached_greedy_stops_at_eos_and_each_token_is_the_teacher_forced_argmax():
    torch.manual_seed(1)
    model = Transformer(replace(TOY, dropout=0.0)).eval()
    src = torch.tensor([[5, 6, 7, 8]])
    eos = model.greedy_decode(src, bos_id=1, eos_id=3, max_len=8)[2]  # a token the loop writes third
    generated = greedy.greedy_decode(model, src, bos_id=1, eos_id=eos, max_len=8)
    assert generated == model.greedy_decode(src, bos_id=1, eos_id=eos, max_len=8)
    assert generated[-1] == eos and eos not in generated[:-1]
    with torch.inference_mode():
        out = model(src, torch.tensor([[1, *generated[:-1]]]))
    assert out.logits[0].argmax(-1).tolist() == generated


def test_an_encoder_only_model_cannot_decode():
    model = Transformer(replace(TOY, n_decoder_layers=0)).eval()
    with pytest.raises(ValueError, match="encoder-only"):
        greedy.generate(model, torch.tensor([[4, 5]]), 1, 2, 4)
