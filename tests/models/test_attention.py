"""Scaled dot-product and multi-head attention: invariants, and agreement with PyTorch's fused kernel."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_explorer.models.attention import MultiHeadAttention, raw_scores_dropped, scaled_dot_product_attention
from attention_explorer.models.transformer import causal_mask
from tests import tolerance


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    shape = (2, 3, 5, 4)  # (B, H, T, Dh)
    return tuple(torch.randn(shape, generator=g) for _ in range(3))


def test_rows_sum_to_one(qkv):
    _, _, weights = scaled_dot_product_attention(*qkv)
    # each softmax weight within its own rounding (reordered over n + 3 terms, of the weight), summed over n keys:
    # within reordered(2n + 3) of 1 (tests/tolerance.py)
    tolerance.assert_within(weights.sum(-1), torch.ones(2, 3, 5), tolerance.reordered(2 * 5 + 3, 1.0), "rows")


def test_causal_mask_zeroes_everything_above_the_diagonal(qkv):
    _, _, weights = scaled_dot_product_attention(*qkv, mask=causal_mask(5))
    upper = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    assert (weights[..., upper] == 0).all()
    assert (weights[..., ~upper] > 0).all()
    assert weights[..., 0, 0].eq(1).all()  # the first token can only see itself


def test_masked_keys_get_exactly_zero(qkv):
    mask = torch.tensor([[True, True, True, False, False], [True, False, True, True, True]])[:, None, None, :]
    _, _, weights = scaled_dot_product_attention(*qkv, mask=mask)
    assert (weights[0, ..., 3:] == 0).all()
    assert (weights[1, ..., 1] == 0).all()
    # a masked key's weight is 0 exactly: the rows' sums as in test_rows_sum_to_one
    tolerance.assert_within(weights.sum(-1), torch.ones(2, 3, 5), tolerance.reordered(2 * 5 + 3, 1.0), "rows")


def test_fully_masked_row_stays_finite(qkv):
    mask = torch.zeros(1, 1, 5, 5, dtype=torch.bool)
    out, _, weights = scaled_dot_product_attention(*qkv, mask=mask)
    assert torch.isfinite(weights).all() and torch.isfinite(out).all()


@pytest.mark.parametrize("masked", [False, True])
def test_matches_torch_fused_attention(qkv, masked):
    mask = causal_mask(5) if masked else None
    ours, _, weights = scaled_dot_product_attention(*qkv, mask=mask)
    theirs = F.scaled_dot_product_attention(*qkv, attn_mask=mask)
    # the fused kernel's own order of sums: the scores' d_head terms through the softmax (probabilities_bound),
    # carried through |v|, then the weighted sum's own T_k terms
    q, k, v = qkv
    dz = tolerance.scores_bound(q, k, 0)
    bound = tolerance.probabilities_bound(weights, dz) @ v.abs().numpy() + tolerance.product_bound(weights, v)
    tolerance.assert_within(ours, theirs, bound, "ours against the fused kernel")


def test_raw_scores_are_q_dot_k(qkv):
    q, k, _ = qkv
    _, raw, _ = scaled_dot_product_attention(*qkv)
    # a batched product against one dot product: the same d_head terms, perhaps in another order
    bound = tolerance.reordered(q.shape[-1], (q[1, 2, 3].abs() * k[1, 2, 4].abs()).sum())
    tolerance.assert_within(raw[1, 2, 3, 4], torch.dot(q[1, 2, 3], k[1, 2, 4]), bound, "q . k")


def test_multi_head_returns_every_internal_consistently():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=3).eval()
    x = torch.randn(2, 5, 12)
    memory = torch.randn(2, 7, 12)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    out, a = mha(x, memory, mask)
    assert a.q.shape == (2, 3, 5, 4) and a.k.shape == a.v.shape == (2, 3, 7, 4)
    assert a.raw_scores.shape == a.weights.shape == (2, 3, 5, 7)
    assert a.heads.shape == (2, 3, 5, 4) and a.output.shape == out.shape == (2, 5, 12)
    # q is x W_Q split into heads: head 1 owns columns 4..8
    # the same products of the same numbers as the forward's: bit for bit
    assert torch.equal(a.q[:, 1], mha.w_q(x)[..., 4:8])
    assert torch.equal(a.scaled_scores, a.raw_scores / math.sqrt(4))  # times 4^-1/2 = 1/2: exact either way
    assert torch.equal(a.heads, a.weights @ a.v)
    concat = a.heads.transpose(1, 2).reshape(2, 5, 12)
    assert torch.equal(out, mha.w_o(concat))
    assert (a.weights[1, ..., 5:] == 0).all()


def test_d_model_must_split_into_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(d_model=10, n_heads=3)


@pytest.mark.parametrize("masked", [False, True])
def test_dropping_the_raw_scores_leaves_the_weights_and_output_bit_for_bit(qkv, masked):
    """A run that keeps no layer's attention scales q k^T in place and holds no raw scores (raw_scores_dropped)."""
    q, k, v = qkv
    mask = causal_mask(q.size(-2)) if masked else None
    out, raw, weights = scaled_dot_product_attention(q, k, v, mask)
    with raw_scores_dropped():
        dropped_out, dropped_raw, dropped_weights = scaled_dot_product_attention(q, k, v, mask)
    assert raw is not None and dropped_raw is None
    assert torch.equal(dropped_weights, weights) and torch.equal(dropped_out, out)
    assert scaled_dot_product_attention(q, k, v, mask)[1] is not None  # kept again once the block is left
