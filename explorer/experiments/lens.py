"""The logit lens (no streamlit): every layer's and sub-layer's state read through the final norm (where the model
has one) and the output matrix, as if the model stopped there. The last read is the model's own output, computed by
the same operations on the same tensor, so it equals the model's logits exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from explorer.experiments.ablate import Answer
from explorer.run import forward
from explorer.run.layers import drop_attention
from models.registry import LoadedModel
from models.transformer import Ablation, Keep, TransformerOutput

TOP = 5  # tokens kept per read and position


@dataclass(frozen=True)
class Lens:
    """Per read (the embedding, then each layer's sub-layers in order) and decoder position: the most likely next
    tokens and their probabilities, and the right answer's probability and rank (1 = most likely)."""

    reads: tuple[str, ...]  # "embedding", "layer 1: after masked self-attention", ...
    layer_ends: tuple[int, ...]  # the reads that are a layer's output, bottom first
    positions: tuple[str, ...]  # the decoder's input tokens, one row each
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]  # [read][position][k]
    top_probabilities: np.ndarray  # (R, T, k)
    targets: tuple[str, ...]  # what each position should write
    target_probability: np.ndarray  # (R, T)
    target_rank: np.ndarray  # (R, T) int
    logits: np.ndarray  # (T, V) the last read's: the model's own output
    final_norm: bool  # whether each read went through the final LayerNorm first (pre-LN)

    def predicted(self, read: int) -> tuple[str, ...]:
        """The most likely next token at every position after one read."""
        return tuple(row[0] for row in self.top_tokens[read])

    def by_layer(self) -> list[list[str]]:
        """[layer][position]: the most likely next token after each layer (its last row: the model's prediction)."""
        return [list(self.predicted(i)) for i in self.layer_ends]


READ_NAMES = {
    "after_self_attn": "after masked self-attention",
    "after_cross_attn": "after cross-attention",
    "after_ffn": "after feed-forward",
}


def reads(out: TransformerOutput) -> list[tuple[str, Tensor]]:
    """The decoder's states in the order they were computed: the embedding, then each layer's sub-layers."""
    assert out.decoder is not None
    found = [("embedding", out.decoder.embeddings)]
    for i, layer in enumerate(out.decoder.layers):
        for name in READ_NAMES:
            state = getattr(layer, name, None)
            if state is not None:
                found.append((f"layer {i + 1}: {READ_NAMES[name]}", state))
    return found


@torch.inference_mode()
def read_through(loaded: LoadedModel, state: Tensor) -> Tensor:
    """(B, T, V) what the output layer makes of a state: the final LayerNorm (pre-LN models) then W_out, by the
    operations the model's own forward uses."""
    model = loaded.model
    assert model.decoder is not None and model.generator is not None
    if model.decoder.final_norm is not None:
        state = model.decoder.final_norm(state)
    return model.generator(state)


@torch.inference_mode()
def lens(loaded: LoadedModel, answer: Answer, ablation: Ablation | None = None) -> Lens:
    """Run the decoder on the answer's input (teacher-forced) and read every state through the output layer."""
    if answer.decoder_input is None or answer.targets is None:
        raise ValueError(f"{loaded.title} has no output matrix: {loaded.family.shape_name}, it writes no tokens")
    model = loaded.model
    out = run_on(loaded, answer, ablation, drop_attention)
    found = reads(out)
    vocabulary = loaded.target_vocabulary
    targets = torch.tensor(answer.targets)
    tops, top_p, right_p, right_rank = [], [], [], []
    last = None
    for _, state in found:
        logits = read_through(loaded, state)[0]  # (T, V)
        p = logits.double().softmax(-1)
        top = p.topk(min(TOP, p.size(-1)), dim=-1)
        tops.append(tuple(tuple(vocabulary.id_to_token(i) for i in row) for row in top.indices.tolist()))
        top_p.append(top.values.numpy())
        chosen = p.gather(-1, targets[:, None])  # (T, 1)
        right_p.append(chosen[:, 0].numpy())
        right_rank.append((p > chosen).sum(-1).numpy() + 1)
        last = logits
    assert last is not None and out.logits is not None
    names = [name for name, _ in found]
    layer_ends = tuple(i for i, name in enumerate(names) if name.endswith(READ_NAMES["after_ffn"]))
    return Lens(
        tuple(names),
        layer_ends,
        tuple(vocabulary.id_to_token(i) for i in answer.decoder_input),
        tuple(tops),
        np.stack(top_p),
        tuple(vocabulary.id_to_token(i) for i in answer.targets),
        np.stack(right_p),
        np.stack(right_rank),
        last.numpy(),
        model.decoder.final_norm is not None,
    )


@torch.inference_mode()
def run_on(
    loaded: LoadedModel, answer: Answer, ablation: Ablation | None = None, keep: Keep = None
) -> TransformerOutput:
    """The model's full forward on the answer's input: the decoder teacher-forced on its rows; `keep`: what is kept
    of each layer (the lens reads states only: explorer.run.layers.drop_attention)."""
    model = loaded.model
    decoder_input = torch.tensor([answer.decoder_input])
    if model.encoder is None:
        return model(decoder_input, ablation=ablation, keep=keep)
    return model(torch.tensor([answer.source_ids]), decoder_input, ablation=ablation, keep=keep)


def for_trace(loaded: LoadedModel, run, ablation: Ablation | None = None) -> Lens:
    """The lens on the trace's own decoder input (an encoder-decoder's greedy output, a decoder-only model's text),
    with the heads the trace ran without (`ablation`) off too: what the export writes, so its last layer's tokens are
    the trace's next tokens."""
    decoder_ids = forward.token_ids(loaded, run, "decoder")
    source = decoder_ids if loaded.is_decoder_only else forward.token_ids(loaded, run, "encoder")
    # the targets: the tokens each row actually wrote (greedy) or, decoder-only, the text's next tokens
    logits_rows = len(decoder_ids)
    assert run.top_tokens is not None
    vocabulary = loaded.target_vocabulary
    targets = [vocabulary.token_to_id(row[0]) for row in run.top_tokens[:logits_rows]]
    return lens(loaded, Answer(tuple(source), tuple(decoder_ids), tuple(targets), (True,) * logits_rows), ablation)
