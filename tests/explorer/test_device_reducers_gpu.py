"""The device paths on a real GPU (marked `gpu`: skipped where torch sees none; tests/conftest.py): the first run's
reductions made on the GPU from the same weights equal the CPU's numpy pass within the bounds of
tests/explorer/test_device_reducers.py, and one head of a recomputed layer read on the GPU is the CPU's within the
forward's rounding bound."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import trace
from attention_explorer.models import device, registry
from tests import tolerance
from tests.explorer.test_device_reducers import assert_statistics_close, reduce_layers
from tests.explorer.test_reducers import TOKENS, assert_rollout_overviews, softmax_layers

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("causal", [False, True])
def test_random_layers_reduced_on_the_gpu_equal_the_numpy_pass(causal):
    rng = np.random.default_rng(7)
    weights = softmax_layers(rng, 3, 3, 300, 300, causal)
    tokens = [TOKENS[i] for i in rng.integers(0, len(TOKENS), 300)]
    theirs = reduce_layers(weights, tokens, causal, as_tensor=False)
    ours = reduce_layers(weights, tokens, causal, as_tensor=True, device="cuda")  # the same weights, on the GPU
    np.testing.assert_array_equal(np.stack(ours["row_max"]), np.stack(theirs["row_max"]))
    assert_statistics_close(np.stack(ours["statistics"]), np.stack(theirs["statistics"]), 300, causal)
    assert_rollout_overviews(ours["rollout"], weights, cells=8)


def test_one_head_read_on_the_gpu_is_the_cpus_within_the_forwards_rounding(gpt2_folder):
    """A recomputed layer's head read on the GPU (device_layers.head: selected there, copied alone) against the CPU's
    whole layer: the scores q k^T reordered over the forward, then the softmax's rounding (tests/explorer/
    test_device_gpu.py's bound)."""
    from bench.inputs import text_of

    (spec,) = registry.folder_specs(f"gpt2-gpu={gpt2_folder}")
    cpu = registry.build(spec)
    gpu = device.place(registry.build(spec), "cuda")
    tokens = min(cpu.max_tokens, 70)
    text = text_of(cpu, tokens)
    theirs = trace.run(cpu, text, tokens, keep_all=False).attention("decoder_self").layer(1)
    attention = trace.run(gpu, text, tokens, keep_all=False).attention("decoder_self")
    head, n_keys = attention.weights[1, 0], theirs.weights.shape[-1]
    assert not attention.ready(1)  # the layer was not copied back whole
    logit_error = tolerance.scores_bound(theirs.q[:1], theirs.k[:1], tolerance.forward_terms(cpu.model.config, n_keys))
    bound = tolerance.probabilities_bound(theirs.weights[:1], logit_error)[0]
    tolerance.assert_within(head, theirs.weights[0], bound, "one head read on the GPU")
