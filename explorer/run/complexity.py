"""The paper's table 1 (section 4, "Why self-attention") for one sentence: each layer type's complexity per layer,
sequential operations and maximum path length, as the formula and its value for n tokens of d_model numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attention_explorer.models.anatomy import describe
from attention_explorer.models.config import TransformerConfig

KERNEL = 3  # k: the convolution's kernel width (the smallest that sees both neighbours)
NEIGHBOURHOOD = 4  # r: the tokens a restricted self-attention looks at (a small window, as the paper leaves open)
SELF, RECURRENT, SAME = "self-attention", "recurrent", "same"


@dataclass(frozen=True)
class Row:
    """One layer type of table 1: each column's formula (as the paper writes it, O() dropped) and its value."""

    layer: str
    complexity: str
    operations: int  # per layer, constants dropped as in the paper
    sequential: str
    sequential_steps: int
    path: str
    path_length: float


def self_attention_ops(n: int, d: int) -> int:
    """n^2 d: every one of n queries against n keys, d numbers each."""
    return n * n * d


def recurrent_ops(n: int, d: int) -> int:
    """n d^2: one d x d matrix product per position."""
    return n * d * d


def table(n: int, d: int, k: int = KERNEL, r: int = NEIGHBOURHOOD) -> list[Row]:
    """Table 1 for n tokens and d = d_model: self-attention, recurrent, convolutional (kernel k, dilated: the
    path is log_k(n)) and restricted self-attention (a neighbourhood of r)."""
    if n < 1 or d < 1 or k < 2 or r < 1:
        raise ValueError(f"need n >= 1, d >= 1, k >= 2, r >= 1; got n={n}, d={d}, k={k}, r={r}")
    return [
        Row("Self-attention", "n²·d", self_attention_ops(n, d), "1", 1, "1", 1.0),
        Row("Recurrent", "n·d²", recurrent_ops(n, d), "n", n, "n", float(n)),
        Row(f"Convolutional (k = {k})", "k·n·d²", k * n * d * d, "1", 1, "log_k(n)", math.log(n, k)),
        Row(f"Self-attention, restricted (r = {r})", "r·n·d", r * n * d, "1", 1, "n/r", n / r),
    ]


def fewer(n: int, d: int) -> str:
    """Which layer does fewer operations for n tokens: self-attention while n < d, recurrent past it, same at n = d."""
    return SELF if n < d else RECURRENT if n > d else SAME


def curves(d: int, n_max: int, points: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, n^2 d, n d^2) from n = 1 to n_max, spaced evenly on a log axis, for the operations-against-n figure."""
    n = np.unique(np.round(np.geomspace(1, n_max, points)).astype(np.int64))
    return n, n * n * d, n * d * d


def axis_end(n: int, d: int, max_len: int) -> int:
    """Where the figure's n axis ends: a power of ten past the crossover (n = d), the sentence and the model's limit."""
    return 10 ** math.ceil(math.log10(max(4 * d, 2 * n, max_len, 10)))


@dataclass(frozen=True)
class Matrix:
    """A weight matrix each position is multiplied by: its name and shape (rows: what it reads, columns: what it
    writes)."""

    name: str
    rows: int
    cols: int


def position_matrices(config: TransformerConfig) -> list[Matrix]:
    """The matrices one self-attention layer and its feed-forward multiply every position by, from the config: W^Q and
    W^O d x d, W^K and W^V d x (key/value heads x d_head) (d x d without grouped-query attention), and the
    feed-forward's two (eq. 2) or, gated (SwiGLU), three."""
    block = describe(config)
    d, kv = config.d_model, block.kv_heads * config.d_head
    found = [Matrix("W^Q", d, d), Matrix("W^K", d, kv), Matrix("W^V", d, kv), Matrix("W^O", d, d)]
    if block.ffn.gated:
        found += [Matrix("W_gate", d, config.d_ff), Matrix("W_up", d, config.d_ff)]
        return [*found, Matrix("W_down", config.d_ff, d)]
    return [*found, Matrix("W_1", d, config.d_ff), Matrix("W_2", config.d_ff, d)]


def position_ops(config: TransformerConfig) -> int:
    """Multiply-adds per position for one layer's matrices (position_matrices; biases and norms left out)."""
    return sum(m.rows * m.cols for m in position_matrices(config))


def left_out(config: TransformerConfig) -> str:
    """What table 1 leaves out, in this model's own shapes: the matrices each token goes through in every layer of the
    stack the page reads (the encoder's, or a decoder-only model's), and their multiply-adds against d^2."""
    d = config.d_model
    shown = {m.name: f"{m.name} ({m.rows} x {m.cols})" for m in position_matrices(config)}
    block = describe(config)
    if block.shared_kv:
        kv = block.kv_heads * config.d_head
        shown["W^K"] = (
            f"W^K and W^V ({d} x {kv} each: grouped-query attention, {block.n_heads} query heads sharing "
            f"{block.kv_heads} key/value heads)"
        )
        del shown["W^V"]
    gated = block.ffn.gated
    ffn = [v for k, v in shown.items() if not k.startswith("W^")]
    attention = [v for k, v in shown.items() if k.startswith("W^")]
    kind = "three matrices (gated, SwiGLU)" if gated else "two matrices (eq. 2)"
    ops = position_ops(config)
    layer = (
        "encoder layer" if config.is_encoder_decoder else "decoder layer" if config.n_encoder_layers == 0 else "layer"
    )
    cross = " (a decoder layer adds its cross-attention's own four)" if config.is_encoder_decoder else ""
    return (
        f"What the table leaves out: every {layer} of this model also multiplies each token by "
        f"{', '.join(attention)} and the feed-forward's {kind}, {', '.join(ffn)}{cross}: {ops:,} multiply-adds a "
        f"token, {ops / d**2:.3g}·d², so n·{ops / d**2:.3g}·d² of its own; the table compares only the part that "
        "mixes positions."
    )
