"""Head behaviour over many texts: per-head statistics pooled over every query position of a corpus (no streamlit,
no plotly).

The computation is a map and a reduce, so a corpus too large for one machine can be handed to Dask, Ray or Spark
unchanged: `batches(prepared)` cuts the tokenized corpus into `Batch`es of plain tuples; `batch_sums(loaded, batch)`
(the map) runs one batch, right-padded with the padding masked, layer by layer, reducing each layer's (B, H, T, T)
weights into sums before the next layer runs; `HeadSums` (the reduce) adds with `+`, in any grouping. Batches and
sums are plain values that pickle (tests/explorer/test_corpus.py). explorer.run.corpus_cluster runs the map on a Dask
cluster's workers, each loading the model by its key or path once; `run` does the same in this process, with a
progress callback and the app's admission around each batch.

Statistics of one head on one text, A its (T, T) weights (rows are queries): previous_token = mean over t >= 1 of
A[t, t-1]; first_token = mean over t of A[t, 0] (the start marker's column where the model has one: MiniLM's [CLS]);
self = mean over t of A[t, t]; entropy = mean over t of -sum_k A[t, k] ln A[t, k] (nats); mean_distance = mean over t
of sum_k A[t, k] (t - k) for a causal model, |t - k| otherwise; induction = models.induction's score, the weight on
the tokens that followed earlier copies of the query's token, over the queries whose token occurred before. Pooled
over the corpus, every query position of every text weighs once, so each statistic keeps its own count.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import reduce

import numpy as np
import torch

from attention_explorer.explorer.run import cost
from attention_explorer.explorer.run.admission import Cost
from attention_explorer.explorer.run.corpus_input import Prepared
from attention_explorer.explorer.run.corpus_stats import STATISTICS, CorpusStats
from attention_explorer.explorer.run.layers import Admit
from attention_explorer.models.attention import AttentionInternals, raw_scores_dropped
from attention_explorer.models.induction import induction_targets
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import causal_mask

BATCH_SIZE = 32  # texts a batch
# one layer's (B, H, T, T) float32 weights of a batch at most this: long texts run fewer a batch
BATCH_BYTES = 64 * 2**20
ROWS = 256  # query rows of a layer's weights reduced at a time in float64


@dataclass(frozen=True)
class Batch:
    """Texts that run together, as plain values (picklable, for a worker elsewhere): each one's place among the
    prepared texts and its token ids."""

    index: tuple[int, ...]
    ids: tuple[tuple[int, ...], ...]

    def __len__(self) -> int:
        return len(self.index)


def batches(prepared: Prepared, batch_size: int = BATCH_SIZE, n_heads: int = 0) -> list[Batch]:
    """The prepared texts in batches of at most `batch_size`, shortest first (texts of like length pad little); with
    `n_heads`, fewer a batch where one layer's weights would pass BATCH_BYTES."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1, not {batch_size}")
    order = sorted(range(len(prepared.encodings)), key=lambda i: len(prepared.encodings[i]))
    found: list[Batch] = []
    rows: list[int] = []
    for i in order:
        longest = len(prepared.encodings[i])  # the longest so far: the order is by length
        too_big = n_heads and (len(rows) + 1) * n_heads * longest * longest * 4 > BATCH_BYTES
        if rows and (len(rows) == batch_size or too_big):
            found.append(_batch(prepared, rows))
            rows = []
        rows.append(i)
    found.append(_batch(prepared, rows))
    return found


def _batch(prepared: Prepared, rows: list[int]) -> Batch:
    return Batch(tuple(rows), tuple(prepared.encodings[i].ids for i in rows))


@dataclass(frozen=True, eq=False)
class HeadSums:
    """What a batch of texts adds to the corpus's statistics; `a + b` is the corpus of both (associative, and the
    same whichever order the texts came in). Statistics along STATISTICS' order."""

    sums: np.ndarray  # (S, L, H) float64: each statistic summed over the query positions it pools
    counts: np.ndarray  # (S,) int64: the positions each statistic pooled
    index: np.ndarray  # (n,) int64: the texts' places among the prepared texts
    per_text: np.ndarray  # (n, S, L, H) float32: each text's own statistic; NaN where it pools no position
    strongest: np.ndarray  # (n, S, L, H) int16: the query position where the text's term is largest; -1: none

    def __add__(self, other: HeadSums) -> HeadSums:
        return HeadSums.total((self, other))

    @staticmethod
    def total(parts: Iterable[HeadSums]) -> HeadSums:
        """Every part added at once (one concatenation of the per-text values, not one per part)."""
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        return HeadSums(
            reduce(operator.add, (p.sums for p in parts)),
            reduce(operator.add, (p.counts for p in parts)),
            np.concatenate([p.index for p in parts]),
            np.concatenate([p.per_text for p in parts]),
            np.concatenate([p.strongest for p in parts]),
        )


def reading_stack(loaded: LoadedModel):
    """The stack that reads the text: a decoder-only model's decoder, else the encoder (an encoder-decoder's source)."""
    model = loaded.model
    return model.decoder if loaded.is_decoder_only else model.encoder


def kind_of(loaded: LoadedModel) -> str:
    """The attention kind the statistics describe: "decoder_self" (decoder-only) or "encoder_self"."""
    return "decoder_self" if loaded.is_decoder_only else "encoder_self"


def padded(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (B, T) right-padded with 0, lengths (B,)): right padding keeps every text's positions (learned, rotary)
    where they are alone; the masks built from the lengths hide the padding, whatever id it holds."""
    lengths = torch.tensor([len(ids) for ids in batch.ids])
    padded = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
    for row, ids in enumerate(batch.ids):
        padded[row, : len(ids)] = torch.tensor(ids)
    return padded, lengths


@torch.inference_mode()
def each_layer(
    loaded: LoadedModel, ids: torch.Tensor, lengths: torch.Tensor, read: Callable[[int, AttentionInternals], None]
) -> None:
    """The text-reading stack over a padded batch, one layer at a time as Stack.stack runs it; `read(layer, its
    self-attention)` while the layer is held (it may raise to stop early). No output layer, no final norm."""
    stack = reading_stack(loaded)
    length = ids.size(1)
    # (B, 1, 1, Tk) real keys
    keys = (torch.arange(length, device=ids.device)[None] < lengths[:, None])[:, None, None, :]
    context = (None, causal_mask(length, ids.device) & keys, None) if loaded.is_decoder_only else (keys,)
    x = stack.embeddings(ids)  # (B, T, D)
    with raw_scores_dropped():  # no second (B, H, T, T) array of scores: the weights are the same, bit for bit
        for i, layer in enumerate(stack.layers):
            internals = layer(x, *context)
            x = internals.after_ffn
            read(i, internals.self_attn)
            del internals  # this layer's attention goes before the next one runs


def _targets(batch: Batch, length: int) -> torch.Tensor:
    """(B, T, T) bool: models.induction's targets of each text, padded with False."""
    found = torch.zeros(len(batch), length, length, dtype=torch.bool)
    for row, ids in enumerate(batch.ids):
        found[row, : len(ids), : len(ids)] = torch.from_numpy(induction_targets(ids))
    return found


def layer_sums(
    weights: torch.Tensor, lengths: torch.Tensor, targets: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's weights (B, H, T, T) -> (each text's sums (B, S, H) float64, its counts (B, S), the query row where
    each statistic's term is largest (B, S, H), -1 where it pools none): every statistic summed over the text's real
    query rows it pools (padding rows and, for previous_token, row 0 left out)."""
    n = weights.size(-1)
    per_row = torch.cat(
        [_row_terms(weights, start, min(n, start + ROWS), targets, causal) for start in range(0, n, ROWS)], dim=-1
    )  # (B, S, H, T)
    t = torch.arange(n, device=weights.device)
    real = t[None, :] < lengths[:, None]  # (B, T)
    rows = torch.stack([real & (t >= 1), real, real, real, real, real & targets.any(-1)], dim=1)  # (B, S, T)
    sums = torch.where(rows[:, :, None, :], per_row, 0.0).sum(-1)  # (B, S, H)
    best = torch.where(rows[:, :, None, :], per_row, -torch.inf).argmax(-1)  # (B, S, H)
    best = torch.where(rows.any(-1)[:, :, None], best, -1)
    return sums, rows.sum(-1), best


def _row_terms(weights: torch.Tensor, start: int, stop: int, targets: torch.Tensor, causal: bool) -> torch.Tensor:
    """Query rows start..stop-1's term of every statistic (B, S, H, stop - start) float64 (row 0's previous_token is
    0): a long text's float64 copy is of ROWS rows at a time, never of its whole (B, H, T, T)."""
    w = weights[:, :, start:stop].double()  # float64 sums: the pooled means carry no rounding of their own to speak of
    t, k = torch.arange(start, stop, device=weights.device), torch.arange(weights.size(-1), device=weights.device)
    offsets = (t[:, None] - k[None, :]).double()  # (rows, Tk) t - k
    distance = offsets if causal else offsets.abs()
    previous = w.diagonal(offset=start - 1, dim1=-2, dim2=-1)  # (B, H, rows): A[t, t-1]; from row 1 when start is 0
    if start == 0:
        previous = torch.nn.functional.pad(previous, (1, 0))
    return torch.stack(
        [
            previous,
            w[..., 0],  # (B, H, rows)
            w.diagonal(offset=start, dim1=-2, dim2=-1),
            -torch.special.xlogy(w, w).sum(-1),  # 0 ln 0 = 0: a masked key adds nothing
            (w * distance).sum(-1),
            (w * targets[:, None, start:stop]).sum(-1),
        ],
        dim=1,
    )


def batch_sums(loaded: LoadedModel, batch: Batch) -> HeadSums:
    """The map: one batch of texts -> its HeadSums (every layer's weights reduced as the layer is held)."""
    # the batch, its masks and its sums where the model is: only the (B, S, L, H) sums come back to the CPU
    ids, lengths = (t.to(loaded.device) for t in padded(batch))
    targets = _targets(batch, ids.size(1)).to(loaded.device)
    stack = reading_stack(loaded)
    n_layers, n_heads = len(stack.layers), stack.layers[0].self_attn.n_heads
    sums = torch.zeros(len(batch), len(STATISTICS), n_layers, n_heads, dtype=torch.float64, device=ids.device)
    counts = torch.zeros(len(batch), len(STATISTICS), dtype=torch.long, device=ids.device)
    strongest = torch.zeros(len(batch), len(STATISTICS), n_layers, n_heads, dtype=torch.int16, device=ids.device)

    def read(layer: int, attention: AttentionInternals) -> None:
        found, counted, best = layer_sums(attention.weights, lengths, targets, loaded.is_decoder_only)
        sums[:, :, layer] = found
        counts[:] = counted  # the same every layer
        strongest[:, :, layer] = best.to(torch.int16)

    each_layer(loaded, ids, lengths, read)
    with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0: a text that pools no position for a statistic
        per_text = (sums / counts[:, :, None, None]).float().cpu().numpy()
    index = np.array(batch.index, dtype=np.int64)
    return HeadSums(sums.sum(0).cpu().numpy(), counts.sum(0).cpu().numpy(), index, per_text, strongest.cpu().numpy())


def finish(loaded: LoadedModel, prepared: Prepared, total: HeadSums) -> CorpusStats:
    """The reduce's result as statistics: pooled means, and each text's values in the corpus's order."""
    order = np.argsort(total.index, kind="stable")
    if not np.array_equal(total.index[order], np.arange(len(prepared.encodings))):
        raise ValueError("the sums do not cover every prepared text exactly once")
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total.sums / total.counts[:, None, None]
    corpus, spelling = prepared.corpus, loaded.family.spelling
    tokens = tuple(e.tokens for e in prepared.encodings)
    return CorpusStats(
        model_key=loaded.key,
        kind=kind_of(loaded),
        causal=loaded.is_decoder_only,
        max_tokens=prepared.max_tokens,
        means=means,
        counts=total.counts,
        per_text=total.per_text[order],
        strongest_at=total.strongest[order],
        texts=tuple(corpus.texts[i] for i in prepared.index),
        lines=tuple(corpus.lines[i] for i in prepared.index),
        tokens=tokens,
        readable_tokens=tuple(spelling.labels(t) for t in tokens),
        notes=tuple(prepared.notes()),
    )


def batch_cost(loaded: LoadedModel, rows: int, tokens: int) -> Cost:
    """About how long a batch of `rows` texts padded to `tokens` takes (explorer.run.cost's time model, the reading
    stack's layers only) and the memory it adds at its peak: one layer's (B, H, T, T) scores and weights, the float64
    copy of ROWS of their rows and its products in layer_sums, and the layer's activations."""
    config = loaded.model.config
    layers = len(reading_stack(loaded).layers)
    # each_layer keeps no raw scores: a decoder's sliding-window layers are computed on their band
    spans = cost.windows(config) if loaded.is_decoder_only else [None] * layers
    seconds = sum(cost.layer_seconds(config, tokens, rows=rows, window=window) for window in spans)
    seconds = seconds + cost.statistics_seconds(config, rows, tokens, layers)
    band = cost.attention_floats(config, tokens, band=loaded.is_decoder_only)  # (H, T, T) floats at the peak, a row
    block = rows * config.n_heads * min(tokens, ROWS) * tokens  # layer_sums' float64 copy and products: ROWS rows
    attention = cost.FLOAT * rows * band + 8 * 3 * block
    states = cost.FLOAT * cost.STATE_COPIES * rows * tokens * max(config.d_model, config.d_ff)
    return Cost(seconds, int(cost.FIXED_BYTES + attention + states))


def corpus_cost(loaded: LoadedModel, prepared: Prepared, batch_size: int = BATCH_SIZE) -> Cost:
    """The whole run's estimate: every batch's seconds, and the largest batch's bytes (one batch runs at a time)."""
    found = [batch_cost(loaded, len(b), max(map(len, b.ids))) for b in batches(prepared, batch_size, _heads(loaded))]
    return Cost(sum(c.seconds for c in found), max(c.bytes for c in found))


def _heads(loaded: LoadedModel) -> int:
    return reading_stack(loaded).layers[0].self_attn.n_heads


def _free(seconds: float, nbytes: int) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


def each_batch(
    loaded: LoadedModel,
    prepared: Prepared,
    batch_size: int,
    work: Callable[[Batch], object],
    progress: Callable[[int, int], None] | None,
    admit: Admit | None,
) -> Iterator[object]:
    """`work(batch)` for every batch in turn, each inside `admit(seconds, bytes)` (the app's admission), telling
    `progress(texts done, texts)` after each."""
    done, total = 0, len(prepared.encodings)
    for batch in batches(prepared, batch_size, _heads(loaded)):
        estimate = batch_cost(loaded, len(batch), max(map(len, batch.ids)))
        with (admit or _free)(estimate.seconds, estimate.bytes):
            yield work(batch)
        done += len(batch)
        if progress is not None:
            progress(done, total)


def run(
    loaded: LoadedModel,
    prepared: Prepared,
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
    admit: Admit | None = None,
) -> CorpusStats:
    """Every head's statistics over the prepared corpus: batch_sums over its batches, added (HeadSums.total), then
    finish. `progress(texts done, texts)` after each batch; `admit(seconds, bytes)`: the context each batch runs in."""
    parts = list(each_batch(loaded, prepared, batch_size, lambda b: batch_sums(loaded, b), progress, admit))
    return finish(loaded, prepared, HeadSums.total(parts))
