"""What the pages read of every layer's attention, reduced while a run holds the layer (explorer.run.layers.Reductions),
so that no layer of a long text is recomputed for them: the model view's thumbnails, each query row's largest counted
weight (the opening head's link), each head's statistics (analysis.STATISTICS) and the attention rollout's block
means (analysis.rollout, as a long map's overview draws it), carried up the layers.

All come from one pass over the layer, a block of query rows at a time in float32: the block is read from
memory once and stays in the processor's cache while every sum is taken from it (analysis.head_statistics passes
over the whole (H, T, T) layer in float64 once per statistic: about 1 s a layer at 2,048 tokens). They agree with
analysis's functions of the whole layers to float32 rounding (tests/explorer/test_reducers.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import threadpoolctl
import torch

from attention_explorer.explorer.run import analysis, device_reducers
from attention_explorer.explorer.run.blocks import THUMBNAIL, block_sums, edges, factor
from attention_explorer.models.induction import induction_targets

# numpy's own matrix products (OpenBLAS) on one thread each: one_pass's threads each make hundreds of small products a
# layer, and an OpenBLAS that splits each over two threads of its own makes them wait for each other (a layer's pass
# took longer on two threads than on one) and spins on the cores torch's products need. Process-wide: torch does
# this project's large products, with its own library.
threadpoolctl.ThreadpoolController().select(internal_api="openblas").limit(limits=1)
THREADS = min(2, os.cpu_count() or 1)  # one_pass's threads: the two cores CI and this machine have
# query rows from which a layer's blocks are shared between threads: below, each operation is so short that the threads
# mostly wait for the interpreter's lock (one thread was as fast at 512 tokens, two 20% faster at 1,024)
THREADED = 1024
# query rows a block: (H, 16, T) float32 is 1.2 MB at 2,048 tokens and 9 heads, within a core's cache (more rows a
# block were no faster on shorter texts: 64 rows took 9.6 ms a layer of 512 tokens, 16 rows 8.6)
ROWS = 16
MIXED = 256  # rows a block of the rollout's matrix product
# the devices whose layers one_pass reads as numpy (the run's own memory, no copy): on two busy cores its blocks in
# cache and its threads ran faster than torch's operations (device_reducers) on the same layer
HOST = ("cpu",)
NAMES = tuple(analysis.STATISTICS)  # the order of a reduced layer's rows
ROW = ("entropy", "distance", "cls", "sep", "punctuation")  # one_pass's sums of each query row
TINY = float(np.finfo(np.float32).tiny)  # log(max(w, TINY)): finite where w is 0, and 0 * finite = 0 log 0 = 0
# the columns of a block's one product with the keys: the three key shares, each row's sum, and distance
SHARES, SUM, OFFSET = slice(0, 3), 3, 4


@functools.lru_cache(maxsize=4)
def _columns(keys: tuple[str, ...]) -> np.ndarray:
    """(5, Tk) float32: 1 at the first position (its start marker, or its first token: analysis.marker_names), where
    a key is an end marker, punctuation; 1; and (filled per block) the key's distance back from the block's first
    row. One text's for every layer of a run."""
    wanted = (analysis.ENDS.__contains__, analysis.is_punctuation)
    marks = [[float(j == 0) for j in range(len(keys))], *([float(test(key)) for key in keys] for test in wanted)]
    return np.array([*marks, [1.0] * len(keys), [0.0] * len(keys)], np.float32)


@functools.lru_cache(maxsize=2)  # a text of one repeated token has T^2 / 2 targets (32 MB at 2,048): hold few
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


@dataclass(frozen=True)
class Pass:
    """What one_pass read of one layer."""

    rows: np.ndarray  # (H, Tq, ROW) each query row's sums
    mixed: np.ndarray | None  # `carried` multiplied by the layer's residual-mixed attention, or None
    cell_sums: np.ndarray | None  # (H, tq, tk) float64: the weights' sums in each cell of `cells`, or None
    row_max: np.ndarray | None  # (H, Tq) each row's largest weight where `allowed`, 0 where none is; or None


def one_pass(
    weights: np.ndarray,
    keys: Sequence[str],
    causal: bool = False,
    carried: np.ndarray | None = None,
    summed: np.ndarray | None = None,
    cells: tuple[int, int] | None = None,
    allowed: np.ndarray | None = None,
) -> Pass:
    """One layer (H, Tq, Tk) read once, a block of ROWS query rows at a time (from THREADED rows, the blocks shared
    between THREADS threads): each query row's sums (-w log w, w |i - j|, and w on start markers, end markers and
    punctuation); `carried` (T, n) multiplied by the layer's residual-mixed attention M (analysis.residual_mixed); with
    `cells` (f_q, f_k), the sums over each block of f_q queries by f_k keys (blocks.block_means's; a thumbnail's); with
    `allowed` (Tq, Tk) bool, each row's largest allowed weight (starting's link). `causal`: every weight beyond a
    query's own position is 0 (a decoder's masked self-attention: softmax of finfo.min) and adds nothing to any sum,
    so a block reads only the keys up to its last row. `summed`: a (T, T) float32 buffer for the sum over heads, zeros
    where a causal block reads no key (kept from layer to layer: a new 16 MB buffer costs its pages).
    numpy: hundreds of small operations a layer, each of which would wait for a second thread (torch's) that a busy
    machine may not give it (ten times slower at a load of 10 on two cores); instead each of THREADS threads takes
    every THREADS-th block (numpy lets go of the interpreter's lock inside each operation) and no thread waits for
    another until the layer is done."""
    n_heads, tq, tk = weights.shape
    if len(keys) != tk:
        raise ValueError(f"{len(keys)} key tokens for {tk} keys")
    w = np.asarray(weights, np.float32)  # (H, Tq, Tk): the run's own, no copy
    columns = _columns(tuple(keys))  # (5, Tk)
    sums = np.empty((n_heads, len(columns), tq), np.float32)  # each row's product with the columns
    entropy = np.empty((n_heads, tq), np.float32)
    distance = np.empty((n_heads, tq), np.float32)
    row_max = None if allowed is None else np.empty((n_heads, tq), np.float32)
    if carried is not None and summed is None:
        summed = np.zeros((tq, tk), np.float32)  # the sum over heads, for the rollout
    positions = np.arange(tk, dtype=np.float32)

    f_q = 0 if cells is None else cells[0]

    def blocks(firsts: range) -> np.ndarray | None:
        """The blocks starting at `firsts`; the sums of their query rows in each block of f_q rows (H, tq, Tk)."""
        own = columns.copy()  # its distance row is rewritten for each block
        # zeros where a causal block reads no key; one each thread (two threads' blocks share a cell's rows)
        row_sums = None if cells is None else np.zeros((n_heads, -(-tq // f_q), tk), np.float32)
        scratch = np.empty((n_heads, min(ROWS, tq), tk), np.float32)
        for first in firsts:
            last = min(tq, first + ROWS)
            width = min(tk, last) if causal else tk
            block = w[:, first:last, :width]  # (H, C, K): read from memory here, from the cache after
            logs = scratch[:, : last - first, :width]
            if row_max is not None:  # weights are >= 0: weight x allowed keeps the allowed ones, zeroes the rest
                np.multiply(block, allowed[first:last, :width], out=logs)
                logs.max(axis=-1, out=row_max[:, first:last], initial=0.0)
            np.log(np.maximum(block, TINY, out=logs), out=logs)
            np.einsum("hck,hck->hc", block, logs, out=entropy[:, first:last])  # sum of w log w: one pass, not two
            if causal:  # |i - j| = (i - first) + (first - j) for j <= i: the second a column of the product, so no
                # cancellation between two sums as large as i
                np.subtract(first, positions[:width], out=own[OFFSET, :width])
            else:
                far = np.abs(np.arange(first, last, dtype=np.float32)[:, None] - positions)  # (C, K) |i - j|
                np.multiply(block, far, out=logs).sum(-1, out=distance[:, first:last])
            np.matmul(own[:, :width], block.transpose(0, 2, 1), out=sums[:, :, first:last])  # (H, 5, C)
            if row_sums is not None:  # summed over the rows in each cell first: along whole rows, in cache
                for cell in range(first // f_q, (last - 1) // f_q + 1):
                    start, stop = max(first, cell * f_q) - first, min(last, (cell + 1) * f_q) - first
                    into = row_sums[:, cell, :width]
                    np.add(into, block[:, start:stop].sum(1), out=into)
            if carried is not None:
                block.sum(0, out=summed[first:last, :width])
        return row_sums

    firsts = range(0, tq, ROWS)
    parts = [firsts[i::THREADS] for i in range(THREADS)] if tq >= THREADED else [firsts]
    waiting = [_pool().submit(blocks, part) for part in parts[1:]]
    row_sums = blocks(parts[0])
    for future in waiting:
        found = future.result()
        if row_sums is not None:
            row_sums += found
    cell_sums = None if cells is None else block_sums(row_sums, cells[1], -1)  # (H, tq, tk) float64
    if causal:
        distance = sums[:, OFFSET] + (np.arange(tq) % ROWS) * sums[:, SUM]  # + (i - first) * the row's sum
    rows = np.stack([-entropy, distance, *sums[:, SHARES].transpose(1, 0, 2)], axis=-1)  # (H, Tq, ROW)
    if carried is None:
        return Pass(rows, None, cell_sums, row_max)
    # M = (0.5 mean + 0.5 I) / its rows' sums, times carried: in blocks of MIXED rows (a matrix product's own size)
    totals = 0.5 * sums[:, SUM].sum(0) / n_heads + 0.5  # (T,) the mixed rows' sums
    mixed = np.empty_like(carried)
    for first in range(0, tq, MIXED):
        last = min(tq, first + MIXED)
        width = min(tk, last) if causal else tk
        # torch's product (MKL): eight calls a layer at 2,048 tokens, and numpy's (OpenBLAS) took ten times as long on a
        # busy machine
        product = (torch.from_numpy(summed[first:last, :width]) @ torch.from_numpy(carried[:width])).numpy()  # (C, n)
        mixed[first:last] = (product * (0.5 / n_heads) + 0.5 * carried[first:last]) / totals[first:last, None]
    return Pass(rows, mixed, cell_sums, row_max)


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The threads one_pass shares its blocks with (one fewer than THREADS: the caller takes a part itself)."""
    return ThreadPoolExecutor(max(1, THREADS - 1), thread_name_prefix="reduce")


def layer_statistics(
    weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None = None, causal: bool = False
) -> np.ndarray:
    """analysis.head_statistics of one layer (H, Tq, Tk) -> (len(NAMES), H) float64, rows in NAMES' order (one_pass;
    `causal` as there, `queries` as for head_statistics)."""
    return _statistics(weights, keys, queries, one_pass(weights, keys, causal).rows)


def _statistics(weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None, rows: np.ndarray):
    """The statistics from one_pass's row sums (H, Tq, ROW), the diagonals and the induction targets."""
    means = rows.mean(axis=1, dtype=np.float64)  # (H, ROW): over every query row
    found = {name: means[:, i] for i, name in enumerate(ROW)}
    found |= {name: _diagonal_share(weights, offset) for name, offset in (("previous", -1), ("next", 1), ("self", 0))}
    self_attention = queries is not None and tuple(queries) == tuple(keys)
    found["induction"] = _induction(weights, keys) if self_attention else np.full(weights.shape[0], np.nan)
    return np.stack([found[name] for name in NAMES])


def as_statistics(reduced: np.ndarray) -> dict[str, np.ndarray]:
    """Every layer's layer_statistics (L, len(NAMES), H) -> {name: (L, H)}, as analysis.head_statistics returns."""
    return {name: reduced[:, i] for i, name in enumerate(NAMES)}


# the reducers an Analysis makes from its one pass over each layer, in the order a run gives each layer to them
WANTED = ("statistics", "rollout")


class Analysis:
    """The pages' reducers for one run, all from one one_pass over each layer (made when the first of them is given
    the layer; they are given the layers of each kind in order): `statistics` (layer_statistics); past `longer_than`
    tokens, `rollout`, the block means of the rollout through each layer (analysis.rollout), at most `cells` x `cells`,
    factor(T, cells) positions a side, as blocks.block_means of the whole rollout (it carries each kind's rollout from
    layer to layer); with "thumbnails" wanted, `thumbnails` (blocks.thumbnails, at most `thumbnail` cells a side);
    given `allowed` (kind, queries, keys) -> (Tq, Tk) bool, `row_max`: each row's largest allowed weight.
    `wanted`: which of these a run asks for (each is asked once a layer).

    The rollout through layer l is R_l = M_l R_{l-1}; its block sums over keys, R_l S (S the (T, t) indicator of
    each key's block), are M_l (R_{l-1} S): a (T, t) matrix carried up the layers costs T^2 t a layer, where the
    whole rollout costs T^3. Self-attention only (cross-attention's queries are not its keys)."""

    def __init__(
        self,
        cells: int,
        longer_than: int,
        wanted: Sequence[str] = WANTED,
        thumbnail: int = THUMBNAIL,
        allowed: Callable[[str, Sequence[str], Sequence[str]], np.ndarray] | None = None,
    ) -> None:
        if "row_max" in wanted and allowed is None:
            raise ValueError("row_max needs `allowed`")
        self.cells, self.longer_than, self.wanted, self.thumbnail = cells, longer_than, tuple(wanted), thumbnail
        self.allowed = allowed
        self.carried: dict[str, np.ndarray] = {}  # by kind: R_{l-1} S, (T, t) float32
        self.summed: dict[str, np.ndarray] = {}  # by kind: one_pass's buffer for the sum over heads
        self.asked: dict[tuple[str, str], int] = {}  # (reducer, kind): the layers it has been given
        self.done: dict[tuple[str, int], tuple[dict, set]] = {}  # (kind, layer): (results, reducers yet to ask)
        self.on_device: dict[str, torch.Tensor] = {}  # by kind: `allowed` on the run's device

    def statistics(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        return self._reduced("statistics", kind, weights, queries, keys)

    def rollout(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """(t, t) float32 block means; an empty array where the rollout is not reduced."""
        return self._reduced("rollout", kind, weights, queries, keys)

    def thumbnails(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """(H, tq, tk) float32: blocks.thumbnails of the layer."""
        return self._reduced("thumbnails", kind, weights, queries, keys)

    def row_max(self, kind: str, weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> np.ndarray:
        """(H, Tq): each query row's largest weight where `allowed`, 0 where none is."""
        return self._reduced("row_max", kind, weights, queries, keys)

    def _reduced(self, name: str, kind: str, weights: np.ndarray, queries, keys) -> np.ndarray:
        if name not in self.wanted:
            raise ValueError(f"{name} is not among the reducers this Analysis was made for: {self.wanted}")
        layer = self.asked[name, kind] = self.asked.get((name, kind), -1) + 1
        found = self.done.get((kind, layer))
        if found is None:
            found = self.done[kind, layer] = (self._pass(kind, weights, queries, keys), set(self.wanted))
        found[1].discard(name)
        if not found[1]:  # every reducer has it
            del self.done[kind, layer]
        return found[0][name]

    def _plan(self, kind: str, shape) -> tuple:
        """What a layer of this shape (..., Tq, Tk) is reduced to, the same on the CPU and on a device: (Tq, Tk,
        whether its rollout is carried, the overview's block edges and sizes, the thumbnail's factors, whether the
        thumbnail sums cells: a short map is its own thumbnail)."""
        tq, n = shape[-2:]
        rolled = "rollout" in self.wanted and kind != "cross" and n > self.longer_than
        bounds = edges(n, factor(n, self.cells))
        factors = factor(tq, self.thumbnail), factor(n, self.thumbnail)
        summed_keys = "thumbnails" in self.wanted and factors[0] * factors[1] > 1
        return tq, n, rolled, bounds, np.diff(bounds), factors, summed_keys

    def _pass(self, kind: str, weights: np.ndarray | torch.Tensor, queries, keys) -> dict[str, np.ndarray]:
        if isinstance(weights, torch.Tensor):
            if weights.device.type not in HOST:  # reduced where the run made it; only the results come back
                return self._device_pass(kind, weights, queries, keys)
            weights = weights.detach().numpy()  # the run's own memory, no copy: one_pass is tuned for the CPU
        tq, n, rolled, bounds, sizes, (f_q, f_k), summed_keys = self._plan(kind, weights.shape)
        carried = self.carried.get(kind)
        if rolled and carried is None:  # R_0 = I, so R_0 S = S
            carried = np.repeat(np.eye(len(sizes), dtype=np.float32), sizes, axis=0)  # (T, t)
        if rolled and kind not in self.summed:
            self.summed[kind] = np.zeros(weights.shape[-2:], np.float32)
        found = one_pass(
            weights,
            keys,
            kind == "decoder_self",
            carried if rolled else None,
            self.summed.get(kind),
            (f_q, f_k) if summed_keys else None,
            self.allowed(kind, queries, keys) if "row_max" in self.wanted else None,
        )
        done = {"statistics": _statistics(weights, keys, queries if kind != "cross" else None, found.rows)}
        done["row_max"] = found.row_max
        if "thumbnails" in self.wanted:
            summed = _thumbnails(found.cell_sums, tq, n, f_q, f_k) if summed_keys else None
            done["thumbnails"] = weights.astype(np.float32) if summed is None else summed
        if found.mixed is None:
            done["rollout"] = np.empty(0, np.float32)
            return done
        self.carried[kind] = found.mixed
        sums = np.add.reduceat(found.mixed, bounds[:-1], axis=0, dtype=np.float64)  # (t, t) block sums
        done["rollout"] = (sums / (sizes[:, None] * sizes[None, :])).astype(np.float32)
        return done

    def _device_pass(self, kind: str, weights: torch.Tensor, queries, keys) -> dict[str, np.ndarray]:
        """_pass on the layer's own device (device_reducers.one_pass): the same results, each copied back once."""
        tq, n, rolled, bounds, sizes, (f_q, f_k), summed_keys = self._plan(kind, weights.shape)
        carried = self.carried.get(kind)
        if rolled and carried is None:  # R_0 = I, so R_0 S = S
            carried = torch.from_numpy(np.repeat(np.eye(len(sizes), dtype=np.float32), sizes, axis=0))
            carried = carried.to(weights.device)  # (T, t), kept there from layer to layer
        allowed = None
        if "row_max" in self.wanted:  # (Tq, Tk) bool, the same every layer: copied to the device once a kind
            allowed = self.on_device.get(kind)
            if allowed is None:
                allowed = self.on_device[kind] = torch.tensor(self.allowed(kind, queries, keys), device=weights.device)
        found = device_reducers.one_pass(
            weights,
            keys,
            kind == "decoder_self",
            carried if rolled else None,
            (f_q, f_k) if summed_keys else None,
            allowed,
        )
        stats = device_reducers.statistics(weights, keys, queries if kind != "cross" else None, found.rows)
        done = {"statistics": device_reducers.moved(stats), "row_max": None}
        if found.row_max is not None:
            done["row_max"] = device_reducers.moved(found.row_max)
        if "thumbnails" in self.wanted:
            if summed_keys:
                done["thumbnails"] = _thumbnails(device_reducers.moved(found.cell_sums), tq, n, f_q, f_k)
            else:  # a short map is its own thumbnail: at most THUMBNAIL x THUMBNAIL a head
                done["thumbnails"] = device_reducers.moved(weights.float())
        if found.mixed is None:
            done["rollout"] = np.empty(0, np.float32)
            return done
        self.carried[kind] = found.mixed
        sums = device_reducers.moved(device_reducers.block_sums(found.mixed.T, int(sizes[0])).T)  # (t, t) block sums
        done["rollout"] = (sums / (sizes[:, None] * sizes[None, :])).astype(np.float32)
        return done


def _thumbnails(cell_sums: np.ndarray, tq: int, tk: int, f_q: int, f_k: int) -> np.ndarray:
    """blocks.thumbnails from the sums in each cell of f_q queries by f_k keys (H, tq cells, tk cells): over each
    cell's count of weights."""
    counts = np.diff(edges(tq, f_q))[:, None] * np.diff(edges(tk, f_k))[None, :]
    return (cell_sums / counts).astype(np.float32)
