"""A sliding-window layer over a text several windows long, computed on its band only (banded_attention: query
blocks of w rows against the keys their windows reach) where a run keeps no raw scores: the same weights in the full
(H, T, T) layout as the dense masked path, zero outside the window, and the whole forward within the bounds a float32
forward's reordered sums allow of the dense path and of transformers' eager forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.models import attention
from attention_explorer.models.attention import (
    banded_attention,
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
        moved = np.where(mask.numpy(), scores, 0).max(-1, keepdims=True)  # each row's largest move
        # a weight exp(s - m) / S moves by its score's move and S's (at most the row's largest, relatively: 2 moved),
        # S's WINDOW non-zero terms added in another order, and each side's exp (1 ulp) and division (1 ulp) roundings
        p = np.abs(weights.numpy().astype(np.float64))
        bound = p * (2 * moved + (WINDOW + 4) * tolerance.EPS32)
        tolerance.assert_within(band_weights, weights, bound, "band weights")
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
