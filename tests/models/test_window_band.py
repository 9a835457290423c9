"""A sliding-window layer over a text several windows long, computed on its band only (banded_attention: query
blocks of w rows against the keys their windows reach) where a run keeps no raw scores: the same weights in the full
(H, T, T) layout as the dense masked path, zero outside the window, and the whole forward within the bounds a float32
forward's reordered sums allow of the dense path and of transformers' eager forward."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from attention_explorer.models import attention
from attention_explorer.models.attention import (
    banded_attention,
    dense_windows,
    raw_scores_dropped,
    scaled_dot_product_attention,
    window_mask,
)
from attention_explorer.models.pretrained import load_folder
from attention_explorer.models.reference import load_reference, run_reference
from tests import tolerance
from tests.folders import make_gemma3_folder, make_mistral_folder

WINDOW, LENGTH = 4, 30  # 7.5 windows


def _dense_and_band(q, k, v, mask, offset=0):
    dense = scaled_dot_product_attention(q, k, v, mask)
    with raw_scores_dropped():
        band = banded_attention(q, k, v, mask, WINDOW, offset)
    return dense, band


@pytest.mark.parametrize("offset", [0, 18])  # the whole text, or its last 12 rows as queries (a window of rows)
def test_band_is_the_dense_masked_attention(offset):
    generator = torch.Generator().manual_seed(offset)
    b, h, dh = 2, 3, 8
    q = torch.randn(b, h, LENGTH - offset, dh, generator=generator) * 3  # scores of a few units: a peaked softmax
    k, v = torch.randn(b, h, LENGTH, dh, generator=generator) * 3, torch.randn(b, h, LENGTH, dh, generator=generator)
    causal = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()[None, None, offset:]  # (1, 1, Tq, Tk)
    padded = causal.expand(b, 1, -1, -1).clone()
    padded[1, ..., :3] = False  # the second row's first three keys are padding
    for mask in (causal, padded):
        mask = mask & window_mask(offset, LENGTH - offset, LENGTH, WINDOW)
        (heads, _, weights), (band_heads, raw, band_weights) = _dense_and_band(q, k, v, mask, offset)
        assert raw is None and band_weights.shape == weights.shape
        # outside the window (and the mask) the band writes exact zeros, as the dense softmax's exp(finfo.min - max);
        # a row that sees no key at all (the padded row's first three) is uniform over every key in both
        hidden = (~mask & mask.any(-1, keepdim=True)).expand_as(weights)
        assert hidden.any() and (band_weights[hidden] == 0).all() and (weights[hidden] == 0).all()
        # the band's scores are its own product q_block k_block^T: each within product_bound of the whole one's
        scores = tolerance.product_bound(q, k.transpose(-2, -1)) * dh**-0.5  # (B, H, Tq, Tk)
        scaled = (q @ k.transpose(-2, -1)) * dh**-0.5  # (B, H, Tq, Tk)
        moved = np.where(mask.numpy(), scores, 0).max(-1, keepdims=True)  # each row's largest move
        # a weight exp(s - m) / S moves by its score's move and S's (at most the row's largest, relatively: 2 moved),
        # plus the softmax's own roundings: S's sum over the row (the dense path adds all Tk terms), each side's exp and
        # division (tolerance.probabilities_bound), and each side's shift s - m rounded to half an ulp of |s - m|,
        # which exp turns into that much relative error (a weight of 5e-10 sits 21 below its row's largest)
        shift = np.abs(scaled.numpy() - scaled.masked_fill(~mask, -np.inf).amax(-1, keepdim=True).numpy())
        shifted = np.where(mask.numpy(), shift, 0) * np.abs(weights.numpy()) * tolerance.EPS32
        bound = tolerance.probabilities_bound(weights, moved) + shifted
        # every term a worst case (Higham's deterministic sums, first order; exp within its 1 ulp), nothing estimated
        tolerance.assert_within(band_weights, weights, bound, "band weights", worst_case=True)
        # heads: weights @ v reordered, plus the weights' own difference carried through |v|
        carried = bound @ np.abs(v.numpy().astype(np.float64))
        tolerance.assert_within(band_heads, heads, tolerance.product_bound(weights, v) + carried, "band heads")
    # keeping the raw scores, the band's scores are slices of the one q k^T the views read
    _, raw, _ = banded_attention(q, k, v, mask, WINDOW, offset)
    assert torch.equal(raw, q @ k.transpose(-2, -1))


FOLDERS = {
    "gemma3": lambda path: make_gemma3_folder(path, layers=3, window=WINDOW),  # local, local, global
    "mistral": lambda path: make_mistral_folder(path, window=WINDOW),  # every layer local
}


@pytest.mark.parametrize("family", sorted(FOLDERS))
def test_banded_forward_matches_dense_and_transformers(tmp_path, family, monkeypatch):
    folder = FOLDERS[family](tmp_path / family)
    model, _, _ = load_folder(folder)
    reference = load_reference(folder)
    ids = torch.randint(model.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(7))
    taken = []
    monkeypatch.setattr(attention, "banded_attention", lambda *a, **kw: taken.append(1) or banded_attention(*a, **kw))
    with torch.inference_mode():
        dense = model(ids)
        assert not taken  # raw scores kept: the dense path, transformers' bit for bit (test_convert_*)
        with raw_scores_dropped():
            band = model(ids)
    local = [layer.self_attn.window is not None for layer in model.decoder.layers]
    assert len(taken) == sum(local) > 0
    ref = run_reference(reference, ids)
    # one bound for every comparison, as tests/today.py derives it: the chain of sums behind a logit, reordered
    chain = tolerance.forward_terms(model.config, LENGTH)
    bound = float(tolerance.probable(chain, float(band.logits.abs().max())))
    states = [band.decoder.embeddings, *(layer.after_ffn for layer in band.decoder.layers[:-1]), band.decoder.output]
    dense_states = [dense.decoder.embeddings, *(x.after_ffn for x in dense.decoder.layers[:-1]), dense.decoder.output]
    pairs = zip(band.decoder.layers, dense.decoder.layers, ref.attentions, strict=True)
    for i, (mine, dense_layer, theirs) in enumerate(pairs):
        weights = mine.self_attn.weights
        assert weights.shape == theirs.shape  # the full (B, H, T, T) layout
        if local[i]:
            queries, keys = torch.arange(LENGTH)[:, None], torch.arange(LENGTH)[None, :]
            assert (weights[..., keys <= queries - WINDOW] == 0).all()
        tolerance.assert_within(weights, dense_layer.self_attn.weights, bound, f"layer {i} weights vs dense")
        tolerance.assert_within(weights, theirs, bound, f"layer {i} weights vs transformers")
    for mine, dense_state, theirs in zip(states, dense_states, ref.hidden_states, strict=True):
        tolerance.assert_within(mine, dense_state, bound, "hidden state vs dense")
        tolerance.assert_within(mine, theirs, bound, "hidden state vs transformers")
    tolerance.assert_within(band.logits, ref.logits, bound, "logits vs transformers")
    assert torch.equal(band.logits.argmax(-1), ref.logits.argmax(-1))  # the greedy token at every position


@pytest.mark.parametrize("family", sorted(FOLDERS))
def test_band_and_dense_are_each_eq_1_with_the_window_within_float32_of_float64(tmp_path, family):
    """Not only near transformers: the band's float32 weights and states are within the float32 rounding bound of the
    same model run in float64 (eq. (1) with the window, nearly exact), as the dense path's are."""
    folder = FOLDERS[family](tmp_path / family)
    model, _, _ = load_folder(folder)
    ids = torch.randint(model.config.vocab_size, (2, LENGTH), generator=torch.Generator().manual_seed(11))
    with torch.inference_mode():
        dense = model(ids)
        with raw_scores_dropped():
            band = model(ids)
        exact = copy.deepcopy(model).double()(ids)  # float64: its roundings 2^29 times smaller
    chain = tolerance.forward_terms(model.config, LENGTH)  # the chain of float32 sums behind a state: every layer's
    # each state: a float32 forward's roundings relative to the magnitudes the stream has summed up to it
    reads = tolerance.stream_reads(exact.decoder)
    terms = [t for _, t in reads]
    found = {"band": band, "dense": dense}
    local = [layer.self_attn.window is not None for layer in model.decoder.layers]
    for name, run in found.items():
        ours = tolerance.stream_reads(run.decoder)
        for i, ((mine, _), (truth, _), total) in enumerate(zip(ours, reads, terms, strict=True)):
            bound = tolerance.probable(chain, tolerance.row_scale(total))  # per row: its largest term
            tolerance.assert_within(mine, truth, bound, f"{name} state {i} vs float64")
        for i, (mine, truth) in enumerate(zip(run.decoder.layers, exact.decoder.layers, strict=True)):
            attention = truth.self_attn
            factor = attention.q.size(-1) ** -0.5 if attention.scaling is None else attention.scaling
            # a score's error: q k^T's own Dh terms, and the chain of sums already in q and k, relative to |q| |k|
            terms_qk = np.abs(attention.q.numpy()) @ np.abs(attention.k.numpy()).swapaxes(-1, -2) * factor
            moved = tolerance.probable(chain + attention.q.size(-1), terms_qk).max(-1, keepdims=True)
            bound = tolerance.probabilities_bound(attention.weights, moved)
            tolerance.assert_within(mine.self_attn.weights, attention.weights, bound, f"{name} layer {i} weights")
    assert sum(local) > 0 and not torch.equal(band.logits, dense.logits)  # the band really ran, and differs


def test_dense_windows_gives_transformers_numbers_bit_for_bit(tmp_path):
    """Within dense_windows a run that keeps no raw scores takes the dense masked path: its weights and logits are
    those of the run that keeps them (transformers' bit for bit, test_convert_*), not the band's."""
    model, _, _ = load_folder(FOLDERS["gemma3"](tmp_path / "gemma3"))
    ids = torch.randint(model.config.vocab_size, (1, LENGTH), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        kept = model(ids)
        with raw_scores_dropped(), dense_windows():
            forced = model(ids)
    for mine, theirs in zip(forced.decoder.layers, kept.decoder.layers, strict=True):
        assert mine.self_attn.raw_scores is None and torch.equal(mine.self_attn.weights, theirs.self_attn.weights)
    assert torch.equal(forced.logits, kept.logits)
    assert attention.banded(WINDOW, LENGTH, LENGTH) is False  # left again: raw scores kept, the dense path
    with raw_scores_dropped():
        assert attention.banded(WINDOW, LENGTH, LENGTH) and not attention.banded(WINDOW, WINDOW, LENGTH)
        # up to two windows the band would score 3/4 of the pairs and cost more than it saves: dense
        assert not attention.banded(WINDOW, 2 * WINDOW, 2 * WINDOW) and attention.banded(WINDOW, 9, 9)
        with dense_windows():
            assert not attention.banded(WINDOW, LENGTH, LENGTH)


def test_band_without_a_mask_is_the_window_alone():
    """banded_attention given no mask reads the window alone (no causal mask): each row its last w keys and every
    later one, as scaled_dot_product_attention with window_mask."""
    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 12, 8, generator=generator) for _ in range(3))
    mask = window_mask(0, 12, 12, WINDOW)
    _, _, dense = scaled_dot_product_attention(q, k, v, mask)
    with raw_scores_dropped():
        _, _, band = banded_attention(q, k, v, None, WINDOW)
    assert ((band == 0) == (dense == 0)).all() and (band[..., ~mask[0, 0]] == 0).all()
    # each block's q k^T is its own product: its scores within product_bound of the whole one's; the softmax's own
    # roundings on each side (tolerance.probabilities_bound)
    moved = (tolerance.product_bound(q, k.transpose(-2, -1)) * 8**-0.5).max(-1, keepdims=True)
    bound = tolerance.probabilities_bound(dense, moved)
    tolerance.assert_within(band, dense, bound, "band without a mask")
