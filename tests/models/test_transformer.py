"""The full model: shapes of every returned internal, masks, post-/pre-LN wiring, decoding, no stored state."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from attention_explorer.models.config import PAPER_BASE, TOY, TransformerConfig
from attention_explorer.models.transformer import Transformer
from tests import tolerance


def toy_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(replace(TOY, dropout=0.0, **overrides)).eval()


@pytest.fixture
def batch():
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0]])  # second row padded (pad_id 0)
    tgt = torch.tensor([[1, 20, 21, 22], [1, 23, 0, 0]])
    return src, tgt


def test_every_internal_has_its_shape(batch):
    src, tgt = batch
    out = toy_model()(src, tgt)
    c = TOY
    assert out.encoder.embeddings.shape == (2, 5, c.d_model)
    assert len(out.encoder.layers) == c.n_encoder_layers and len(out.decoder.layers) == c.n_decoder_layers
    for layer in out.encoder.layers:
        a = layer.self_attn
        assert a.q.shape == a.k.shape == a.v.shape == a.heads.shape == (2, c.n_heads, 5, c.d_head)
        assert a.raw_scores.shape == a.scaled_scores.shape == a.weights.shape == (2, c.n_heads, 5, 5)
        assert a.output.shape == layer.after_attn.shape == layer.after_ffn.shape == (2, 5, c.d_model)
        assert a.mask.shape == (2, 1, 1, 5)
    for layer in out.decoder.layers:
        assert layer.self_attn.weights.shape == (2, c.n_heads, 4, 4)
        assert layer.self_attn.mask.shape == (2, 1, 4, 4)
        assert layer.cross_attn.weights.shape == (2, c.n_heads, 4, 5)
        assert layer.cross_attn.q.shape == (2, c.n_heads, 4, c.d_head)
        assert layer.cross_attn.k.shape == (2, c.n_heads, 5, c.d_head)
        for state in (layer.after_self_attn, layer.after_cross_attn, layer.after_ffn):
            assert state.shape == (2, 4, c.d_model)
    assert out.logits.shape == (2, 4, c.vocab_size)
    # each softmax weight within its own rounding (reordered over n + 3 terms, of the weight), summed over n:
    # within reordered(2n + 3) of 1 (tests/tolerance.py)
    bound = tolerance.reordered(2 * out.probabilities.shape[-1] + 3, 1.0)
    tolerance.assert_within(out.probabilities.sum(-1), torch.ones(2, 4), bound, "probabilities sum to 1")


def test_decoder_masks_future_and_padding(batch):
    src, tgt = batch
    out = toy_model()(src, tgt)
    future = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    for layer in out.decoder.layers:
        assert (layer.self_attn.weights[..., future] == 0).all()
        assert (layer.self_attn.weights[1, :, :, 2:] == 0).all()  # padded target keys
        assert (layer.cross_attn.weights[1, :, :, 3:] == 0).all()  # padded source keys
        # each weight within its softmax's rounding, summed over the 5 source keys (test_every_internal_has_its_shape)
        bound = tolerance.reordered(2 * 5 + 3, 1.0)
        tolerance.assert_within(layer.cross_attn.weights.sum(-1), torch.ones(2, TOY.n_heads, 4), bound, "cross rows")
    for layer in out.encoder.layers:
        assert (layer.self_attn.weights[1, :, :, 3:] == 0).all()


def test_padding_does_not_change_real_tokens(batch):
    src, tgt = batch
    model = toy_model()
    alone = model(src[1:, :3], tgt[1:, :2])
    padded = model(src, tgt)
    # a padded batch row against a forward of its own: other shapes of products, the same sums in other orders (a
    # padded key's weight is 0 exactly): the encoder's chain, of its last sum's terms through the last norm's
    # 1/sigma, and the whole forward's, of each logit's terms (probable)
    encoder = TOY.n_encoder_layers * tolerance.layer_terms(TOY, 5)
    bound = tolerance.output_bound(model.encoder, alone.encoder, encoder)[0]
    tolerance.assert_within(padded.encoder.output[1, :3], alone.encoder.output[0], bound, "encoder output")
    bound = tolerance.logits_bound(model, alone, 5)[0]  # each logit's terms, not its own size
    tolerance.assert_within(padded.logits[1, :2], alone.logits[0], bound, "logits")


def test_post_ln_sublayers_are_norm_of_residual_sum(batch):
    src, _ = batch
    model = toy_model()
    out = model(src)
    layer, module = out.encoder.layers[0], model.encoder.layers[0]
    x = out.encoder.embeddings
    expected = F.layer_norm(x + layer.self_attn.output, (TOY.d_model,), module.norm1.weight, module.norm1.bias, 1e-5)
    assert torch.equal(layer.after_attn, expected)  # nn.LayerNorm is this F.layer_norm: bit for bit
    ffn = module.ffn.linear2(torch.relu(module.ffn.linear1(layer.after_attn)))
    expected = F.layer_norm(layer.after_attn + ffn, (TOY.d_model,), module.norm2.weight, module.norm2.bias, 1e-5)
    assert torch.equal(layer.after_ffn, expected)


def test_pre_ln_keeps_residual_stream_and_ends_with_a_norm(batch):
    src, tgt = batch
    model = toy_model(norm_first=True)
    out = model(src, tgt)
    layer = out.encoder.layers[0]
    assert torch.equal(layer.after_attn, out.encoder.embeddings + layer.self_attn.output)  # the same sum
    last = out.encoder.layers[-1].after_ffn
    assert torch.equal(out.encoder.output, model.encoder.final_norm(last))  # the same norm of the same state


def test_paper_embeddings_are_scaled_by_sqrt_d_model():
    model = toy_model()
    ids = torch.tensor([[3, 4]])
    emb = model.encoder.embeddings
    expected = emb.token(ids) * math.sqrt(TOY.d_model) + emb.position(2)
    assert torch.equal(emb(ids), expected)  # the same float32 product and sum


def test_output_layer_shares_the_target_embedding():
    model = toy_model()
    assert model.generator.weight is model.decoder.embeddings.token.weight


def test_greedy_decode_picks_the_argmax_at_every_step():
    model = toy_model()
    src = torch.tensor([[5, 6, 7, 8]])
    generated = model.greedy_decode(src, bos_id=1, eos_id=2, max_len=6)
    assert 1 <= len(generated) <= 6
    assert 2 not in generated[:-1]
    out = model(src, torch.tensor([[1, *generated[:-1]]]))
    assert out.logits[0].argmax(-1).tolist() == generated


def test_encoder_only_model_has_no_decoder():
    model = Transformer(replace(TOY, n_decoder_layers=0)).eval()
    out = model(torch.tensor([[4, 5, 6]]))
    assert out.decoder is None and out.logits is None
    with pytest.raises(ValueError, match="encoder-only"):
        model.decode(torch.tensor([[1]]), out.memory, None)


def test_too_long_input_is_a_clear_error():
    with pytest.raises(ValueError, match="exceed"):
        toy_model()(torch.ones(1, TOY.max_len + 1, dtype=torch.long))


def test_forward_stores_nothing_on_modules(batch):
    """One model object serves every browser session, so a forward must leave every module as it found it."""
    model = toy_model()
    before = {name: dict(vars(m)) for name, m in model.named_modules()}
    model(*batch)
    after = {name: dict(vars(m)) for name, m in model.named_modules()}
    assert before.keys() == after.keys()
    for name in before:
        assert before[name].keys() == after[name].keys(), name


def test_concurrent_forwards_agree_with_single_runs():
    model = toy_model()
    inputs = [torch.tensor([[i + 3, i + 4, i + 5]]) for i in range(6)]
    expected = [model(x).encoder for x in inputs]
    results: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        for _ in range(5):
            results[i] = model(inputs[i]).encoder.output

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the same forward, but six at once: a BLAS sharing its threads may block the products otherwise, so each row is
    # held to the encoder's chain of sums (probable) of its terms, through the last norm's 1/sigma; anything left
    # behind by another forward is far more
    encoder = TOY.n_encoder_layers * tolerance.layer_terms(TOY, 3)
    for i, e in enumerate(expected):
        bound = tolerance.output_bound(model.encoder, e, encoder)
        tolerance.assert_within(results[i], e.output, bound, f"forward {i}")


def test_paper_base_has_the_papers_shapes():
    assert (PAPER_BASE.d_model, PAPER_BASE.n_heads, PAPER_BASE.d_ff) == (512, 8, 2048)
    assert (PAPER_BASE.n_encoder_layers, PAPER_BASE.n_decoder_layers, PAPER_BASE.d_head) == (6, 6, 64)
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(vocab_size=10, d_model=10, n_heads=3)


def test_the_paper_shares_one_matrix_between_both_embeddings_and_the_pre_softmax_linear():
    model = Transformer(replace(PAPER_BASE, vocab_size=100, n_encoder_layers=1, n_decoder_layers=1))
    shared = model.decoder.embeddings.token.weight
    assert model.encoder.embeddings.token.weight is shared and model.generator.weight is shared
    assert sum(p is shared for p in model.parameters()) == 1  # one matrix, trained and counted once
    separate = Transformer(replace(TOY, tgt_vocab_size=80))  # two vocabularies: two embedding matrices
    assert separate.encoder.embeddings.token.weight is not separate.decoder.embeddings.token.weight
    with pytest.raises(ValueError, match="one vocabulary"):
        replace(TOY, tgt_vocab_size=80, share_embeddings=True)
