"""Where a page opens: the head (and query token) worth seeing first, chosen from the model's own weights.

A head's *link score* is the largest weight any content query puts on a content key other than itself and its
neighbours (content: not a start/end/pad marker, not punctuation). Heads that only look at [CLS], [SEP], the
token itself or the previous/next token score low; a head in which "it" puts 0.52 on "trophy" scores 0.52.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.explorer.run import device_reducers
from attention_explorer.explorer.run.analysis import ENDS, STARTS, is_punctuation
from attention_explorer.models.families import descriptor
from attention_explorer.models.tasks import SPECIALS

# every tokenizer family's own marker tokens (as models.families.descriptor declares them), the toy tasks' and the
# usual others
MARKERS = (
    STARTS
    | ENDS
    | frozenset({"[PAD]", "<pad>", "[UNK]", "[MASK]"})
    | frozenset(descriptor.WORDPIECE_MARKS["specials"])
    | frozenset(descriptor.BYTE_BPE_MARKS["specials"])
    | frozenset(SPECIALS)
)
NEAR = 2  # in self-attention, keys this close to the query do not count (self, neighbours, a split word's pieces)


def is_content(token: str) -> bool:
    """A word or word piece: not a sequence marker, not punctuation."""
    return token not in MARKERS and not is_punctuation(token)


@dataclass(frozen=True)
class Link:
    """One head's strongest long-range link: query position -> key position with this weight."""

    layer: int
    head: int
    query: int
    key: int
    weight: float


def counted(queries: Sequence[str], keys: Sequence[str], self_attention: bool, sink: bool = False) -> np.ndarray:
    """(Tq, Tk) True where a query -> key link counts toward the score; in a sentence too short for links beyond
    NEAR (two words), any content key other than the query itself. `sink`: the first key never counts (a causal
    model's heads park the weight they do not need on the first token, whatever it is). Read-only: the same array
    serves every layer of a run (4 MB at 2,048 tokens, built in tens of ms)."""
    return _allowed_of(tuple(queries), tuple(keys), self_attention, bool(sink))


@functools.lru_cache(maxsize=4)
def _allowed_of(queries: tuple[str, ...], keys: tuple[str, ...], self_attention: bool, sink: bool) -> np.ndarray:
    allowed = np.outer([is_content(q) for q in queries], [is_content(k) for k in keys])
    if sink and len(keys) > NEAR + 2:
        allowed[:, 0] = False
    if self_attention:
        distance = np.abs(np.arange(len(queries))[:, None] - np.arange(len(keys))[None, :])
        far = allowed & (distance > NEAR)
        allowed = far if far.any() else allowed & (distance > 0)
    allowed.setflags(write=False)
    return allowed


def links(weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], self_attention: bool = True) -> np.ndarray:
    """Each head's link score: weights (L, H, Tq, Tk) -> (L, H), 0 where no link counts (all markers, too short)."""
    allowed = counted(queries, keys, self_attention)
    return np.where(allowed, weights, 0.0).max(axis=(-2, -1), initial=0.0)


def best_link(
    weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], self_attention: bool = True, sink: bool = False
) -> Link:
    """The head with the highest link score and that link; ties go to the earliest layer and head. With no content
    link at all (a sentence of markers), layer 1 head 1 and its first content query (or position 0). Read a layer at a
    time (a long text's layers are recomputed when read)."""
    links = [layer_link(weights[i], queries, keys, self_attention, sink) for i in range(len(weights))]
    return best_of(np.stack(links), queries, keys, self_attention, sink)


def layer_link(
    weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], self_attention: bool = True, sink: bool = False
) -> np.ndarray:
    """One layer's (H, Tq, Tk) strongest counted link: [weight, head, query, key] (the first, on ties). A run
    reduces every layer to this while it holds it (explorer.run.layers.Reductions)."""
    allowed = counted(queries, keys, self_attention, sink)  # (Tq, Tk)
    return link_of_rows(weights, _counted_row_max(weights, allowed), allowed)


def link_of_rows(weights: np.ndarray | torch.Tensor, rows: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """layer_link from each row's largest counted weight (H, Tq) (a run's reducers.Analysis.row_max, or
    _counted_row_max): the first row and key holding the largest, the argmax of the masked (H, Tq, Tk) in its order,
    without building it."""
    head, query = np.unravel_index(int(np.argmax(rows)), rows.shape)
    row = weights[head, query]  # (Tk,): of a torch tensor on a device, only this row comes back
    row = device_reducers.moved(row) if isinstance(row, torch.Tensor) else row
    key = int(np.argmax(np.where(allowed[query], row, 0.0)))
    weight = row[key] if allowed[query, key] else 0.0
    return np.array([weight, head, query, key], np.float64)


def _counted_row_max(weights: np.ndarray, allowed: np.ndarray, chunk: int = 16) -> np.ndarray:
    """(H, Tq, Tk) weights, (Tq, Tk) allowed -> (H, Tq) each row's largest allowed weight (0 where none is). Weights
    are >= 0, so weight x allowed keeps the allowed ones and zeroes the rest: a few rows at a time into one buffer
    that stays in cache (0.024 s a layer of 9 x 2,048 x 2,048, where a masked max over the whole layer took 0.17)."""
    heads, tq, tk = weights.shape
    found = np.empty((heads, tq), weights.dtype)
    buffer = np.empty((heads, min(chunk, tq), tk), weights.dtype)
    for start in range(0, tq, chunk):
        stop = min(start + chunk, tq)
        part = buffer[:, : stop - start]
        np.multiply(weights[:, start:stop], allowed[start:stop], out=part)
        part.max(axis=-1, out=found[:, start:stop], initial=0.0)
    return found


def best_of(
    links: np.ndarray, queries: Sequence[str], keys: Sequence[str], self_attention: bool = True, sink: bool = False
) -> Link:
    """best_link from each layer's layer_link (L, 4): the first layer holding the highest weight."""
    if not counted(queries, keys, self_attention, sink).any():
        content = [i for i, q in enumerate(queries) if is_content(q)]
        return Link(0, 0, content[0] if content else 0, 0, 0.0)
    layer = int(np.argmax(links[:, 0]))
    weight, head, query, key = links[layer]
    return Link(layer, int(head), int(query), int(key), float(weight))


def aligned_link(weights: np.ndarray, queries: Sequence[str], keys: Sequence[str]) -> Link:
    """Cross-attention of a trained encoder-decoder: the last layer's most peaked head (the highest mean, over
    query rows, of each row's largest weight) and its strongest content link. The last layer's cross-attention
    feeds the output, so there each row looks at the source word its step writes (the toy models' layer 1 looks
    at the word just written instead: one position off)."""
    last = weights[-1]  # (H, Tq, Tk)
    head = int(np.argmax(last.max(axis=-1).mean(axis=-1)))  # ties: the earliest head
    link = best_link(last[None, head : head + 1], queries, keys, self_attention=False)
    return Link(len(weights) - 1, head, link.query, link.key, link.weight)


def content_query(queries: Sequence[str], preferred: int | None = None) -> int:
    """A query position worth stepping through: `preferred` if it is a content token, else the first content
    token, else 0."""
    if preferred is not None and 0 <= preferred < len(queries) and is_content(queries[preferred]):
        return preferred
    return next((i for i, q in enumerate(queries) if is_content(q)), 0)


def masked_query(queries: Sequence[str], query: int) -> int:
    """Where a causal self-attention's focus opens: `query`, unless it is the last position, which sees every key
    (the mask hides nothing there); then the content token nearest the middle, so the mask hides the tokens after
    it (the earlier one on a tie); `query` when no content token comes before the last."""
    last = len(queries) - 1
    if query != last:
        return query
    earlier = [i for i in range(last) if is_content(queries[i])]
    return min(earlier, key=lambda i: (abs(2 * i - last), i)) if earlier else query


def rank_heads(weights: np.ndarray, query: int, key: int) -> list[tuple[int, int, float]]:
    """Every (layer, head, weight of query -> key), highest weight first (ties: earlier layer, then head)."""
    picked = np.stack([weights[layer][:, query, key] for layer in range(len(weights))])  # (L, H), a layer at a time
    order = sorted(np.ndindex(picked.shape), key=lambda lh: (-float(picked[lh]), lh))
    return [(int(layer), int(head), float(picked[layer, head])) for layer, head in order]


def largest(values: np.ndarray) -> tuple[int, int]:
    """(layer, head) of the largest value of an (L, H) grid (the earliest on ties)."""
    layer, head = np.unravel_index(int(np.argmax(values)), values.shape)
    return int(layer), int(head)
