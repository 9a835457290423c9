"""The logit lens (no streamlit): every layer's and sub-layer's state read through the final norm (where the model
has one) and the output matrix, as if the model stopped there. The last read is the model's own output, computed by
the same operations on the same tensor, so it equals the model's logits exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attention_explorer.explorer.run import forward
from attention_explorer.explorer.run.answers import Answer
from attention_explorer.explorer.run.layers import drop_attention
from attention_explorer.explorer.run.logits import ranks
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import Ablation, Keep, TransformerOutput

TOP = 5  # tokens kept per read and position
# the reads of every row are computed when they cost at most this many floating-point operations through the output
# matrix (about a second on two cores); past it, a window of rows around the one looked at: SmolLM2's 61 reads of a
# 2,048-token text through its 49,152-word matrix are 3.5 TFLOP, a minute, of which a page draws one screen
READ_FLOPS = 64e9
LEAST_ROWS = 16  # a window holds at least this many rows (and a map's worth of positions to look at)


@dataclass(frozen=True)
class Lens:
    """Per read (the embedding, then each layer's sub-layers in order) and decoder row of a window (every row of a
    short text): the most likely next tokens and their probabilities, and the right answer's probability and rank
    (1 = most likely). Arrays are indexed by read, then by row - start (`index`)."""

    reads: tuple[str, ...]  # "embedding", "layer 1: after masked self-attention", ...
    layer_ends: tuple[int, ...]  # the reads that are a layer's output, bottom first
    positions: tuple[str, ...]  # the decoder's input tokens, every row
    start: int  # the window's first row
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]  # [read][row - start][k]
    top_probabilities: np.ndarray  # (R, n, k)
    targets: tuple[str, ...]  # what each row should write, every row
    target_probability: np.ndarray  # (R, n)
    target_rank: np.ndarray  # (R, n) int
    final_norm: bool  # whether each read went through the final LayerNorm first (pre-LN)

    @property
    def rows(self) -> range:
        """The decoder rows read (a window of a long text)."""
        return range(self.start, self.start + self.top_probabilities.shape[1])

    def index(self, position: int) -> int:
        """Where a decoder row sits in the arrays; IndexError outside the window."""
        if position not in self.rows:
            raise IndexError(f"row {position} is outside the rows read ({self.rows.start}..{self.rows.stop - 1})")
        return position - self.start

    def predicted(self, read: int) -> tuple[str, ...]:
        """The most likely next token at every row read after one read."""
        return tuple(row[0] for row in self.top_tokens[read])

    def by_layer(self) -> list[list[str]]:
        """[layer][row]: the most likely next token after each layer (its last row: the model's prediction)."""
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


def _trace_reads(run: Trace, rows: range) -> list[tuple[str, Tensor]]:
    """A decoder-only trace's states of `rows`, in the order they were computed, (1, n, D) each: the embedding and
    every layer's output as the run kept them, and each layer's self-attention sub-layer computed again for these
    rows only (StackLayers.rows: every earlier row's keys and values, not the whole layer)."""
    states = forward.states(run, "decoder")
    source = run.attention("decoder_self").source
    rows_of = lambda array: torch.from_numpy(np.array(array[rows.start : rows.stop]))[None].to(source.device)  # noqa: E731
    found = [("embedding", rows_of(states["embeddings"]))]
    for i in range(source.n_layers):
        window = source.rows(i, rows.start, rows.stop)
        found.append(
            (
                f"layer {i + 1}: {READ_NAMES['after_self_attn']}",
                torch.from_numpy(window.states["after_self_attn"])[None].to(source.device),
            )
        )
        found.append((f"layer {i + 1}: {READ_NAMES['after_ffn']}", rows_of(states["after_ffn"][i])))
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


def window(loaded: LoadedModel, n_rows: int, position: int) -> range:
    """The decoder rows the lens reads for a page looking at `position`: every row where that costs at most
    READ_FLOPS, else as many rows as that allows (at least LEAST_ROWS) around it."""
    config = loaded.model.config
    n_reads = 1 + config.n_decoder_layers * (3 if loaded.is_encoder_decoder else 2)
    per_row = 2 * n_reads * config.d_model * config.target_vocab_size
    size = min(n_rows, max(LEAST_ROWS, int(READ_FLOPS // per_row)))
    start = min(max(0, position - size // 2), n_rows - size)
    return range(start, start + size)


BLOCK_BYTES = 64 * 2**20  # logits (and their softmax) of this many bytes at a time


def _blocks(n_rows: int, n_reads: int, vocab_size: int) -> list[slice]:
    """Row ranges of the window whose reads go through the output layer together: logits within BLOCK_BYTES, and
    at least LEAST_ROWS rows in each product."""
    least = -(-LEAST_ROWS // n_reads)
    size = max(BLOCK_BYTES // (4 * n_reads * vocab_size), least, 1)
    starts = list(range(0, n_rows, size))
    if len(starts) > 1 and n_rows - starts[-1] < least:
        starts.pop()  # a short tail joins the block before it
    return [slice(a, b) for a, b in zip(starts, [*starts[1:], n_rows], strict=True)]


def _read(loaded: LoadedModel, states: Tensor, targets: Tensor, k: int, together: bool) -> tuple[Tensor, ...]:
    """(top k probabilities, their ids, the target's probability, its rank) of states (R, n, D) read through the
    output layer, each (R, n, ...). `together`: every read in one product of R x n rows."""
    n_reads, n = states.shape[:2]
    if together:
        logits = read_through(loaded, states.reshape(1, n_reads * n, -1))[0].view(n_reads, n, -1)
    else:
        logits = torch.cat([read_through(loaded, state[None]) for state in states])  # (R, n, V)
    chosen = logits.gather(-1, targets[None, :, None].expand(n_reads, n, 1))  # (R, n, 1)
    rank = ranks(logits, chosen)  # (R, n) by logit: the probabilities' order, without float32's ties
    p = logits.softmax(-1)  # (R, n, V) in float32: its rounding is far below the two digits drawn
    del logits
    top = p.topk(k, dim=-1)
    return top.values, top.indices, p.gather(-1, targets[None, :, None].expand(n_reads, n, 1))[..., 0], rank


@torch.inference_mode()
def lens(
    loaded: LoadedModel,
    answer: Answer,
    ablation: Ablation | None = None,
    rows: range | None = None,
    run: Trace | None = None,
) -> Lens:
    """Read every state of the decoder's rows `rows` (every row by default) through the output layer: from `run`, a
    decoder-only model's trace of the answer's text (run with `ablation`'s heads off, if any), without a forward;
    else from a run of the decoder on the answer's input (teacher-forced) with `ablation`'s heads off."""
    if answer.decoder_input is None or answer.targets is None:
        raise ValueError(f"{loaded.title} has no output matrix: {loaded.family.shape_name}, it writes no tokens")
    model = loaded.model
    n_rows = len(answer.decoder_input)
    rows = range(n_rows) if rows is None else rows
    if not 0 <= rows.start < rows.stop <= n_rows:
        raise IndexError(f"rows {rows.start}..{rows.stop - 1} of {n_rows}")
    if run is not None and loaded.is_decoder_only:
        found = _trace_reads(run, rows)
    else:
        found = [
            (name, state[:, rows.start : rows.stop])
            for name, state in reads(run_on(loaded, answer, ablation, drop_attention, logits=False))
        ]
    vocabulary = loaded.target_vocabulary
    targets = torch.tensor(answer.targets[rows.start : rows.stop], device=loaded.device)
    k = min(TOP, model.config.target_vocab_size)
    states = torch.cat([state for _, state in found])  # (R, n, D)
    # a product of 16 rows or more gives each row the numbers of the model's own forward of 16 rows or more (MKL's
    # sgemm takes another path below 16 rows): a long text's reads go through together, in blocks; a short text's
    # few rows one read at a time, as its forward computed them
    together = n_rows >= LEAST_ROWS
    blocks = _blocks(len(rows), len(found), model.config.target_vocab_size) if together else [slice(None)]
    parts = [_read(loaded, states[:, block], targets[block], k, together) for block in blocks]
    top_p, top_ids, target_p, rank = (torch.cat([part[i] for part in parts], dim=1) for i in range(4))
    tops = [tuple(tuple(vocabulary.id_to_token(i) for i in row) for row in read) for read in top_ids.tolist()]
    names = [name for name, _ in found]
    layer_ends = tuple(i for i, name in enumerate(names) if name.endswith(READ_NAMES["after_ffn"]))
    return Lens(
        tuple(names),
        layer_ends,
        tuple(vocabulary.id_to_token(i) for i in answer.decoder_input),
        rows.start,
        tuple(tops),
        top_p.cpu().numpy(),
        tuple(vocabulary.id_to_token(i) for i in answer.targets),
        target_p.cpu().numpy(),
        rank.cpu().numpy(),
        model.decoder.final_norm is not None,
    )


@torch.inference_mode()
def run_on(
    loaded: LoadedModel, answer: Answer, ablation: Ablation | None = None, keep: Keep = None, logits: bool = True
) -> TransformerOutput:
    """The model's full forward on the answer's input: the decoder teacher-forced on its rows; `keep`: what is kept
    of each layer (the lens reads states only: explorer.run.layers.drop_attention); `logits=False`: without the
    (1, T, V) logits (a reader of a row reads it from decoder.output: explorer/run/logits.py)."""
    model = loaded.model
    decoder_input = torch.tensor([answer.decoder_input], device=loaded.device)
    if model.encoder is None:
        return model(decoder_input, ablation=ablation, keep=keep, logits=logits)
    source = torch.tensor([answer.source_ids], device=loaded.device)
    return model(source, decoder_input, ablation=ablation, keep=keep, logits=logits)


def for_trace(loaded: LoadedModel, run: Trace, ablation: Ablation | None = None, rows: range | None = None) -> Lens:
    """The lens on the trace's own decoder input (an encoder-decoder's greedy output, a decoder-only model's text),
    with the heads the trace ran without (`ablation`) off too: what the export writes, so its last layer's tokens are
    the trace's next tokens. A decoder-only trace is read from its kept states (no forward)."""
    decoder_ids = forward.token_ids(loaded, run, "decoder")
    source = decoder_ids if loaded.is_decoder_only else forward.token_ids(loaded, run, "encoder")
    # the targets: the tokens each row actually wrote (greedy) or, decoder-only, the text's next tokens
    logits_rows = len(decoder_ids)
    assert run.top_tokens is not None
    vocabulary = loaded.target_vocabulary
    targets = [vocabulary.token_to_id(row[0]) for row in run.top_tokens[:logits_rows]]
    answer = Answer(tuple(source), tuple(decoder_ids), tuple(targets), (True,) * logits_rows)
    return lens(loaded, answer, ablation, rows, run)
