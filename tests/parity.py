"""Parity of the from-scratch engine with transformers' eager forward, shared by every decoder family's tests."""

from __future__ import annotations

from pathlib import Path

import torch

from attention_explorer.models.greedy import Sampling, continue_text
from attention_explorer.models.pretrained import load_folder
from attention_explorer.models.reference import load_reference, run_reference
from attention_explorer.models.transformer import Transformer


def assert_parity(ours: Transformer, reference, ids: torch.Tensor, atol: float = 1e-5, states: bool = True) -> None:
    """Every attention weight and (with `states`) hidden state within `atol`, and the same most likely next token at
    every position. transformers' hidden states are the embeddings, layers 1..L-1's outputs, then the final norm of
    the last (our final norm)."""
    with torch.inference_mode():
        out = ours(ids)
    ref = run_reference(reference, ids)
    layers = out.decoder.layers
    assert len(ref.attentions) == len(layers) and len(ref.hidden_states) == len(layers) + 1
    for layer, theirs in zip(layers, ref.attentions, strict=True):
        assert layer.self_attn.weights.shape == theirs.shape
        # the project's parity bar with transformers (issue #40, never loosened): 1e-5, 1e-4 for SmolLM2's GGUF
        torch.testing.assert_close(layer.self_attn.weights, theirs, atol=atol, rtol=0)
    if not states:
        assert torch.equal(out.logits.argmax(-1), ref.logits.argmax(-1))
        return
    ours_states = [out.decoder.embeddings, *(layer.after_ffn for layer in layers[:-1]), out.decoder.output]
    for mine, theirs in zip(ours_states, ref.hidden_states, strict=True):
        torch.testing.assert_close(mine, theirs, atol=atol, rtol=0)  # the parity bar, as the weights'
    # the logits' parity bar: 1e-4, the vocabulary's products being d_model sums of the final states
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-4, rtol=0)
    assert torch.equal(out.logits.argmax(-1), ref.logits.argmax(-1))
    # the weights are far enough from uniform that a wrong mask, scale or split could not pass the 1e-5 bound
    assert max(layer.self_attn.weights[..., 1:, :].max().item() for layer in layers) > 0.5


def differences(ours: Transformer, reference, ids: torch.Tensor) -> dict[str, float]:
    """The largest |ours - transformers'| over every layer's attention weights, every hidden state (as assert_parity
    pairs them) and the logits; asserts the same most likely next token at every position."""
    with torch.inference_mode():
        out = ours(ids)
    ref = run_reference(reference, ids)
    layers = out.decoder.layers
    assert len(ref.attentions) == len(layers) and len(ref.hidden_states) == len(layers) + 1
    ours_states = [out.decoder.embeddings, *(layer.after_ffn for layer in layers[:-1]), out.decoder.output]
    assert torch.equal(out.logits.argmax(-1), ref.logits.argmax(-1))

    def largest(pairs) -> float:
        pairs = list(pairs)
        assert all(mine.shape == theirs.shape for mine, theirs in pairs)  # no broadcasting hides a wrong shape
        return max((mine - theirs).abs().max().item() for mine, theirs in pairs)

    return {
        "attention": largest(
            (layer.self_attn.weights, theirs) for layer, theirs in zip(layers, ref.attentions, strict=True)
        ),
        "hidden": largest(zip(ours_states, ref.hidden_states, strict=True)),
        "logits": largest([(out.logits, ref.logits)]),
    }


def assert_greedy_is_generate(folder: Path, prompt: str, steps: int = 12, length: int = 32) -> None:
    """The cached decoder (models.greedy: one position a step) continues `prompt` (cut to `length` tokens) on the
    folder's model with the `steps` tokens transformers' greedy generate picks on its own load of the same folder."""
    model, tokenizer, _ = load_folder(folder)
    reference = load_reference(folder)
    ids = list(tokenizer.encode(prompt, length).ids)
    ours = continue_text(model, ids, steps, Sampling())
    theirs = reference.generate(
        torch.tensor([ids]), max_new_tokens=steps, do_sample=False, min_new_tokens=steps, pad_token_id=0
    )[0, len(ids) :].tolist()
    assert ours == theirs
