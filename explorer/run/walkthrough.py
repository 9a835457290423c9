"""One head's computation for one query token, step by step, as named arrays from a trace (no streamlit)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run.trace import Trace

# what the model writes over a masked score before the softmax (models.attention: finfo.min, not -inf, so a
# fully masked row stays finite); the softmax turns it into exactly 0
MASKED = float(np.finfo(np.float32).min)


@dataclass(frozen=True)
class HeadWalkthrough:
    """Eq. (1) for query position `query` of one head: every intermediate, with the model's own numbers."""

    kind: str
    layer: int
    head: int
    query: int
    x_query: np.ndarray  # (D,) the row the query is projected from
    x_query_source: str  # what that row is, in words
    x_keys_source: str  # where keys and values come from, in words
    d_model: int
    d_head: int
    q: np.ndarray  # (Dh,) x W_Q for this head
    k: np.ndarray  # (Tk, Dh)
    v: np.ndarray  # (Tk, Dh)
    raw_scores: np.ndarray  # (Tk,) q . k_j
    scaled_scores: np.ndarray  # (Tk,) / sqrt(d_k), before the mask
    mask: np.ndarray  # (Tk,) True where key j may be seen
    masked_scores: np.ndarray  # (Tk,) what the softmax sees: the scaled score, or MASKED where hidden
    weights: np.ndarray  # (Tk,) softmax; the model's own row
    weighted_values: np.ndarray  # (Tk, Dh) weights_j * v_j
    z: np.ndarray  # (Dh,) sum of weighted values: this head's output
    concat: np.ndarray  # (D,) every head's z side by side
    output: np.ndarray  # (D,) concat W_O: the attention sub-layer's output for this token
    q_unrotated: np.ndarray | None = None  # rotary positions: (Dh,) x W_Q before q is turned by its position
    k_unrotated: np.ndarray | None = None  # (Tk, Dh) before each key is turned by its own position
    sharing: tuple[int, ...] = ()  # the query heads (from 0) that read the same keys and values, this one included
    q_before_norm: np.ndarray | None = None  # QK-norm: (Dh,) q as W_Q wrote it, before its norm (and rotary)
    k_before_norm: np.ndarray | None = None  # (Tk, Dh) each key before its norm
    scale: float = 0.0  # the scores' factor: 1/sqrt(d_head) as the paper, or the config's own (query_pre_attn_scalar)

    @property
    def scale_divisor(self) -> float:
        """What q . k_j is divided by the square root of: d_k (the paper's), or the model's own scalar."""
        return self.d_head if not self.scale else 1.0 / (self.scale * self.scale)


def input_rows(trace: Trace, kind: str, layer: int) -> tuple[np.ndarray, str, str]:
    if kind == "encoder_self":
        states = trace.encoder_states
        if layer == 0:
            return states["embeddings"], "token embedding + position", "the same rows"
        return states["after_ffn"][layer - 1], f"output of encoder layer {layer}", "the same rows"
    assert trace.decoder_states is not None
    states = trace.decoder_states
    if kind == "decoder_self":
        rows = states["embeddings"] if layer == 0 else states["after_ffn"][layer - 1]
        embedding = "token embedding" if trace.decoder_only else "target embedding"
        what = f"{embedding} + position" if layer == 0 else f"output of decoder layer {layer}"
        return rows, what, "the same rows (the causal mask then hides those after the query)"
    return (
        states["after_self_attn"][layer],
        f"decoder layer {layer + 1} after masked self-attention",
        "the encoder's output (memory)",
    )


@dataclass(frozen=True)
class QueryRows:
    """What one query reads in one layer of one attention kind, for every head: all a walkthrough of any of its
    heads needs, from one read of the layer (a long text's layer is recomputed once, not once per array)."""

    kind: str
    layer: int
    query: int
    x_query: np.ndarray  # (D,) the row the query is projected from
    x_query_source: str
    x_keys_source: str
    q: np.ndarray  # (H, Dh)
    k: np.ndarray  # (H, Tk, Dh)
    v: np.ndarray  # (H, Tk, Dh)
    raw_scores: np.ndarray  # (H, Tk)
    mask: np.ndarray  # (Tk,)
    weights: np.ndarray  # (H, Tk)
    heads: np.ndarray  # (H, Dh) every head's z
    output: np.ndarray  # (D,)
    q_unrotated: np.ndarray | None  # (H, Dh)
    k_unrotated: np.ndarray | None  # (H, Tk, Dh)
    sharing: tuple[tuple[int, ...], ...]  # per query head: the heads reading the same keys and values
    scale: float = 0.0  # the scores' factor (1/sqrt(d_head), or the config's own); 0: 1/sqrt(d_head)
    q_before_norm: np.ndarray | None = None  # QK-norm: (H, Dh) before the norm
    k_before_norm: np.ndarray | None = None  # (H, Tk, Dh)

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]


def query_rows(trace: Trace, kind: str, layer: int, query: int) -> QueryRows:
    """Query `query`'s rows of one layer, every head, read out of the trace with one read of the layer."""
    a = trace.attention(kind)
    if not (0 <= layer < a.n_layers and 0 <= query < a.mask.shape[0]):
        raise IndexError(f"layer {layer}, query {query} is outside this trace")
    rows, rows_are, keys_from = input_rows(trace, kind, layer)
    # once (each array of a long text's layer read apart recomputed the whole layer), one query row: on a GPU the
    # row is selected there and only it (and k, v) copied back
    found = a.query_row(layer, query)
    return QueryRows(
        kind=kind,
        layer=layer,
        query=query,
        x_query=np.array(rows[query]),
        x_query_source=rows_are,
        x_keys_source=keys_from,
        q=found.q[:, 0].copy(),
        k=found.k,
        v=found.v,
        raw_scores=found.raw_scores[:, 0].copy(),
        mask=a.mask_of(layer)[query].copy(),  # a local layer's window narrows the causal mask
        weights=found.weights[:, 0].copy(),
        heads=found.heads[:, 0].copy(),
        output=found.output[0].copy(),
        q_unrotated=None if found.q_unrotated is None else found.q_unrotated[:, 0].copy(),
        k_unrotated=found.k_unrotated,
        sharing=tuple(a.sharing(h) for h in range(a.n_heads)),
        scale=float(found.scaling or 0.0),
        q_before_norm=None if found.q_before_norm is None else found.q_before_norm[:, 0].copy(),
        k_before_norm=found.k_before_norm,
    )


def head_steps(rows: QueryRows, head: int) -> HeadWalkthrough:
    """One head's walkthrough from its query's rows (x_query_source names the row as the trace holds it; a page names
    it as the model computes it, wording.attention_input)."""
    if not 0 <= head < rows.n_heads:
        raise IndexError(f"head {head} is outside this trace")
    weights = rows.weights[head]
    # this row scaled exactly as AttentionTrace.scaled_scores scales every score (one float32 multiply each): the
    # property builds the whole (L, H, Tq, Tk) array, 1.7 s at 2,048 tokens
    d_head = rows.q.shape[-1]
    scaled = rows.raw_scores[head] * np.float32(rows.scale or d_head**-0.5)
    v = rows.v[head]
    return HeadWalkthrough(
        kind=rows.kind,
        layer=rows.layer,
        head=head,
        query=rows.query,
        x_query=rows.x_query,
        x_query_source=rows.x_query_source,
        x_keys_source=rows.x_keys_source,
        d_model=rows.n_heads * d_head,
        d_head=d_head,
        q=rows.q[head],
        k=rows.k[head],
        v=v,
        raw_scores=rows.raw_scores[head],
        scaled_scores=scaled,
        mask=rows.mask,
        masked_scores=np.where(rows.mask, scaled, np.float32(MASKED)),
        weights=weights,
        weighted_values=weights[:, None] * v,  # (Tk, Dh)
        z=rows.heads[head],
        concat=rows.heads.reshape(-1),  # (H*Dh,) = (D,)
        output=rows.output,
        q_unrotated=None if rows.q_unrotated is None else rows.q_unrotated[head],
        k_unrotated=None if rows.k_unrotated is None else rows.k_unrotated[head],
        sharing=rows.sharing[head],
        q_before_norm=None if rows.q_before_norm is None else rows.q_before_norm[head],
        k_before_norm=None if rows.k_before_norm is None else rows.k_before_norm[head],
        scale=rows.scale,
    )


def steps(trace: Trace, kind: str, layer: int, head: int, query: int) -> HeadWalkthrough:
    """Read one head's computation for one query out of the trace (query_rows, then head_steps)."""
    a = trace.attention(kind)
    if not (0 <= layer < a.n_layers and 0 <= head < a.n_heads and 0 <= query < a.mask.shape[0]):
        raise IndexError(f"layer {layer}, head {head}, query {query} is outside this trace")
    return head_steps(query_rows(trace, kind, layer, query), head)


ALL_KEYS = 32  # up to this many keys every bar and strip row is drawn; past it, a chosen few and an overview


def strongest_keys(
    weights: np.ndarray, n: int, keep: Sequence[int] = (), visible: np.ndarray | None = None
) -> np.ndarray:
    """Positions of the `n` keys with the highest weight, and those in `keep` (the query itself), in position
    order; every key when there are at most `n`. With `visible` (the mask's row), only keys the query can see are
    picked: a masked key's weight is 0, and drawing it would only fill the chart. Only which keys are drawn changes,
    never their values."""
    if len(weights) <= n:
        return np.arange(len(weights))
    kept = [i for i in dict.fromkeys(keep) if 0 <= i < len(weights)][:n]
    seen = np.ones(len(weights), bool) if visible is None else np.asarray(visible, bool)
    order = [i for i in np.argsort(-weights, kind="stable") if i not in kept and seen[i]]  # ties keep position order
    return np.sort(np.array([*kept, *order[: n - len(kept)]], dtype=int))


def window_keys(n_keys: int, center: int, n: int) -> np.ndarray:
    """Up to `n` consecutive key positions around `center`, slid inside 0..n_keys-1."""
    n = min(n, n_keys)
    start = min(max(center - n // 2, 0), n_keys - n)
    return np.arange(start, start + n)


def softmax_with_temperature(scaled_scores: np.ndarray, mask: np.ndarray, temperature: float) -> np.ndarray:
    """What-if only: softmax(scores / T) over the visible keys. T = 1 is the model; the model never uses T."""
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    z = np.where(mask, scaled_scores.astype(np.float64) / temperature, -np.inf)
    z = z - z[mask].max()
    e = np.where(mask, np.exp(z), 0.0)
    return e / e.sum()


def to_csv(s: HeadWalkthrough) -> str:
    """One row per key: its position, raw and scaled score, weight, then k and v (every value, 9 digits)."""
    columns = ["key", "raw_score", "scaled_score", "weight", *(f"k{i}" for i in range(s.d_head))]
    columns += [f"v{i}" for i in range(s.d_head)]
    buffer = io.StringIO()
    table = np.column_stack([np.arange(len(s.weights)), s.raw_scores, s.scaled_scores, s.weights, s.k, s.v])
    np.savetxt(buffer, table, delimiter=",", fmt="%.9g", header=",".join(columns), comments="")
    return buffer.getvalue()
