"""The notebook API over many texts (explorer/run/corpus.py): every head's statistics pooled over a corpus, and one
head's queries and keys over it; `ae.corpus(...)` and `ae.corpus_points(...)` reach these, models loaded as `ae.run`
loads them (attention_explorer.api)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attention_explorer import api

if TYPE_CHECKING:
    from distributed import Client

    from attention_explorer.explorer.run.corpus_input import Prepared
    from attention_explorer.explorer.run.corpus_points import QueryKeyPoints
    from attention_explorer.explorer.run.corpus_stats import CorpusStats
    from attention_explorer.models.registry import LoadedModel

__all__ = ["corpus", "corpus_points"]


def _corpus_of(
    loaded: LoadedModel, texts: Sequence[str] | os.PathLike | str, max_tokens: int, field: str = "text"
) -> Prepared:
    """The texts prepared for the model: a list of texts, a .txt / .csv / .jsonl / .parquet file's path or a glob of
    many (a Path), or "sample"."""
    from attention_explorer.explorer.experiments import sample
    from attention_explorer.explorer.run import corpus_files, corpus_input

    if isinstance(texts, os.PathLike):
        found = corpus_files.read(texts, field)
    elif isinstance(texts, str) and texts == "sample":
        found = sample.corpus(loaded)
    elif isinstance(texts, str):
        raise ValueError(
            'give a list of texts, a pathlib.Path of a .txt, .csv, .jsonl or .parquet file (or a glob), or "sample"; '
            "not one string"
        )
    else:
        found = corpus_input.from_texts(list(texts))
    prepared = corpus_input.prepare(loaded, found, min(max_tokens, loaded.max_tokens))
    for note in prepared.notes():
        warnings.warn(note, stacklevel=3)
    return prepared


def corpus(
    model: str | os.PathLike,
    texts: Sequence[str] | os.PathLike | str,
    max_tokens: int = 512,
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    device: str = "cpu",
    client: Client | None = None,
    field: str = "text",
) -> CorpusStats:
    """Every head's statistics over many texts (explorer.run.corpus): `texts` a list of texts, the Path of a .txt
    (one text a line), .csv (a 'text' column), .jsonl (a 'text' field) or .parquet (a 'text' column) file or a glob
    of many (`field` names another column or field), or "sample" (the app's sample texts for this model); each cut
    at `max_tokens` (a warning counts the cut ones). `device` as ae.run takes it: the forward and every layer's
    reductions run there, only the (L, H) sums come back. `client`: a dask.distributed Client whose workers run the
    batches (explorer.run.corpus_cluster, on the workers' CPUs; a model path must exist on the workers too). Returns
    a CorpusStats: `.rows()` one dict a (layer, head) with the columns of `python -m explorer corpus`;
    `.statistic(name)` (L, H) pooled over every query position; `.text_values(name)` (N, L, H) each text's own;
    `.tokens` (N,) each text's tokens. ValueError for bad input; corpus_cluster.ClusterError when a batch fails on
    the cluster."""
    from attention_explorer.explorer.run import corpus as run_corpus
    from attention_explorer.explorer.run import corpus_cluster

    loaded = api.loaded_model(model, device)
    prepared = _corpus_of(loaded, texts, max_tokens, field)
    if client is None:
        return run_corpus.run(loaded, prepared, batch_size, progress)
    # the workers load the model by the same key, or the same resolved path
    return corpus_cluster.run(loaded, prepared, client, api._resolve(model), batch_size, progress)


def corpus_points(
    model: str | os.PathLike,
    texts: Sequence[str] | os.PathLike | str,
    layer: int,
    head: int,
    max_tokens: int = 512,
    batch_size: int = 32,
    device: str = "cpu",
) -> QueryKeyPoints:
    """One head's queries and keys at every position of the texts (as corpus() takes them), in 2D by one PCA fitted
    on both together: `.queries` and `.keys` (N, 2), `.text` and `.position` (N,), `.tokens` (N,)."""
    from attention_explorer.explorer.run import corpus_points as points

    loaded = api.loaded_model(model, device)
    return points.query_key_points(loaded, _corpus_of(loaded, texts, max_tokens), layer, head, batch_size)
