"""A long attention map read in blocks: each cell the mean of the weights in a block of f positions by f positions
(the model view's thumbnails, a long head's overview). Pure numpy over one layer or one head, so a run can reduce each
layer while it holds it."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

THUMBNAIL = 32  # cells per side, at most, of a head's thumbnail in the model view


def factor(n: int, cells: int) -> int:
    """Positions per block so that n positions make at most `cells` blocks: ceil(n / cells), at least 1."""
    return max(1, -(-n // max(1, cells)))


def edges(n: int, f: int) -> np.ndarray:
    """Block boundaries 0, f, 2f, ..., n: every block holds f positions but the last, which holds what is left."""
    return np.append(np.arange(0, n, f), n)


def block_means(weights: np.ndarray, f_q: int, f_k: int) -> np.ndarray:
    """(..., Tq, Tk) -> (..., ceil(Tq / f_q), ceil(Tk / f_k)) float32: each cell the mean of the weights in its block
    of f_q queries by f_k keys (a masked weight is 0 and counts), summed in float64; f_q = f_k = 1 is the map itself."""
    weights = np.asarray(weights)
    if f_q == f_k == 1:
        return weights.astype(np.float32, copy=False)
    rows, cols = edges(weights.shape[-2], f_q), edges(weights.shape[-1], f_k)
    # rows first: the float64 partial sums are f_q times smaller than the map
    summed = block_sums(block_sums(weights, f_q, -2), f_k, -1)
    counts = np.diff(rows)[:, None] * np.diff(cols)[None, :]  # (tq, tk) weights per block
    return (summed / counts).astype(np.float32)


def block_sums(x: np.ndarray, f: int, axis: int) -> np.ndarray:
    """Sums in float64 over consecutive blocks of f along `axis` (the last block what is left): whole blocks as one
    reshape (a reduceat that casts to float64 was ten times slower), the rest apart."""
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    whole = n // f * f
    parts = [x[..., :whole].reshape(*x.shape[:-1], n // f, f).sum(-1, dtype=np.float64)]
    if whole < n:
        parts.append(x[..., whole:].sum(-1, keepdims=True, dtype=np.float64))
    return np.moveaxis(np.concatenate(parts, axis=-1), -1, axis)


def thumbnails(weights: np.ndarray, cells: int = THUMBNAIL) -> np.ndarray:
    """One layer's heads (H, Tq, Tk) -> (H, tq, tk), at most `cells` x `cells` block means each: the model view's
    thumbnails (factor(Tq, cells) queries by factor(Tk, cells) keys a cell)."""
    t_q, t_k = weights.shape[-2:]
    return block_means(weights, factor(t_q, cells), factor(t_k, cells))


def every_layer(layers: Iterable[np.ndarray], cells: int = THUMBNAIL) -> np.ndarray:
    """Each layer's heads (H, Tq, Tk), one layer at a time, -> (L, H, tq, tk) thumbnails (thumbnails)."""
    return np.stack([thumbnails(weights, cells) for weights in layers])


def fewest_within(n_rows: int, n_cols: int, cells: int) -> tuple[int, int]:
    """Block sizes (rows, columns) for a (n_rows, n_cols) matrix drawn as at most `cells` block means: the fewest
    entries a block (every entry its own cell when the matrix fits), and of blocks as small, the one that averages
    rows (the input dimensions) and keeps columns whole (the head's dimensions, which the strips under it draw)."""
    for size in range(1, n_rows * n_cols + 1):
        for f_r in range(size, 0, -1):
            if size % f_r == 0 and -(-n_rows // f_r) * -(-n_cols // (size // f_r)) <= max(1, cells):
                return f_r, size // f_r
    return n_rows, n_cols
