"""What the analysis pages read of every layer, reduced while a run holds the layer (explorer.run.layers.Reductions),
so that no layer of a long text is recomputed for them: each head's statistics (analysis.STATISTICS) and the
attention rollout's block means (analysis.rollout, as a long map's overview draws it), carried up the layers.

Both come from one pass over the layer, a block of ROWS query rows at a time in float32: the block is read from
memory once and stays in the processor's cache while every sum is taken from it (analysis.head_statistics passes
over the whole (H, T, T) layer in float64 once per statistic: about 1 s a layer at 2,048 tokens). They agree with
analysis's functions of the whole layers to float32 rounding (tests/explorer/test_reducers.py).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from explorer.run import analysis
from explorer.run.blocks import edges, factor
from models.induction import induction_targets

ROWS = 16  # query rows a block: (H, 16, T) float32 is 1.2 MB at 2,048 tokens and 9 heads, within a core's cache
MIXED = 256  # rows a block of the rollout's matrix product
NAMES = tuple(analysis.STATISTICS)  # the order of a reduced layer's rows
TINY = float(np.finfo(np.float32).tiny)  # log(max(w, TINY)): finite where w is 0, and 0 * finite = 0 log 0 = 0
# the columns of a block's one product with the keys: the three key shares, each row's sum, and distance
SHARES, SUM, OFFSET = slice(0, 3), 3, 4


@functools.lru_cache(maxsize=4)
def _columns(keys: tuple[str, ...]) -> torch.Tensor:
    """(5, Tk) float32: 1 where a key is a start marker, an end marker, punctuation; 1; and (filled per block) the
    key's distance back from the block's first row. One text's for every layer of a run."""
    wanted = (analysis.STARTS.__contains__, analysis.ENDS.__contains__, analysis.is_punctuation)
    return torch.tensor(
        [[float(test(key)) for key in keys] for test in wanted] + [[1.0] * len(keys), [0.0] * len(keys)]
    )


@functools.lru_cache(maxsize=4)
def _induction_targets(tokens: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query rows, keys, each query row's first index): the induction targets (models.induction) of a text, row by
    row; the same for every layer of a run."""
    numbered = {token: i for i, token in enumerate(dict.fromkeys(tokens))}
    queries, keys = np.nonzero(induction_targets([numbered[token] for token in tokens]))
    return queries, keys, np.flatnonzero(np.diff(queries, prepend=-1))


def _induction(weights: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    """analysis.induction_of one layer (H, T, T) -> (H,): the weights on the targets gathered, not the whole layer
    multiplied by the (T, T) target mask."""
    queries, keys, starts = _induction_targets(tuple(tokens))
    if not len(queries):
        return np.full(weights.shape[0], np.nan)
    on_targets = np.add.reduceat(weights[:, queries, keys], starts, axis=-1)  # (H, query rows with a target)
    return on_targets.mean(axis=-1, dtype=np.float64)


def _diagonal_share(weights: np.ndarray, offset: int) -> np.ndarray:
    """analysis._diagonal_share of one layer (H, Tq, Tk) -> (H,), read from a view of the diagonal."""
    diagonal = np.diagonal(weights, offset, axis1=-2, axis2=-1)  # (H, n)
    if diagonal.shape[-1] == 0:
        return np.full(weights.shape[0], np.nan)
    return diagonal.mean(axis=-1, dtype=np.float64)


@torch.inference_mode()
def one_pass(
    weights: np.ndarray, keys: Sequence[str], causal: bool = False, carried: torch.Tensor | None = None
) -> tuple[np.ndarray, torch.Tensor | None]:
    """One layer (H, Tq, Tk) read once, a block of ROWS query rows at a time: (each query row's sums (H, Tq, ROW):
    -w log w, w |i - j|, and w on start markers, end markers and punctuation; `carried` (T, n) multiplied by the
    layer's residual-mixed attention M (analysis._residual_mixed), or None without it). `causal`: every weight
    beyond a query's own position is 0 (a decoder's masked self-attention: softmax of finfo.min) and adds nothing to
    any sum, so a block reads only the keys up to its last row."""
    n_heads, tq, tk = weights.shape
    w = torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32))  # (H, Tq, Tk): the run's own, no copy
    columns = _columns(tuple(keys)).clone()  # (5, Tk)
    sums = torch.empty(n_heads, 5, tq)  # each row's product with the columns
    entropy = torch.empty(n_heads, tq)
    distance = torch.empty(n_heads, tq) if not causal else None
    scratch = torch.empty(n_heads, min(ROWS, tq), tk)
    summed = None if carried is None else torch.zeros(tq, tk)  # the sum over heads, for the rollout
    positions = torch.arange(tk, dtype=torch.float32)
    for first in range(0, tq, ROWS):
        last = min(tq, first + ROWS)
        width = min(tk, last) if causal else tk
        block = w[:, first:last, :width]  # (H, C, K): read from memory here, from the cache after
        logs = scratch[:, : last - first, :width]
        torch.log(torch.clamp_min(block, TINY, out=logs), out=logs).mul_(block)  # w log w
        torch.sum(logs, -1, out=entropy[:, first:last])
        if causal:  # |i - j| = (i - first) + (first - j) for j <= i: the second a column of the product, so no
            # cancellation between two sums as large as i
            torch.sub(first, positions[:width], out=columns[OFFSET, :width])
        else:
            torch.sum(
                torch.mul(block, (torch.arange(first, last)[:, None] - positions).abs_(), out=logs),
                -1,
                out=distance[:, first:last],
            )
        sums[:, :, first:last] = columns[:, :width] @ block.transpose(
            1, 2
        )  # (H, 5, C): the cheap order for a 5-wide product
        if summed is not None:
            torch.sum(block, 0, out=summed[first:last, :width])
    if causal:
        distance = sums[:, OFFSET] + (torch.arange(tq) % ROWS) * sums[:, SUM]  # + (i - first) * the row's sum
    rows = torch.stack([entropy.neg_(), distance, *sums[:, SHARES].unbind(1)], dim=-1)  # (H, Tq, ROW)
    if carried is None:
        return rows.numpy(), None
    # M = (0.5 mean + 0.5 I) / its rows' sums, times carried: in blocks of MIXED rows (a matrix product's own size)
    totals = 0.5 * sums[:, SUM].sum(0) / n_heads + 0.5  # (T,) the mixed rows' sums
    mixed = torch.empty_like(carried)
    for first in range(0, tq, MIXED):
        last = min(tq, first + MIXED)
        width = min(tk, last) if causal else tk
        product = summed[first:last, :width] @ carried[:width]  # (C, n)
        mixed[first:last] = (product.mul_(0.5 / n_heads) + 0.5 * carried[first:last]) / totals[first:last, None]
    return rows.numpy(), mixed


ROW = ("entropy", "distance", "cls", "sep", "punctuation")  # one_pass's sums of each query row


def layer_statistics(
    weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None = None, causal: bool = False
) -> np.ndarray:
    """analysis.head_statistics of one layer (H, Tq, Tk) -> (len(NAMES), H) float64, rows in NAMES' order (one_pass;
    `causal` as there, `queries` as for head_statistics)."""
    return _statistics(weights, keys, queries, one_pass(weights, keys, causal)[0])


def _statistics(weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None, rows: np.ndarray):
    """The statistics from one_pass's row sums (H, Tq, ROW), the diagonals and the induction targets."""
    if len(keys) != weights.shape[-1]:
        raise ValueError(f"{len(keys)} key tokens for {weights.shape[-1]} keys")
    means = rows.mean(axis=1, dtype=np.float64)  # (H, ROW): over every query row
    found = {name: means[:, i] for i, name in enumerate(ROW)}
    found |= {name: _diagonal_share(weights, offset) for name, offset in (("previous", -1), ("next", 1), ("self", 0))}
    self_attention = queries is not None and tuple(queries) == tuple(keys)
    found["induction"] = _induction(weights, keys) if self_attention else np.full(weights.shape[0], np.nan)
    return np.stack([found[name] for name in NAMES])


def as_statistics(reduced: np.ndarray) -> dict[str, np.ndarray]:
    """Every layer's layer_statistics (L, len(NAMES), H) -> {name: (L, H)}, as analysis.head_statistics returns."""
    return {name: reduced[:, i] for i, name in enumerate(NAMES)}


class Analysis:
    """The analysis pages' reducers for one run (it carries each kind's rollout from layer to layer): `statistics`
    (layer_statistics) and, past `longer_than` tokens, `rollout`: the block means of the rollout through each layer
    (analysis.rollout), at most `cells` x `cells`, factor(T, cells) positions a side, as blocks.block_means of the
    whole rollout. Both from one one_pass over each layer, which ever of the two is asked first.

    The rollout through layer l is R_l = M_l R_{l-1}; its block sums over keys, R_l S (S the (T, t) indicator of
    each key's block), are M_l (R_{l-1} S): a (T, t) matrix carried up the layers costs T^2 t a layer, where the
    whole rollout costs T^3. Self-attention only (cross-attention's queries are not its keys)."""

    def __init__(self, cells: int, longer_than: int) -> None:
        self.cells, self.longer_than = cells, longer_than
        self.carried: dict[str, torch.Tensor] = {}  # by kind: R_{l-1} S, (T, t) float32
        self.asked: dict[tuple[str, str], int] = {}  # (reducer, kind): the layers it has been given
        self.done: dict[tuple[str, int], list] = {}  # (kind, layer): [statistics, rollout, reducers yet to ask]

    def statistics(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        return self._reduced("statistics", kind, weights, queries, keys)[0]

    def rollout(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """(t, t) float32 block means; an empty array where the rollout is not reduced."""
        return self._reduced("rollout", kind, weights, queries, keys)[1]

    def _reduced(self, name: str, kind: str, weights: np.ndarray, queries, keys) -> list:
        """This layer's pass, made when the first of the two reducers is given the layer (they are given the layers
        of each kind in order)."""
        layer = self.asked[name, kind] = self.asked.get((name, kind), -1) + 1
        found = self.done.get((kind, layer))
        if found is None:
            found = self.done[kind, layer] = [*self._pass(kind, weights, queries, keys), 2]
        found[2] -= 1
        if not found[2]:  # both have it
            del self.done[kind, layer]
        return found

    def _pass(self, kind: str, weights: np.ndarray, queries, keys) -> tuple[np.ndarray, np.ndarray]:
        n = weights.shape[-1]
        rolled = kind != "cross" and n > self.longer_than
        bounds = edges(n, factor(n, self.cells))
        sizes = np.diff(bounds)  # positions in each block
        carried = self.carried.get(kind)
        if rolled and carried is None:  # R_0 = I, so R_0 S = S
            carried = torch.from_numpy(np.repeat(np.eye(len(sizes), dtype=np.float32), sizes, axis=0))  # (T, t)
        rows, carried = one_pass(weights, keys, kind == "decoder_self", carried if rolled else None)
        statistics = _statistics(weights, keys, queries if kind != "cross" else None, rows)
        if carried is None:
            return statistics, np.empty(0, np.float32)
        self.carried[kind] = carried
        sums = np.add.reduceat(carried.numpy(), bounds[:-1], axis=0, dtype=np.float64)  # (t, t) block sums
        return statistics, (sums / (sizes[:, None] * sizes[None, :])).astype(np.float32)
