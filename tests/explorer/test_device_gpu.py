"""The same runs on a GPU as on the CPU (marked `gpu`: skipped where torch sees none; tests/conftest.py). Float32 on
both with TF32 off, so the GPU's numbers differ from the CPU's only by the order its kernels add in: within the
bounds of tests/tolerance.py for the attention, and the project's parity bar with transformers on the same GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_explorer as ae
from attention_explorer.explorer.run import device_books
from attention_explorer.models import device
from attention_explorer.models.pretrained import load_folder
from attention_explorer.models.reference import load_reference
from tests import tolerance
from tests.parity import assert_parity

pytestmark = pytest.mark.gpu

TEXT = "The animal didn't cross the street because it was too tired"


def test_a_run_on_the_gpu_equals_the_cpus_within_the_rounding_bound():
    cpu, gpu = ae.run("minilm", TEXT, device="cpu"), ae.run("minilm", TEXT, device="cuda")
    assert gpu.loaded.device.type == "cuda" and not torch.backends.cuda.matmul.allow_tf32
    assert gpu.tokens == cpu.tokens
    config = cpu.loaded.model.config
    n = len(cpu.tokens)
    for layer in range(cpu.n_layers):
        ours, theirs = gpu.trace.encoder_self.layer(layer), cpu.trace.encoder_self.layer(layer)
        # the scores q k^T reordered over the whole forward up to this layer, then the softmax's own rounding
        logit_error = tolerance.scores_bound(theirs.q, theirs.k, tolerance.forward_terms(config, n))
        bound = tolerance.probabilities_bound(theirs.weights, logit_error)
        tolerance.assert_within(ours.weights, theirs.weights, bound, f"layer {layer} on the GPU")


def test_the_engine_matches_transformers_on_the_same_gpu(gpt2_folder):
    model, tokenizer, _ = load_folder(gpt2_folder)
    reference = load_reference(gpt2_folder).to("cuda")
    model = model.to("cuda")
    device.exact(torch.device("cuda"))
    ids = torch.tensor([tokenizer.encode(TEXT, 32).ids], device="cuda")
    assert_parity(model, reference, ids)


def test_the_gate_books_the_gpus_real_memory():
    where = device.resolve("cuda")
    free, total = torch.cuda.mem_get_info(where)
    assert 0 < device_books.default_budget(where) <= free <= total
    books = device_books.DeviceBooks(where, device_books.default_budget(where))
    # more than the GPU has: refused before anything is allocated
    with pytest.raises(device_books.DeviceRefused), books.admitted(total + 1):
        pass


def test_out_of_memory_on_the_gpu_is_refused_and_the_gpu_serves_on():
    where = device.resolve("cuda")
    books = device_books.DeviceBooks(where, budget=torch.cuda.mem_get_info(where)[1])
    with pytest.raises(device_books.DeviceRefused) as refused, books.admitted(1):
        torch.empty(torch.cuda.mem_get_info(where)[1] * 2, dtype=torch.uint8, device=where)  # twice the whole GPU
    assert refused.value.out_of_memory
    np.testing.assert_array_equal(ae.run("minilm", "A cat.", device="cuda").attention(0, 0).sum(-1) > 0.99, True)
