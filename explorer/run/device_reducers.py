"""reducers.one_pass and the statistics it feeds, in torch on whatever device the run made the layer on: a run on a
GPU reduces each layer there and copies back only what the pages read (a few numbers a head, the thumbnails, the
rollout's (T, t) carry stays on the device), never the (H, T, T) layer. The same sums as reducers.one_pass's, a block
of query rows at a time (BLOCK_BYTES of the layer a block: a few temporaries of that size, not of the layer's), so
they agree with it, and with analysis's functions of the whole layers, to float32 rounding
(tests/explorer/test_device_reducers.py). No numpy until `to_host`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attention_explorer.explorer.run import analysis
from attention_explorer.explorer.run.blocks import THUMBNAIL, edges, factor
from attention_explorer.models.induction import induction_targets

BLOCK_BYTES = 64 * 2**20  # of the layer a block of query rows (float32): 9 heads x 8,192 keys x 227 rows
ROW = ("entropy", "distance", "cls", "sep", "punctuation")  # the columns of Pass.rows, as reducers.ROW
TINY = float(torch.finfo(torch.float32).tiny)  # log(max(w, TINY)): 0 log 0 = 0 (reducers.TINY)


def moved(tensor: Tensor) -> np.ndarray:
    """A reduced tensor to the CPU as numpy: the one copy back of what a page reads (counted in tests)."""
    return tensor.detach().cpu().numpy()


@functools.lru_cache(maxsize=4)
def _marks(keys: tuple[str, ...], device: torch.device) -> Tensor:
    """(Tk, 3) float32 on `device`: 1 at the first position, where a key is an end marker, where it is punctuation
    (reducers._columns' first three rows)."""
    marks = [[float(j == 0), float(k in analysis.ENDS), float(analysis.is_punctuation(k))] for j, k in enumerate(keys)]
    return torch.tensor(marks, dtype=torch.float32, device=device).reshape(len(keys), 3)


@functools.lru_cache(maxsize=2)  # a text of one repeated token has T^2 / 2 targets: hold few
def _targets(tokens: tuple[str, ...], device: torch.device) -> tuple[Tensor, Tensor, Tensor, int]:
    """(query rows, keys, each target's row among the rows that have one, how many rows have one) on `device`: the
    induction targets (models.induction) of a text, the same for every layer of a run."""
    numbered = {token: i for i, token in enumerate(dict.fromkeys(tokens))}
    queries, keys = np.nonzero(induction_targets([numbered[token] for token in tokens]))
    rows = np.cumsum(np.diff(queries, prepend=-1) != 0) - 1  # each target's row, numbered 0, 1, ... in order
    found = [torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in (queries, keys, rows)]
    return (*found, int(rows[-1]) + 1 if len(rows) else 0)


@dataclass(frozen=True)
class Pass:
    """What one_pass read of one layer, on the layer's device (reducers.Pass's fields)."""

    rows: Tensor  # (H, Tq, ROW) each query row's sums
    mixed: Tensor | None  # `carried` multiplied by the layer's residual-mixed attention, or None
    cell_sums: Tensor | None  # (H, tq, tk) float64: the weights' sums in each cell of `cells`, or None
    row_max: Tensor | None  # (H, Tq) each row's largest weight where `allowed`, 0 where none is; or None


def one_pass(
    weights: Tensor,
    keys: Sequence[str],
    causal: bool = False,
    carried: Tensor | None = None,
    cells: tuple[int, int] | None = None,
    allowed: Tensor | None = None,
) -> Pass:
    """reducers.one_pass of one layer (H, Tq, Tk), on its device, a block of query rows at a time: each query row's
    sums (-w log w, w |i - j|, w on start markers, end markers and punctuation); `carried` (T, n) times the layer's
    residual-mixed attention; with `cells` (f_q, f_k), the sums over each cell of f_q queries by f_k keys; with
    `allowed` (Tq, Tk) bool, each row's largest allowed weight. `causal`: a block reads only the keys up to its
    last row (every weight beyond is 0)."""
    n_heads, tq, tk = weights.shape
    if len(keys) != tk:
        raise ValueError(f"{len(keys)} key tokens for {tk} keys")
    device, w = weights.device, weights.float()
    options = dict(dtype=torch.float32, device=device)
    marks = _marks(tuple(keys), device)  # (Tk, 3)
    rows = torch.empty(n_heads, tq, len(ROW), **options)
    row_sum = torch.empty(n_heads, tq, **options)
    row_max = None if allowed is None else torch.empty(n_heads, tq, **options)
    f_q = 1 if cells is None else cells[0]
    cell_rows = None if cells is None else torch.zeros(n_heads, -(-tq // f_q), tk, **options)
    summed = None if carried is None else torch.zeros(tq, tk, **options)  # the sum over heads, for the rollout
    positions = torch.arange(tk, **options)
    step = max(1, min(tq, BLOCK_BYTES // (4 * n_heads * tk)))
    for first in range(0, tq, step):
        last = min(tq, first + step)
        width = min(tk, last) if causal else tk
        block = w[:, first:last, :width]  # (H, C, K)
        at = slice(first, last)
        rows[:, at, 0] = -(block * block.clamp_min(TINY).log()).sum(-1)
        far = (torch.arange(first, last, **options)[:, None] - positions[:width]).abs()  # (C, K) |i - j|, exact
        rows[:, at, 1] = (block * far).sum(-1)
        rows[:, at, 2:] = block @ marks[:width]  # (H, C, 3) the key shares
        row_sum[:, at] = block.sum(-1)
        if row_max is not None:  # weights are >= 0: weight x allowed keeps the allowed ones, zeroes the rest
            row_max[:, at] = (block * allowed[at, :width]).amax(-1)
        if cell_rows is not None:
            cell = torch.arange(first, last, device=device) // f_q  # each row's cell
            cell_rows[:, :, :width].index_add_(1, cell, block)
        if summed is not None:
            summed[at, :width] = block.sum(0)
    cell_sums = None if cell_rows is None else block_sums(cell_rows, cells[1])
    if carried is None:
        return Pass(rows, None, cell_sums, row_max)
    # M = (0.5 mean + 0.5 I) / its rows' sums, times carried (analysis.residual_mixed)
    totals = 0.5 * row_sum.sum(0) / n_heads + 0.5  # (T,) the mixed rows' sums
    mixed = ((summed @ carried) * (0.5 / n_heads) + 0.5 * carried) / totals[:, None]
    return Pass(rows, mixed, cell_sums, row_max)


def block_sums(x: Tensor, f: int) -> Tensor:
    """blocks.block_sums along the last axis: float64 sums over consecutive blocks of f (the last what is left)."""
    n = x.shape[-1]
    whole = n // f * f
    parts = [x[..., :whole].reshape(*x.shape[:-1], n // f, f).sum(-1, dtype=torch.float64)]
    if whole < n:
        parts.append(x[..., whole:].sum(-1, keepdim=True, dtype=torch.float64))
    return torch.cat(parts, dim=-1)


def thumbnails(weights: Tensor, cells: int = THUMBNAIL) -> Tensor:
    """blocks.thumbnails on the device: (H, Tq, Tk) -> (H, tq, tk) float32 block means, summed in float64 (rows first,
    then keys); the layer itself where each cell is one weight."""
    tq, tk = weights.shape[-2:]
    f_q, f_k = factor(tq, cells), factor(tk, cells)
    if f_q == f_k == 1:
        return weights.float()
    summed = block_sums(block_sums(weights.transpose(-1, -2), f_q).transpose(-1, -2), f_k)  # (H, tq, tk) float64
    counts = torch.from_numpy(np.diff(edges(tq, f_q))[:, None] * np.diff(edges(tk, f_k))[None, :]).to(weights.device)
    return (summed / counts).float()


def statistics(weights: Tensor, keys: Sequence[str], queries: Sequence[str] | None, rows: Tensor) -> Tensor:
    """reducers._statistics on the device: (len(reducers.NAMES), H) float64 in analysis.STATISTICS' order, from
    one_pass's row sums, the diagonals and the induction targets."""
    n_heads = weights.shape[0]
    means = rows.double().mean(1)  # (H, ROW)
    found = {name: means[:, i] for i, name in enumerate(ROW)}
    nan = torch.full((n_heads,), float("nan"), dtype=torch.float64, device=weights.device)
    for name, offset in (("previous", -1), ("next", 1), ("self", 0)):
        diagonal = torch.diagonal(weights, offset, -2, -1)  # (H, n), a view
        found[name] = diagonal.double().mean(-1) if diagonal.shape[-1] else nan
    self_attention = queries is not None and tuple(queries) == tuple(keys)
    found["induction"] = _induction(weights, keys) if self_attention else nan
    return torch.stack([found[name] for name in analysis.STATISTICS])


def layer_statistics(weights: Tensor, keys: Sequence[str], queries: Sequence[str] | None, causal: bool) -> Tensor:
    """reducers.layer_statistics on the device: one layer (H, Tq, Tk) -> (len(NAMES), H) float64."""
    return statistics(weights, keys, queries, one_pass(weights, keys, causal).rows)


def _induction(weights: Tensor, tokens: Sequence[str]) -> Tensor:
    """analysis.induction_of one layer (H, T, T) -> (H,): the weights on the targets gathered and summed by row."""
    queries, keys, rows, n_rows = _targets(tuple(tokens), weights.device)
    if not n_rows:
        return torch.full((weights.shape[0],), float("nan"), dtype=torch.float64, device=weights.device)
    on_targets = torch.zeros(weights.shape[0], n_rows, dtype=torch.float32, device=weights.device)
    on_targets.index_add_(1, rows, weights[:, queries, keys].float())  # (H, query rows with a target)
    return on_targets.double().mean(-1)


def residual_mixed(weights: Tensor) -> Tensor:
    """analysis.residual_mixed on the device: one layer (H, T, T) -> (T, T) float64, 0.5 mean over heads + 0.5 identity,
    rows summing to 1: what attention flow's max-flow (on the CPU) reads of a layer."""
    length = weights.shape[-1]
    eye = torch.eye(length, dtype=torch.float64, device=weights.device)
    mixed = 0.5 * weights.double().mean(0) + 0.5 * eye
    return mixed / mixed.sum(-1, keepdim=True)


def _owners(groups: Sequence[Sequence[int]], n: int, device: torch.device) -> Tensor:
    """(n,) each position's group: the groups must cover 0..n-1 once each (analysis.word_groups' do)."""
    owners = torch.full((n,), -1, dtype=torch.long)
    for index, group in enumerate(groups):
        owners[list(group)] = index
    if len(owners) != sum(len(g) for g in groups) or bool((owners < 0).any()):
        raise ValueError(f"word groups must cover the {n} positions once each")
    return owners.to(device)


def merge_words(weights: Tensor, query_groups: Sequence[Sequence[int]], key_groups: Sequence[Sequence[int]]) -> Tensor:
    """analysis.merge_words on the device: (..., Tq, Tk) -> (..., Wq, Wk) float32, a word's key pieces summed and its
    query pieces averaged; only the words' map leaves the device."""
    *lead, tq, tk = weights.shape
    options = dict(dtype=torch.float32, device=weights.device)
    keys = torch.zeros(*lead, tq, len(key_groups), **options)
    keys.index_add_(-1, _owners(key_groups, tk, weights.device), weights.float())  # (..., Tq, Wk)
    words = torch.zeros(*lead, len(query_groups), len(key_groups), **options)
    words.index_add_(-2, _owners(query_groups, tq, weights.device), keys)  # (..., Wq, Wk) sums over query pieces
    pieces = torch.tensor([len(g) for g in query_groups], **options)
    return words / pieces[:, None]
