"""Greedy decoding with a key/value cache picks exactly the tokens of the step-by-step loop (Transformer.generate)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from attention_explorer.models import greedy
from attention_explorer.models.config import TOY
from attention_explorer.models.transformer import Transformer


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


def test_a_grown_cache_is_torch_cat_written_into_room_it_keeps():
    """Each step's keys are the rows so far and the newest, as torch.cat gives them; after the first step the new
    row is written into the buffer's room (no copy of the rows so far), and the first step's tensor is never
    written into (a cache from elsewhere may be shared)."""
    from attention_explorer.models.greedy import ROOM, _grown

    first = torch.randn(1, 3, 5, 4)
    kept, before = first, first.clone()
    rows, buffer, buffers = [first], None, set()
    for _ in range(ROOM + 3):  # past the first buffer's room: copied once into a bigger one
        new = torch.randn(1, 3, 1, 4)
        rows.append(new)
        kept, buffer = _grown(kept, buffer, new)
        buffers.add(buffer.data_ptr())
        assert torch.equal(kept, torch.cat(rows, dim=2)) and kept.data_ptr() == buffer.data_ptr()
    assert len(buffers) == 2 and torch.equal(first, before)
