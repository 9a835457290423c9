"""The forward pass step by step: every step, recomputed from the step before and the weights, equals the model's."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import forward, movement, trace
from attention_explorer.models import registry, tasks, train
from attention_explorer.models.transformer import Transformer
from tests import tolerance

TOLERANCE = 1e-5  # the project's bar for the same numbers: every re-derived step lands far inside it


def embedding_bound(e: forward.Embedding) -> np.ndarray:
    """(D,) how far the embedding step's row, recomputed as a vector, may land from the model's batched one: the sum of
    up to 3 rows, relative to its terms' magnitudes; then, where a LayerNorm follows, that error through it (first
    order: dx_hat_i = (dx_i - mean dx) / sigma - x_hat_i (x_hat . dx) / (D sigma), so at most |g_i| / sigma (|dx_i| +
    (1 + |x_hat_i|) max|dx|)) plus the norm's own two d_model sums, relative to |g x_hat| + |b| (tests/tolerance.py)."""
    parts = np.abs(e.scaled) + sum(np.abs(p) for p in (e.position, e.token_type) if p is not None)
    error = tolerance.reordered(3, parts)
    if e.norm is None:
        return error
    n = e.norm
    sigma = np.sqrt(n.variance + n.eps)
    carried = np.abs(n.gamma) / sigma * (error + (1 + np.abs(n.normalized)) * error.max())
    own = np.abs(n.gamma * n.normalized) + (np.abs(n.beta) if n.beta is not None else 0)
    return carried + tolerance.reordered(2 * len(parts), own)


def ffn_bound(loaded, stack: str, index: int, ffn: forward.FeedForwardWalkthrough) -> np.ndarray:
    """(D,) how far a feed-forward's output, recomputed as a vector from the same input x, may land from another
    computation of it: W_2's d_ff sum, relative to |activated| @ |W_2|^T, plus the first product's d_model sum
    (relative to |x| @ |W_1|^T) carried through the activation (its slope at most 1.13, GELU's largest; ReLU's 1) and
    W_2. Not gated (translate's)."""
    module = getattr(loaded.model, stack).layers[index].ffn
    assert module.gate is None
    w1, w2 = (np.abs(m.weight.detach().numpy()).astype(np.float64) for m in (module.linear1, module.linear2))
    first = 1.13 * tolerance.reordered(len(ffn.x), w1 @ np.abs(ffn.x))  # (F,)
    return tolerance.reordered(len(first), w2 @ np.abs(ffn.activated)) + w2 @ first


@pytest.fixture(scope="module")
def translate():
    return registry.load("translate")


@pytest.fixture(scope="module")
def pre_ln():
    """A small pre-LN encoder-decoder with random weights (LayerNorm gains and biases drawn too)."""
    task = tasks.get("reverse")
    config = replace(train.RECIPES["reverse"].config(task), norm_first=True, dropout=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = Transformer(config)
        for name, p in model.named_parameters():
            if "norm" in name:
                torch.nn.init.normal_(p, 0.5 if name.endswith("weight") else 0.0, 0.3)
    model.eval().requires_grad_(False)
    return registry.from_task("pre-ln", "pre-LN", "test", model, task)


def check_every_step(loaded, result):
    worst = 0.0
    for stack in forward.trace_stacks(result):
        found = forward.states(result, stack)
        for position in range(len(forward.tokens(result, stack))):
            e = forward.embedding(loaded, result, stack, position)
            tolerance.assert_within(e.result, e.traced, embedding_bound(e), "embedding")
            worst = max(worst, float(np.abs(e.result - found["embeddings"][position]).max()))
            # a sub-layer starts from the traced state before it: one layer's chain at most (keys, W^O, the norm, FFN)
            # the page's own bound (forward.rounding_bound), the one its "equals the model's own state" reads
            bound = partial(forward.rounding_bound, loaded.model.config, len(found["after_ffn"][0]))
            for index in range(found["after_ffn"].shape[0]):
                layer = forward.layer(loaded, result, stack, index, position)
                for step in layer.sublayers:
                    what = f"{stack} {index} {step.name}"
                    tolerance.assert_within(step.result, step.traced, bound(step.traced), what)
                    tolerance.assert_within(step.output, step.traced_output, bound(step.traced_output), what)
                    worst = max(worst, float(np.abs(step.result - step.traced).max()))
    return worst


def test_minilm_every_step_equals_the_model(minilm):
    result = trace.run(minilm, "The animal didn't cross the street", 16)
    assert check_every_step(minilm, result) < TOLERANCE
    e = forward.embedding(minilm, result, "encoder", 2)
    # BERT family: no sqrt(d_model) scale, a token-type row, and a LayerNorm over the sum
    assert e.scale == 1.0 and e.token_type is not None and e.norm is not None and e.position_kind == "learned"
    assert e.token_id == minilm.tokenizer.token_to_id(result.source_tokens[2])
    np.testing.assert_array_equal(e.row, minilm.model.encoder.embeddings.token.weight[e.token_id].numpy())
    parts = np.abs(e.row) + np.abs(e.token_type) + np.abs(e.position)
    tolerance.assert_within(e.summed, e.row + e.token_type + e.position, tolerance.reordered(3, parts), "summed")
    norm = e.norm  # torch's mean and variance against numpy's: d_model terms each, in their own orders
    d = len(e.summed)
    tolerance.assert_within(norm.mean, e.summed.mean(), tolerance.reordered(d, np.abs(e.summed).mean()), "mean")
    tolerance.assert_within(norm.variance, e.summed.var(), tolerance.reordered(2 * d, e.summed.var()), "variance")
    ffn = forward.layer(minilm, result, "encoder", 0, 2).sublayers[1].ffn
    assert ffn.activation == "gelu" and 0 < ffn.off_share < 1
    # a count of d_ff units (exact in float32) divided once: the float32 nearest count / d_ff, which Python's float64
    # division rounded to float32 is too (a double's 53 bits round a single's division correctly: Figueroa 1995)
    count = int((ffn.hidden <= 0).sum())
    tolerance.assert_within(ffn.off_share, np.float32(count / ffn.hidden.size), 0.0, "the share of units off")


def test_translate_every_step_equals_the_model_both_stacks(translate):
    result = trace.run(translate, "the small red cat sees a big dog", 32)
    assert check_every_step(translate, result) < TOLERANCE
    e = forward.embedding(translate, result, "decoder", 1)
    assert e.scale == pytest.approx(np.sqrt(96)) and e.token_type is None and e.norm is None
    np.testing.assert_allclose(e.scaled, e.row * np.float32(np.sqrt(96)), rtol=1e-6)
    from attention_explorer.models.positional import sinusoidal_table

    np.testing.assert_array_equal(e.position, sinusoidal_table(32, 96)[1].numpy())
    layer = forward.layer(translate, result, "decoder", 1, 3)
    assert [s.name for s in layer.sublayers] == ["masked self-attention", "cross-attention", "feed-forward"]
    assert all(s.pre_norm is None and s.post_norm is not None for s in layer.sublayers)  # post-LN, as the paper
    ffn = layer.sublayers[2].ffn
    assert ffn.activation == "relu" and ffn.off_share == pytest.approx((ffn.activated == 0).mean())


def test_pre_ln_every_step_equals_the_model(pre_ln):
    result = trace.run(pre_ln, "one two three four", 32)
    assert check_every_step(pre_ln, result) < TOLERANCE
    step = forward.layer(pre_ln, result, "encoder", 1, 2).sublayers[0]
    assert step.pre_norm is not None and step.post_norm is None
    np.testing.assert_array_equal(step.result, step.x + step.output)
    assert forward.final_norm(pre_ln, result, "encoder", 0) is not None


def test_movement_norms_and_cosines_follow_the_states(translate):
    result = trace.run(translate, "the small red cat sees a big dog", 32)
    moved = movement.movement(result, "encoder")
    states = result.encoder_states
    n_layers, n_tokens = states["after_ffn"].shape[:2]
    assert moved.norms.shape == moved.cosine.shape == moved.change.shape == (n_layers, 2, n_tokens)
    # a norm is a sum of D squares (relative D eps, halved by the root); a cosine three such sums
    d = states["after_attn"].shape[-1]
    norm = np.linalg.norm(states["after_attn"][1, 4])
    tolerance.assert_within(moved.norms[1, 0, 4], norm, tolerance.reordered(d, norm), "norm")
    change = np.linalg.norm(states["after_ffn"][0, 2] - states["after_attn"][0, 2])
    tolerance.assert_within(moved.change[0, 1, 2], change, tolerance.reordered(d + 1, change), "change")
    a, b = states["after_ffn"][1, 3], states["after_ffn"][0, 3]
    cosine = a @ b / np.linalg.norm(a) / np.linalg.norm(b)
    tolerance.assert_within(moved.cosine[1, 1, 3], cosine, tolerance.reordered(3 * d, 1.0), "cosine")
    assert np.all(moved.cosine <= 1 + 1e-9)


def test_sublayer_vectors_hold_each_add_and_norm(translate):
    result = trace.run(translate, "the cat sees a dog", 32)
    vectors = forward.sublayer_vectors(translate, result)
    assert set(vectors) == {"encoder", "decoder"} and len(vectors["decoder"]) == 2
    first = vectors["encoder"][0]
    np.testing.assert_array_equal(first["add_norm_2"], result.encoder_states["after_ffn"][0])
    step = forward.layer(translate, result, "encoder", 0, 1).sublayers[1]
    bound = ffn_bound(translate, "encoder", 0, step.ffn)
    tolerance.assert_within(first["ffn"][1], step.output, bound, "the export's feed-forward")
    assert set(vectors["decoder"][1]) == {
        "self_attention",
        "add_norm_1",
        "cross_attention",
        "add_norm_2",
        "ffn",
        "add_norm_3",
    }


def test_agreement_says_equal_only_within_float32_rounding(translate):
    from attention_explorer.explorer.run.forward import agreement, rounding_bound

    row = np.linspace(-1, 1, 8, dtype=np.float32)
    config = translate.model.config
    bound = rounding_bound(config, 8, row)
    assert bound == (8 + 3 * config.d_model + config.d_ff) * np.finfo(np.float32).eps  # the row's largest is 1
    assert rounding_bound(config, 8, 10 * row) == pytest.approx(10 * bound)  # relative to the row's size
    assert agreement(row, row + bound / 2, bound).startswith("equals the model's own state")
    differs = agreement(row, row + 0.01, bound)
    assert differs.startswith("DIFFERS") and "1.0e-02" in differs
