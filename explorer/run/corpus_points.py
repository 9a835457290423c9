"""One head's queries and keys over a whole corpus, in two dimensions: what a "queries and keys" scatter draws (no
streamlit, no plotly). Runs the reading stack up to the chosen layer only, a batch at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run import corpus
from attention_explorer.explorer.run.corpus_input import Prepared
from attention_explorer.explorer.run.layers import Admit
from attention_explorer.models.attention import AttentionInternals
from attention_explorer.models.registry import LoadedModel


@dataclass(frozen=True)
class QueryKeyPoints:
    """Every real position's query and key of one head, projected to 2D; point i of `queries` and of `keys` is
    text `text[i]`'s position `position[i]`, token `tokens[i]`."""

    layer: int
    head: int
    queries: np.ndarray  # (N, 2) float64
    keys: np.ndarray  # (N, 2) float64
    text: np.ndarray  # (N,) int64: the text's place among the texts that ran (CorpusStats' rows)
    position: np.ndarray  # (N,) int64: the token's position in its text, from 0
    tokens: tuple[str, ...]  # (N,) as the model spells them
    explained: np.ndarray  # (2,) the share of the queries' and keys' variance each axis holds


class _Stop(Exception):  # noqa: N818 -- not an error: the chosen layer has been read
    """Raised once the chosen layer is read, so the layers above it never run."""


def project(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries (N, Dh) and keys (M, Dh) -> their 2D points and each axis's share of the variance: the projection is
    onto the two leading principal axes of one PCA fitted on the queries and keys together (centred on their joint
    mean, by numpy's SVD), so both sets share one pair of axes."""
    both = np.concatenate([queries, keys]).astype(np.float64)
    centred = both - both.mean(axis=0)
    _, singular, axes = np.linalg.svd(centred, full_matrices=False)
    points = centred @ axes[:2].T  # (N + M, 2) or fewer columns when Dh < 2
    if points.shape[1] < 2:
        points = np.pad(points, ((0, 0), (0, 2 - points.shape[1])))
    variance = singular**2
    share = variance[:2] / variance.sum() if variance.sum() > 0 else np.zeros(min(2, len(variance)))
    return points[: len(queries)], points[len(queries) :], np.pad(share, (0, 2 - len(share)))


def query_key_points(
    loaded: LoadedModel,
    prepared: Prepared,
    layer: int,
    head: int,
    batch_size: int = corpus.BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
    admit: Admit | None = None,
) -> QueryKeyPoints:
    """Head `head` of layer `layer` (from 0): its queries and keys (after rotation where the model has rotary
    positions: the vectors whose dot products are the scores) at every real position of every prepared text,
    projected by `project`."""
    stack = corpus.reading_stack(loaded)
    if not 0 <= layer < len(stack.layers):
        raise ValueError(f"layer {layer} of {len(stack.layers)} (counted from 0)")
    if not 0 <= head < stack.layers[0].self_attn.n_heads:
        raise ValueError(f"head {head} of {stack.layers[0].self_attn.n_heads} (counted from 0)")

    def work(batch: corpus.Batch) -> list[tuple[int, np.ndarray, np.ndarray]]:
        ids, lengths = (t.to(loaded.device) for t in corpus.padded(batch))
        found: list[tuple[int, np.ndarray, np.ndarray]] = []

        def read(i: int, attention: AttentionInternals) -> None:
            if i < layer:
                return
            q, k = attention.q[:, head].cpu().numpy(), attention.k[:, head].cpu().numpy()  # (B, T, Dh)
            for row, n in enumerate(lengths.tolist()):
                found.append((batch.index[row], q[row, :n].copy(), k[row, :n].copy()))
            raise _Stop

        with contextlib.suppress(_Stop):  # the layers above the chosen one never run
            corpus.each_layer(loaded, ids, lengths, read)
        return found

    rows = [r for part in corpus.each_batch(loaded, prepared, batch_size, work, progress, admit) for r in part]
    rows.sort(key=lambda r: r[0])
    text = np.concatenate([np.full(len(q), i, dtype=np.int64) for i, q, _ in rows])
    position = np.concatenate([np.arange(len(q), dtype=np.int64) for _, q, _ in rows])
    queries, keys, share = project(np.concatenate([q for _, q, _ in rows]), np.concatenate([k for _, _, k in rows]))
    tokens = tuple(token for i, _, _ in rows for token in prepared.encodings[i].tokens)
    return QueryKeyPoints(layer, head, queries, keys, text, position, tokens, share)
