"""Scaled dot-product and multi-head attention that return their internals (Vaswani et al. 2017, 3.2)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor, nn

from attention_explorer.models.positional import RotaryPositions

# Shape vocabulary, used in every comment that reshapes and every jaxtyping annotation:
#   B batch, H heads, Tq queries, Tk keys, D d_model, Dh d_head = D / H,
#   S source length, T target length (or any one sequence's), V vocabulary, N tokens generated, L layers


@dataclass(frozen=True)
class AttentionInternals:
    """Everything one multi-head attention call computed, returned instead of stored on the module."""

    q: Float[Tensor, "B H Tq Dh"]  # after rotation, where the model has rotary positions
    k: Float[Tensor, "B H Tk Dh"]  # the keys each query head reads (a shared key/value head's, repeated)
    v: Float[Tensor, "B H Tk Dh"]
    raw_scores: Float[Tensor, "B H Tq Tk"] | None  # q k^T, before the 1/sqrt(d_k) scaling (None: raw_scores_dropped)
    mask: Bool[Tensor, "#B 1 #Tq Tk"] | None  # True where a key may be seen
    weights: Float[Tensor, "B H Tq Tk"]  # softmax over keys of the scaled, masked scores; rows sum to 1
    heads: Float[Tensor, "B H Tq Dh"]  # weights @ v, before concat and W_O
    output: Float[Tensor, "B Tq D"]  # Concat(head_1..head_h) W_O
    kv_heads: int = 0  # key/value heads (grouped-query attention: fewer than the query heads); 0 = one per query head
    q_unrotated: Float[Tensor, "B H Tq Dh"] | None = None  # rotary models: q and k before they were turned
    k_unrotated: Float[Tensor, "B H Tk Dh"] | None = None
    # QK-norm (Gemma 3, Qwen3): q and k as W_Q and W_K wrote them, before each head's RMSNorm (None: no QK-norm);
    # q_unrotated / k_unrotated are then after the norm and before rotary
    q_before_norm: Float[Tensor, "B H Tq Dh"] | None = None
    k_before_norm: Float[Tensor, "B H Tk Dh"] | None = None
    scaling: float | None = None  # the scores' factor when it is not 1/sqrt(d_k) (Gemma's query_pre_attn_scalar)
    window: int | None = None  # a sliding window of keys (a local layer): `mask` already hides the keys outside it

    @property
    def scaled_scores(self) -> Float[Tensor, "B H Tq Tk"]:
        """q k^T / sqrt(d_k), by the same operation the forward used, so bit-identical to what softmax saw."""
        return scale(self.raw_scores, self.q.size(-1), self.scaling)


@dataclass(frozen=True)
class HeadPatch:
    """Heads of one attention layer whose output is replaced before W_O: `off` is True where a batch row's head is
    replaced, at every position (B, H) or at the positions marked (B, H, T); `value` is what it writes instead: one
    vector a head at every position (its mean output: mean ablation), one a head and position (H, T, Dh: its output
    on another run, resample ablation and activation patching), or None for zero. Passed to a forward by value: the
    shared model never holds it."""

    off: Bool[Tensor, "#B H"] | Bool[Tensor, "#B H T"]
    value: Float[Tensor, "H Dh"] | Float[Tensor, "H T Dh"] | None = None

    def apply(self, heads: Float[Tensor, "B H Tq Dh"], offset: int = 0) -> Float[Tensor, "B H Tq Dh"]:
        """The heads' outputs with the replaced ones replaced; `offset`: the position of the first query row (a
        window, or one decoding step), where `off` or `value` is given per position."""
        tq = heads.size(2)
        # (B, H, 1, 1) for every position, or (B, H, Tq, 1) those rows' own
        off = self.off[:, :, None, None] if self.off.dim() == 2 else self.off[:, :, offset : offset + tq, None]
        off = off.to(heads.device)  # a patch made on the CPU for a model on a GPU (on the CPU: itself)
        if self.value is None:
            return heads.masked_fill(off, 0.0)
        # (1, H, 1, Dh) one a head, or (1, H, Tq, Dh) those rows' own
        value = self.value[None, :, None, :] if self.value.dim() == 2 else self.value[None, :, offset : offset + tq]
        return torch.where(off, value.to(heads.device, heads.dtype), heads)  # (B, H, Tq, Dh)


def scale(raw_scores: Tensor, d_head: int, scaling: float | None = None) -> Tensor:
    """Divide by sqrt(d_k), eq. (1): keeps the dot products' variance near 1 so softmax is not saturated. `scaling`:
    a model's own factor instead (Gemma: query_pre_attn_scalar^-1/2)."""
    # times d_k^-1/2 rather than / sqrt(d_k): equal in exact arithmetic, and it rounds as the BERT reference does
    return raw_scores * (d_head**-0.5 if scaling is None else scaling)


def window_mask(
    offset: int, n_queries: int, n_keys: int, window: int, device: torch.device | None = None
) -> Bool[Tensor, "1 1 Tq Tk"]:
    """A sliding window of `window` keys: query i (at position offset + row) may see key j only when i - w < j, as
    transformers' sliding_window_overlay masks it (the causal mask adds j <= i)."""
    queries = torch.arange(offset, offset + n_queries, device=device)[:, None]  # (Tq, 1)
    keys = torch.arange(n_keys, device=device)[None, :]  # (1, Tk)
    return (keys > queries - window)[None, None]  # (1, 1, Tq, Tk)


# False while a run keeps no layer's attention (explorer.run.trace.run on a text too long to keep every layer): the
# layers' internals then carry no raw scores (None), and q k^T is scaled in place
_KEEP_RAW = contextvars.ContextVar("keep_raw_scores", default=True)


@contextlib.contextmanager
def raw_scores_dropped() -> Iterator[None]:
    """Within it, attention layers keep no raw scores (AttentionInternals.raw_scores is None); the weights are the
    same, bit for bit."""
    token = _KEEP_RAW.set(False)
    try:
        yield
    finally:
        _KEEP_RAW.reset(token)


def scaled_dot_product_attention(
    q: Float[Tensor, "B H Tq Dh"],
    k: Float[Tensor, "B H Tk Dh"],
    v: Float[Tensor, "B H Tk Dh"],
    mask: Bool[Tensor, "#B #H #Tq Tk"] | None = None,
    scaling: float | None = None,
) -> tuple[Float[Tensor, "B H Tq Dh"], Float[Tensor, "B H Tq Tk"] | None, Float[Tensor, "B H Tq Tk"]]:
    """softmax(Q K^T / sqrt(d_k)) V, eq. (1). mask: True where a key may be seen; scaling: a factor other than
    1/sqrt(d_k). Returns (out, raw, weights); raw is None within raw_scores_dropped."""
    raw_scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
    if _KEEP_RAW.get():
        scores = scale(raw_scores, q.size(-1), scaling)
    else:  # the same product, in place: no second array of scores (151 MB a layer for SmolLM2 at 2,048 tokens)
        scores, raw_scores = raw_scores.mul_(q.size(-1) ** -0.5 if scaling is None else scaling), None
    # a mask that hides nothing (one unpadded sentence) would change no score: skip the pass over all of them
    if mask is not None and not bool(mask.all()):
        # finfo.min, not -inf: a fully masked row stays finite instead of becoming NaN. In place: `scores` is scale's
        # new tensor, and a long text's scores are 151 MB a layer (SmolLM2 at 2,048 tokens) whose every new copy costs
        # its memory pages as well as a pass
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (B, H, Tq, Tk)
    return weights @ v, raw_scores, weights  # (B, H, Tq, Dh)


# False within dense_windows(): every sliding-window layer takes the dense masked path, as transformers computes it
_BAND = contextvars.ContextVar("band_windows", default=True)


@contextlib.contextmanager
def dense_windows() -> Iterator[None]:
    """Within it, sliding-window layers are never computed on their band (banded): every run scores every (query,
    key) pair and masks those outside the window, so its weights are transformers' eager ones bit for bit, at n^2
    cost (the band's differ by float32 sums taken in another order: README, "Numbers")."""
    token = _BAND.set(False)
    try:
        yield
    finally:
        _BAND.reset(token)


# The band is taken over more than this many windows of queries and keys: up to two, its blocks score 3/4 of the
# pairs and its bookkeeping (the (H, T, T) weights written block by block) eats the saving (Gemma 3 at 1,024 tokens,
# one local layer: 1.15-1.25x the dense path's time; at 2,048, 0.6-0.8x; `python -m bench window`)
BAND_WINDOWS = 2


def banded(window: int | None, n_queries: int, n_keys: int) -> bool:
    """Whether a layer's attention is computed on its band only (banded_attention): a sliding-window layer over more
    than BAND_WINDOWS windows of queries and keys, in a run that keeps no raw scores (raw_scores_dropped: a long
    text's first run, the corpus, patching's reads), outside dense_windows. Where the raw scores are kept (a layer
    recomputed for a view), their whole (H, Tq, Tk) is kept anyway, and the dense path's numbers are transformers'
    bit for bit; the band's differ from them by the reordered sums of the softmax and of weights @ v only."""
    if window is None or min(n_queries, n_keys) <= BAND_WINDOWS * window:
        return False
    return not _KEEP_RAW.get() and _BAND.get()


def banded_attention(
    q: Float[Tensor, "B H Tq Dh"],
    k: Float[Tensor, "B H Tk Dh"],
    v: Float[Tensor, "B H Tk Dh"],
    mask: Bool[Tensor, "#B #H #Tq Tk"] | None,
    window: int,
    offset: int = 0,
    scaling: float | None = None,
) -> tuple[Float[Tensor, "B H Tq Dh"], Float[Tensor, "B H Tq Tk"] | None, Float[Tensor, "B H Tq Tk"]]:
    """eq. (1) on a sliding-window layer, computed on the band only: query blocks of `window` rows, each against the
    keys its window can reach (positions p0 - w + 1 .. p1 - 1 for rows at positions p0 .. p1 - 1), so the scores,
    their softmax and weights @ v cost n * w, not n^2 (explorer/run/cost.band_blocks counts them). `mask`: as
    scaled_dot_product_attention's, already narrowed to the window (None: the window alone); a block holding a row
    that sees no key (padding) is scored against every key, as the dense path's uniform row. The weights come back in
    the full (B, H, Tq, Tk) layout, zero outside the band, exactly where the dense path's softmax gives
    exp(finfo.min - max) = 0. Returns (out, raw, weights) as scaled_dot_product_attention; raw (kept outside
    raw_scores_dropped) is the whole q k^T, which views read, and the band's scores are its slices."""
    b, h, tq, _ = q.shape
    tk = k.size(-2)
    if mask is None:  # the window alone (no causal mask): each block reads to the last key
        mask = window_mask(offset, tq, tk, window, q.device)  # (1, 1, Tq, Tk)
    factor = q.size(-1) ** -0.5 if scaling is None else scaling
    raw_scores = q @ k.transpose(-2, -1) if _KEEP_RAW.get() else None  # (B, H, Tq, Tk), views read every pair
    weights = q.new_zeros(b, h, tq, tk)  # (B, H, Tq, Tk): the layout every view reads
    heads = q.new_empty(b, h, tq, v.size(-1))  # (B, H, Tq, Dh)
    for start in range(0, tq, window):
        stop = min(start + window, tq)
        first = max(0, offset + start - window + 1)  # the block's first row's window starts here
        end = tk
        rows = mask[..., start:stop, :] if mask.size(-2) > 1 else mask
        if not bool(rows[..., min(offset + stop, tk) :].any()):  # causal: no key after the block's last row
            end = min(offset + stop, tk)
        if not bool(rows.any(-1).all()):  # a row that sees no key (padding): uniform over every key, as dense
            first, end = 0, tk
        if raw_scores is None:
            scores = (q[:, :, start:stop] @ k[:, :, first:end].transpose(-2, -1)).mul_(factor)  # (B, H, C, Kc)
        else:
            scores = scale(raw_scores[:, :, start:stop, first:end], q.size(-1), scaling)  # the same numbers, as dense
        part = mask[..., start:stop, first:end] if mask.size(-2) > 1 else mask[..., first:end]
        if not bool(part.all()):
            scores.masked_fill_(~part, torch.finfo(scores.dtype).min)  # finfo.min as the dense path
        block = scores.softmax(dim=-1)  # (B, H, C, Kc)
        weights[:, :, start:stop, first:end] = block
        heads[:, :, start:stop] = block @ v[:, :, first:end]  # (B, H, C, Dh)
    return heads, raw_scores, weights


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i); 3.2.2. Today's
    models add, each where their config says: heads of their own width `d_head`, an RMSNorm over each head's q and k
    (`q_norm`, `k_norm`: QK-norm), their own score scale `scaling`, and a sliding `window` of keys (a local layer)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        n_kv_heads: int | None = None,
        qkv_bias: bool = True,
        out_bias: bool = True,
        rotary: RotaryPositions | None = None,
        d_head: int | None = None,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        scaling: float | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        if d_head is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads or n_heads
        self.d_head = d_model // n_heads if d_head is None else d_head
        # all heads' projections in one matrix each; head i owns columns [i*Dh, (i+1)*Dh); grouped-query attention
        # has fewer key/value heads, so W_K and W_V are narrower
        self.w_q = nn.Linear(d_model, n_heads * self.d_head, bias=qkv_bias)
        self.w_k = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=qkv_bias)
        self.w_v = nn.Linear(d_model, self.n_kv_heads * self.d_head, bias=qkv_bias)
        self.w_o = nn.Linear(n_heads * self.d_head, d_model, bias=out_bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary
        self.q_norm, self.k_norm = q_norm, k_norm
        self.scaling = scaling
        self.window = window

    def split_heads(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B H T Dh"]:
        """(B, T, H * Dh) -> (B, H, T, Dh), for any number of heads (query or key/value)."""
        b, t, _ = x.shape
        return x.view(b, t, -1, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def share(self, kv: Float[Tensor, "B Hkv T Dh"]) -> Float[Tensor, "B H T Dh"]:
        """Each key/value head serves n_heads / n_kv_heads query heads in a row: query head h reads kv head
        h // group."""
        group = self.n_heads // self.n_kv_heads
        return kv if group == 1 else kv.repeat_interleave(group, dim=1)  # (B, H, T, Dh)

    def _queries(self, x_q: Tensor, offset: int) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """(q, q before rotation or None, q before QK-norm or None)."""
        written = self.split_heads(self.w_q(x_q))  # (B, H, Tq, Dh)
        q = written if self.q_norm is None else self.q_norm(written)  # QK-norm: each head's q over its Dh
        before = None if self.q_norm is None else written
        return (q, None, before) if self.rotary is None else (self.rotary(q, offset), q, before)

    def queries(self, x_q: Float[Tensor, "B Tq D"], offset: int = 0) -> tuple[Tensor, Tensor | None]:
        """(q, q before rotation or None): the queries of positions offset .. offset + Tq - 1."""
        q, q_unrotated, _ = self._queries(x_q, offset)
        return q, q_unrotated

    def _keys_values(self, x_kv: Tensor, offset: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """(k, v, k before rotation or None, k before QK-norm or None), one per query head."""
        written = self.split_heads(self.w_k(x_kv))  # (B, Hkv, Tk, Dh)
        k = written if self.k_norm is None else self.k_norm(written)  # normed before it is shared and turned
        v = self.share(self.split_heads(self.w_v(x_kv)))  # (B, H, Tk, Dh)
        before = None if self.k_norm is None else self.share(written)
        if self.rotary is None:
            return self.share(k), v, None, before
        return self.share(self.rotary(k, offset)), v, self.share(k), before

    def keys_values(self, x_kv: Float[Tensor, "B Tk D"], offset: int = 0) -> tuple[Tensor, Tensor, Tensor | None]:
        """(k, v, k before rotation or None), one per query head (shared heads repeated)."""
        k, v, k_unrotated, _ = self._keys_values(x_kv, offset)
        return k, v, k_unrotated

    def visible(self, mask: Tensor | None, offset: int, n_queries: int, n_keys: int, device=None) -> Tensor | None:
        """`mask` (True where a key may be seen) narrowed to this layer's sliding window, for queries at positions
        offset .. offset + n_queries - 1 against keys 0 .. n_keys - 1; `mask` itself where the layer is global."""
        if self.window is None:
            return mask
        window = window_mask(offset, n_queries, n_keys, self.window, device)  # (1, 1, Tq, Tk)
        return window if mask is None else mask & window

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, offset: int = 0
    ) -> tuple[Tensor, Tensor | None, Tensor, Tensor | None]:
        """eq. (1) with this layer's scale and window: (heads, raw scores, weights, the mask applied). Every path that
        computes this layer's attention (the forward, a cached decoding step, one row of a long text) goes through
        it, so each reads the same window and scale."""
        mask = self.visible(mask, offset, q.size(-2), k.size(-2), q.device)
        if banded(self.window, q.size(-2), k.size(-2)):
            # a text longer than the window, its raw scores not kept: only the band is scored (n * w), the rest of
            # each row is 0 as masked
            heads, raw_scores, weights = banded_attention(q, k, v, mask, self.window, offset, self.scaling)
            return heads, raw_scores, weights, mask
        heads, raw_scores, weights = scaled_dot_product_attention(q, k, v, mask, self.scaling)
        return heads, raw_scores, weights, mask

    def combine_heads(self, heads: Float[Tensor, "B H Tq Dh"]) -> Float[Tensor, "B Tq D"]:
        """Concat(head_1..head_h) W_O."""
        b, _, tq, _ = heads.shape
        return self.w_o(heads.transpose(1, 2).reshape(b, tq, self.n_heads * self.d_head))  # (B, Tq, D)

    def forward(
        self,
        x_q: Float[Tensor, "B Tq D"],
        x_kv: Float[Tensor, "B Tk D"],
        mask: Bool[Tensor, "#B 1 #Tq Tk"] | None = None,
        patch: HeadPatch | None = None,
        offset: int = 0,
    ) -> tuple[Float[Tensor, "B Tq D"], AttentionInternals]:
        """Self-attention when x_kv is x_q; encoder-decoder attention when x_kv is the encoder memory. `patch`: heads
        turned off, their output replaced before W_O (the returned `heads` are what W_O read). `offset`: the position
        of x_q's first row, when the queries are the last rows of x_kv (a window of a long text)."""
        q, q_unrotated, q_before_norm = self._queries(x_q, offset)  # (B, H, Tq, Dh)
        k, v, k_unrotated, k_before_norm = self._keys_values(x_kv, 0)  # (B, H, Tk, Dh)
        # written out by hand, not F.scaled_dot_product_attention: the fused kernel never builds the weights
        heads, raw_scores, weights, mask = self.attend(q, k, v, mask, offset)
        # dropout on the weights that mix values (identity at inference); the returned weights are pre-dropout
        mixed = self.dropout(weights) @ v if self.training and self.dropout.p > 0 else heads  # (B, H, Tq, Dh)
        if patch is not None:
            heads = mixed = patch.apply(mixed, offset)  # (B, H, Tq, Dh)
        output = self.combine_heads(mixed)  # (B, Tq, D)
        internals = AttentionInternals(
            q,
            k,
            v,
            raw_scores,
            mask,
            weights,
            heads,
            output,
            self.n_kv_heads,
            q_unrotated,
            k_unrotated,
            q_before_norm,
            k_before_norm,
            self.scaling,
            self.window,
        )
        return output, internals
