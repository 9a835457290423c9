"""The final linear layer (figure 1, top) read in row blocks: what the pages read of a run's logits, never the (T, V)
matrix itself.

A position's logits are V float32 numbers: 1 MB for Gemma 3's 262,144-token vocabulary, so a (T, V) matrix is 2.1 GB
at 2,048 tokens. A run keeps each position's top tokens and their probabilities, and for a text read by a decoder-only
model what its loss needs of each row (TextLogits: log sum exp, the mean logit, the next token's logit and rank); a
page that shows one position's whole row recomputes it from the decoder's last state (`row_logits`). Every product
here goes through the model's own output layer (soft-capping included) on blocks of at least LEAST_ROWS rows, so each
row's numbers are those a product over every row computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.models.device import numpy as host
from attention_explorer.models.registry import LoadedModel

TOP_K = 10  # next-token candidates kept per position
# one block of float32 logits (its reductions add one array of its size, reused from block to block); each block's
# product reads the output matrix again (Gemma 3's: 671 MB), so blocks far smaller cost time: the product of 512 of
# Gemma 3's rows took 2.8 s in 64-row blocks, 2.0 s in 128-row blocks and 1.3 s in one, on two cores
BLOCK_BYTES = 128 * 2**20
# the fewest rows of a product through the output matrix that get the numbers of a forward over 16 rows or more: MKL's
# sgemm takes another path below 16 rows (and a forward of fewer rows computed them all at once)
LEAST_ROWS = 16


def block_rows(vocab_size: int) -> int:
    """Rows of logits a block holds: BLOCK_BYTES of them (128 for Gemma 3's 262,144 tokens, 682 for SmolLM2's 49,152),
    never under LEAST_ROWS."""
    return max(LEAST_ROWS, BLOCK_BYTES // (4 * max(vocab_size, 1)))


def row_blocks(n_rows: int, size: int) -> list[slice]:
    """Consecutive blocks of about `size` rows covering n_rows, none under LEAST_ROWS rows unless n_rows is."""
    starts = list(range(0, n_rows, max(size, LEAST_ROWS)))
    if len(starts) > 1 and n_rows - starts[-1] < LEAST_ROWS:
        starts.pop()  # a short tail joins the block before it
    return [slice(a, b) for a, b in zip(starts, [*starts[1:], n_rows], strict=True)]


def _decoder(loaded: LoadedModel):
    if not loaded.family.next_token_head:
        raise ValueError(f"model {loaded.key!r} is encoder-only: it has no output distribution")
    return loaded.model


def final_linear(model, x: torch.Tensor) -> torch.Tensor:
    """(..., V) the logits of the decoder's last states x (..., D): its final norm (pre-LN), then the output layer."""
    if model.decoder.final_norm is not None:
        x = model.decoder.final_norm(x)
    return model.generator(x)


@torch.inference_mode()
def logits_from_state(loaded: LoadedModel, final_states: np.ndarray) -> np.ndarray:
    """(T, V): the final linear layer (figure 1, top) on the decoder's last states (final LayerNorm when pre-LN)."""
    model = _decoder(loaded)
    return final_linear(model, torch.from_numpy(np.array(final_states, np.float32)).to(loaded.device)).cpu().numpy()


def row_logits(loaded: LoadedModel, final_states: np.ndarray, row: int) -> np.ndarray:
    """(V,) one row's logits from the last states (T, D) of a forward over T rows, with the numbers that forward
    computed: through the output layer with the rows around it (LEAST_ROWS), not alone."""
    n = len(final_states)
    if not 0 <= row < n:
        raise IndexError(f"row {row} of {n}")
    start = min(max(0, row - LEAST_ROWS // 2), max(0, n - LEAST_ROWS))
    return logits_from_state(loaded, final_states[start : start + LEAST_ROWS])[row - start]


def output_row(model, output: torch.Tensor, row: int) -> torch.Tensor:
    """(V,) row `row` of the logits of a stack's output (T, D) (after its final norm: what the output layer reads),
    through the output layer with the rows around it (LEAST_ROWS), as a product over every row computes it."""
    n = output.size(0)
    row = row % n
    start = min(max(0, row - LEAST_ROWS // 2), max(0, n - LEAST_ROWS))
    return model.generator(output[start : start + LEAST_ROWS])[row - start]


@dataclass(frozen=True)
class TextLogits:
    """What the loss of a decoder-only model's text needs of each row's logits (T, V), taken in row blocks while the
    run holds the decoder's last states (explorer.run.output.score_text): no (T, V) array is made or kept, and no row
    goes through the output layer again (SmolLM2's 2,048 rows are 116 GFLOP, seconds on two cores)."""

    normaliser: np.ndarray  # (T,) log sum_v exp(logit_v), float32
    mean: np.ndarray  # (T,) mean_v logit_v: label smoothing's uniform part
    next: np.ndarray  # (T - 1,) the logit of the text's next token
    rank: np.ndarray | None = None  # (T - 1,) the next token's rank by logit (1: the most probable)

    def next_probabilities(self) -> np.ndarray:
        """(T - 1,) the probability each row gives the text's next token: exp(logit - log sum exp), in float64."""
        return np.exp(np.asarray(self.next, np.float64) - np.asarray(self.normaliser[:-1], np.float64))


@dataclass(frozen=True)
class Reduced:
    """What a run keeps of its (T, V) logits: each row's most probable tokens and their probabilities, each row's
    most probable token id (argmax, as the whole matrix's), and for a decoder-only text TextLogits."""

    top_ids: np.ndarray  # (T, k) int64, most probable first
    top_probabilities: np.ndarray  # (T, k) float32 softmax probabilities
    argmax: np.ndarray  # (T,) int64
    text: TextLogits | None


def ranks(logits: torch.Tensor, chosen: torch.Tensor, scratch: torch.Tensor | None = None) -> torch.Tensor:
    """(..., V) logits, (..., 1) the chosen token's -> (...) int64 its rank by logit (1: the largest; float32 ties
    count as one rank, the probabilities' order without their ties): the logits above it, plus 1. Counted as float
    0/1 in `scratch` (a float array of the logits' shape; a new one if None), exact below 2^24 terms: a bool array's
    sum took 5x as long (0.68 s a 128-row block of Gemma 3's 262,144 tokens, on two busy cores)."""
    above = torch.gt(logits, chosen, out=torch.empty_like(logits) if scratch is None else scratch)
    return above.sum(-1).to(torch.int64) + 1


def reduce(rows: Callable[[slice], torch.Tensor], n: int, vocab_size: int, ids: Sequence[int] | None = None) -> Reduced:
    """Final linear + softmax (figure 1, top) over n rows, `rows(block)` giving a block's logits (C, V), one block
    of block_rows(vocab_size) rows at a time: the top TOP_K tokens and their probabilities (softmax is
    exp(logit - log sum exp): no (T, V) array of probabilities either); with a decoder-only text's `ids`, what its loss
    needs (TextLogits)."""
    values, indices, argmax, normaliser, mean, following, rank = [], [], [], [], [], [], []
    scratch: list[torch.Tensor] = []  # (C, V) arrays reused block after block: a fresh one each pass costs page faults
    for block in row_blocks(n, block_rows(vocab_size)):
        logits = rows(block)  # (C, V)
        if not scratch or scratch[0].shape != logits.shape:
            scratch[:] = [torch.empty_like(logits)]
        (shifted,) = scratch
        top = logits.topk(min(TOP_K, logits.size(-1)), dim=-1)  # (C, k), the largest first
        largest = top.values[:, :1]  # (C, 1) each row's largest logit
        # argmax is the top token's id wherever the top two differ; a tie takes argmax's first index, as the matrix's
        best = top.indices[:, 0].clone()  # (C,)
        if top.values.size(-1) > 1:
            tied = (top.values[:, 0] == top.values[:, 1]).nonzero()[:, 0]
            if len(tied):
                best[tied] = logits[tied].argmax(-1)
        # log sum exp as torch's logsumexp computes it (the largest logit m, then m + log sum exp(logit - m), its sum
        # torch's accurate one), in place in a reused array: logsumexp's own temporaries took ~2x the time
        torch.sub(logits, largest, out=shifted).exp_()
        lse = shifted.sum(-1).log_() + largest[:, 0]  # (C,)
        values.append((top.values - lse[:, None]).exp())
        indices.append(top.indices)
        argmax.append(best)
        if ids is not None:
            normaliser.append(lse)
            mean.append(logits.mean(-1))
            after = torch.tensor(ids[block.start + 1 : block.stop + 1], device=logits.device)  # the last row has none
            chosen = logits[: len(after)].gather(-1, after[:, None])  # (C', 1)
            following.append(chosen[:, 0])
            rank.append(ranks(logits[: len(after)], chosen, shifted[: len(after)]))  # (C',), in the scratch array
        del logits
    text = None
    if ids is not None:
        text = TextLogits(*(host(torch.cat(parts)) for parts in (normaliser, mean, following, rank)))
    return Reduced(host(torch.cat(indices)), host(torch.cat(values)), host(torch.cat(argmax)), text)


def reduce_output(model, output: torch.Tensor, ids: Sequence[int] | None = None) -> Reduced:
    """`reduce` over a stack's output (T, D) (after its final norm), through the model's output layer block by block."""
    return reduce(lambda block: model.generator(output[block]), output.size(0), model.generator.out_features, ids)
