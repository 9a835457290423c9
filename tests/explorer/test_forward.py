"""The forward pass step by step: every step, recomputed from the step before and the weights, equals the model's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from explorer.run import forward, trace
from models import registry, tasks, train
from models.transformer import Transformer

TOLERANCE = 1e-5


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
            np.testing.assert_allclose(e.result, e.traced, atol=TOLERANCE, rtol=0)
            worst = max(worst, float(np.abs(e.result - found["embeddings"][position]).max()))
            for index in range(found["after_ffn"].shape[0]):
                layer = forward.layer(loaded, result, stack, index, position)
                for step in layer.sublayers:
                    np.testing.assert_allclose(step.result, step.traced, atol=TOLERANCE, rtol=0)
                    np.testing.assert_allclose(step.output, step.traced_output, atol=TOLERANCE, rtol=0)
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
    np.testing.assert_allclose(e.summed, e.row + e.token_type + e.position, atol=1e-6)
    norm = e.norm
    np.testing.assert_allclose(norm.mean, e.summed.mean(), atol=1e-6)
    np.testing.assert_allclose(norm.variance, e.summed.var(), rtol=1e-5)
    ffn = forward.layer(minilm, result, "encoder", 0, 2).sublayers[1].ffn
    assert ffn.activation == "gelu" and 0 < ffn.off_share < 1
    np.testing.assert_allclose(ffn.off_share, (ffn.hidden <= 0).mean())


def test_translate_every_step_equals_the_model_both_stacks(translate):
    result = trace.run(translate, "the small red cat sees a big dog", 32)
    assert check_every_step(translate, result) < TOLERANCE
    e = forward.embedding(translate, result, "decoder", 1)
    assert e.scale == pytest.approx(np.sqrt(96)) and e.token_type is None and e.norm is None
    np.testing.assert_allclose(e.scaled, e.row * np.float32(np.sqrt(96)), rtol=1e-6)
    from models.positional import sinusoidal_table

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
    moved = forward.movement(result, "encoder")
    states = result.encoder_states
    n_layers, n_tokens = states["after_ffn"].shape[:2]
    assert moved.norms.shape == moved.cosine.shape == moved.change.shape == (n_layers, 2, n_tokens)
    np.testing.assert_allclose(moved.norms[1, 0, 4], np.linalg.norm(states["after_attn"][1, 4]), rtol=1e-6)
    np.testing.assert_allclose(
        moved.change[0, 1, 2], np.linalg.norm(states["after_ffn"][0, 2] - states["after_attn"][0, 2]), rtol=1e-5
    )
    a, b = states["after_ffn"][1, 3], states["after_ffn"][0, 3]
    np.testing.assert_allclose(moved.cosine[1, 1, 3], a @ b / np.linalg.norm(a) / np.linalg.norm(b), rtol=1e-5)
    assert np.all(moved.cosine <= 1 + 1e-9)


def test_sublayer_vectors_hold_each_add_and_norm(translate):
    result = trace.run(translate, "the cat sees a dog", 32)
    vectors = forward.sublayer_vectors(translate, result)
    assert set(vectors) == {"encoder", "decoder"} and len(vectors["decoder"]) == 2
    first = vectors["encoder"][0]
    np.testing.assert_array_equal(first["add_norm_2"], result.encoder_states["after_ffn"][0])
    step = forward.layer(translate, result, "encoder", 0, 1).sublayers[1]
    np.testing.assert_allclose(first["ffn"][1], step.output, atol=TOLERANCE)
    assert set(vectors["decoder"][1]) == {
        "self_attention",
        "add_norm_1",
        "cross_attention",
        "add_norm_2",
        "ffn",
        "add_norm_3",
    }


def test_agreement_says_equal_only_within_the_tolerance():
    from explorer.run.forward import TOLERANCE, agreement

    row = np.linspace(-1, 1, 8, dtype=np.float32)
    assert agreement(row, row + TOLERANCE / 2).startswith("equals the model's own state")
    differs = agreement(row, row + 0.01)
    assert differs.startswith("DIFFERS") and "1.0e-02" in differs
