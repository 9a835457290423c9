"""Analyses of attention weights as pure numpy: per-head statistics and labels, rollout, flow, word merging.

Attention is not explanation (Jain & Wallace 2019; Wiegreffe & Pinter 2019): these summarise where weight goes,
not why the model decided anything.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attention_explorer.explorer.run.layers import LayerArray
from attention_explorer.models.induction import induction_scores
from attention_explorer.models.tokenize import WORD_START_MARKS

if TYPE_CHECKING:  # only for the annotation
    from attention_explorer.explorer.run.trace import Trace

STARTS = frozenset({"[CLS]", "<bos>", "<s>"})  # the sequence-start tokens of BERT and of the toy vocabularies
ENDS = frozenset({"[SEP]", "<eos>", "</s>"})
STATISTICS = {
    "entropy": "entropy of each query's row (nats), averaged over queries",
    "distance": "mean |query position - key position|, weighted by attention",
    "previous": "share of attention on the previous position",
    "next": "share of attention on the next position",
    "self": "share of attention on the query's own position",
    "cls": "share of attention on the first position: the start marker ([CLS], <bos>, <s>) where the tokenizer adds "
    "one, else the text's first token (where a decoder-only model's heads park weight: an attention sink)",
    "sep": "share of attention on end markers ([SEP], <eos>, </s>)",
    "punctuation": "share of attention on punctuation tokens",
    "induction": "share of attention on the token after an earlier occurrence of the query's own token (an induction "
    "head: [A][B] ... [A] -> [B]), over the queries whose token occurred before; self-attention only",
}

STATISTIC_NAMES = {  # what the page calls each statistic
    "entropy": "entropy",
    "distance": "mean distance",
    "previous": "previous token",
    "next": "next token",
    "self": "same position",
    "cls": "[CLS] / <bos>",
    "sep": "[SEP] / <eos>",
    "punctuation": "punctuation",
    "induction": "induction",
}
SHARES = frozenset(STATISTIC_NAMES) - {"entropy", "distance"}  # fractions of a row's weight: shown as percentages
FIRST_TOKEN, NO_END = "first token", "end marker (none added)"


def marker_names(keys: Sequence[str]) -> dict[str, str]:
    """STATISTIC_NAMES with the markers this text's keys (as the tokenizer spells them) hold: "[CLS]" and "[SEP]"
    for BERT, "<s>" for a Llama tokenizer that adds it, "first token" and no end marker for GPT-2 and SmolLM2, which
    add none; never a marker the model does not have."""
    start = keys[0] if len(keys) and keys[0] in STARTS else FIRST_TOKEN
    ends = " / ".join(sorted({k for k in keys if k in ENDS})) or NO_END
    return STATISTIC_NAMES | {"cls": start, "sep": ends}


def marker_descriptions(keys: Sequence[str]) -> dict[str, str]:
    """STATISTICS said for this text's markers (marker_names)."""
    names = marker_names(keys)
    start = (
        f"share of attention on {names['cls']}, the start marker the tokenizer puts before the text"
        if names["cls"] != FIRST_TOKEN
        else "share of attention on the first token: this tokenizer adds no start marker, and the first position is "
        "where a decoder-only model's heads park weight they need not spend (an attention sink)"
    )
    end = (
        f"share of attention on {names['sep']}, the end marker the tokenizer puts after the text"
        if names["sep"] != NO_END
        else "share of attention on end markers: this tokenizer adds none after the text, so it is 0"
    )
    return STATISTICS | {"cls": start, "sep": end}


def is_punctuation(token: str) -> bool:
    """Only punctuation marks, after the space a token carries before them ('Ġ,' and ',' both are; 'Ġ' is not)."""
    marks = token.lstrip("".join(WORD_START_MARKS))  # "Ġ," is a comma with its space, punctuation as much as ","
    return bool(marks) and all(c in string.punctuation for c in marks)


def _diagonal_share(weights: np.ndarray, offset: int) -> np.ndarray:
    """Mean over the queries that have one of weight[i, i + offset] ((..., Tq, Tk) -> (...)); NaN when none do."""
    tq, tk = weights.shape[-2:]
    rows = [i for i in range(tq) if 0 <= i + offset < tk]
    if not rows:
        return np.full(weights.shape[:-2], np.nan)
    return np.stack([weights[..., i, i + offset] for i in rows], axis=-1).mean(axis=-1)


def _key_share(weights: np.ndarray, keys: Sequence[str], wanted) -> np.ndarray:
    columns = [j for j, k in enumerate(keys) if wanted(k)]
    return weights[..., columns].sum(axis=-1).mean(axis=-1)  # (...): summed over those keys, mean over queries


def induction_of(weights: np.ndarray, tokens: Sequence[str]) -> np.ndarray:
    """Every head's induction score (models.induction) on a self-attention's tokens, the same token read as the
    same id: (L, H, T, T) -> (L, H)."""
    numbered = {token: i for i, token in enumerate(dict.fromkeys(tokens))}
    return induction_scores(weights, [numbered[token] for token in tokens])


def head_statistics(
    weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Every statistic of STATISTICS for each head: weights (L, H, Tq, Tk) -> {name: (L, H)}, read a layer at a time
    (a long text's layers are recomputed when read). `queries`: the query tokens when they are the keys themselves
    (self-attention), for the induction score (NaN without them, or when no token repeats)."""
    each = [_layer_statistics(weights[i][None], keys, queries) for i in range(len(weights))]
    return {name: np.concatenate([found[name] for found in each]) for name in each[0]}


def _layer_statistics(
    weights: np.ndarray, keys: Sequence[str], queries: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    tq, tk = weights.shape[-2:]
    if len(keys) != tk:
        raise ValueError(f"{len(keys)} key tokens for {tk} keys")
    if queries is not None and tuple(queries) == tuple(keys):
        induction = induction_of(weights, keys)
    else:
        induction = np.full(weights.shape[:2], np.nan)
    w = weights.astype(np.float64)
    logs = np.log(np.where(w > 0, w, 1.0))  # 0 log 0 = 0
    distance = np.abs(np.arange(tq)[:, None] - np.arange(tk)[None, :])  # (Tq, Tk)
    return {
        "entropy": -(w * logs).sum(-1).mean(-1),
        "distance": (w * distance).sum(-1).mean(-1),
        "previous": _diagonal_share(w, -1),
        "next": _diagonal_share(w, 1),
        "self": _diagonal_share(w, 0),
        "cls": w[..., 0].mean(axis=-1) if tk else np.full(w.shape[:-2], np.nan),  # the first position (marker_names)
        "sep": _key_share(w, keys, ENDS.__contains__),
        "punctuation": _key_share(w, keys, is_punctuation),
        "induction": induction,
    }


SINK, FIRST_SINK = "delimiter sink", "first-token sink"


def head_label(stats: dict[str, float], n_keys: int, sink: str = SINK) -> str:
    """A plain name for what one head mostly does, from its statistics (first rule that holds); `sink` names a head
    whose weight goes to the markers (FIRST_SINK where the first position is a token of the text: marker_names)."""
    if stats.get("induction", np.nan) >= 0.5:  # NaN (no repeated token) never holds
        return "induction"
    if stats["previous"] >= 0.5:
        return "previous token"
    if stats["next"] >= 0.5:
        return "next token"
    if stats["self"] >= 0.5:
        return "self"
    if stats["cls"] + stats["sep"] >= 0.5:
        return sink
    if stats["punctuation"] >= 0.5:
        return "punctuation"
    if n_keys > 1 and stats["entropy"] / np.log(n_keys) >= 0.75:
        return "broad"
    return "mixed"


def head_labels(statistics: dict[str, np.ndarray], n_keys: int, sink: str = SINK) -> np.ndarray:
    """head_label for every head: {name: (L, H)} -> (L, H) strings."""
    n_layers, n_heads = statistics["entropy"].shape
    labels = np.empty((n_layers, n_heads), dtype=object)
    for layer in range(n_layers):
        for head in range(n_heads):
            one = {name: float(values[layer, head]) for name, values in statistics.items()}
            labels[layer, head] = head_label(one, n_keys, sink)
    return labels


def residual_mixed(heads: np.ndarray) -> np.ndarray:
    """One layer as rollout and flow see it: 0.5 mean over heads + 0.5 identity (the residual), rows summing
    to 1. (H, T, T) -> (T, T)."""
    length = heads.shape[-1]
    mixed = 0.5 * heads.astype(np.float64).mean(axis=0) + 0.5 * np.eye(length)
    return mixed / mixed.sum(axis=-1, keepdims=True)


def rollout(weights: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): per layer 0.5 mean-over-heads + 0.5 identity for the residual,
    rows renormalised, multiplied from the first layer up. (L, H, T, T) -> (L, T, T), entry l = through layer l."""
    _, _, tq, tk = weights.shape
    if tq != tk:
        raise ValueError("rollout needs self-attention (queries and keys are the same tokens)")
    return rollout_of([residual_mixed(layer) for layer in weights])


def rollout_of(mixed: Sequence[np.ndarray]) -> np.ndarray:
    """rollout from each layer's residual-mixed (T, T) (residual_mixed; on a GPU device_reducers.residual_mixed,
    reduced there): their product from the first layer up. -> (L, T, T), entry l = through layer l."""
    out = []
    total = np.eye(len(mixed[0]))
    for layer in mixed:
        total = np.asarray(layer) @ total
        out.append(total)
    return np.stack(out)


FLOW_SCALE = 2**30  # capacities in units of 2^-30: scipy's max-flow counts in int32, and no flow out of a position
# exceeds 1 (its attention row), so every flow fits; each capacity is off by at most 2^-31 (5e-10)


def flow(weights: np.ndarray) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020): the maximum flow from each top-layer position down to each input
    position through the layers' residual-mixed attention used as capacities. (L, H, T, T) -> (T, T).
    scipy's max-flow in C on integer capacities (FLOW_SCALE): about 0.2 s at 16 tokens and 6 layers; the flows agree
    with a float max-flow (networkx) to about 1e-8."""
    return flow_of([residual_mixed(heads) for heads in weights])


def flow_of(mixed: Sequence[np.ndarray]) -> np.ndarray:
    """`flow` from each layer's residual-mixed attention (T, T) (residual_mixed; a run on a GPU reduces each layer
    to it there, device_reducers.residual_mixed: the max-flow itself runs on the CPU, in scipy)."""
    from scipy.sparse import csr_array  # noqa: PLC0415 -- only here: max-flow is for short inputs
    from scipy.sparse.csgraph import maximum_flow  # noqa: PLC0415

    n_layers, length = len(mixed), len(mixed[0])
    above, below = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")  # edge i -> j, (T, T)
    rows, columns, capacities = [], [], []
    for layer, capacity in enumerate(mixed):  # node layer * T + i: position i below layer `layer`
        rows.append(((layer + 1) * length + above).ravel())  # from position i above this layer
        columns.append((layer * length + below).ravel())  # to position j below it
        capacities.append(np.asarray(capacity).ravel())
    nodes = (n_layers + 1) * length
    capacity = np.rint(np.concatenate(capacities).astype(np.float64) * FLOW_SCALE).astype(np.int32)
    graph = csr_array((capacity, (np.concatenate(rows), np.concatenate(columns))), shape=(nodes, nodes))
    result = np.zeros((length, length))
    for i in range(length):
        for j in range(length):
            result[i, j] = maximum_flow(graph, n_layers * length + i, j).flow_value / FLOW_SCALE
    return result


def word_groups(word_ids: Sequence[int | None]) -> list[list[int]]:
    """Token positions grouped by word, in order; a token with no word (a special) is a group of its own."""
    groups: list[list[int]] = []
    last: int | None = None
    for position, word in enumerate(word_ids):
        if word is not None and word == last and groups:
            groups[-1].append(position)
        else:
            groups.append([position])
        last = word
    return groups


def piece_groups(tokens: Sequence[str]) -> list[list[int]]:
    """Word groups read off WordPiece spelling (a '##' piece continues the word before it): for token sequences
    the tokenizer did not split from a text, such as a decoder's output."""
    word_ids: list[int] = []
    for token in tokens:
        word_ids.append(word_ids[-1] if token.startswith("##") and word_ids else len(word_ids))
    return word_groups(word_ids)


def merge_words(weights: np.ndarray, query_groups: list[list[int]], key_groups: list[list[int]]) -> np.ndarray:
    """Word-level attention: sum over a word's key pieces, mean over its query pieces; rows still sum to 1.
    (..., Tq, Tk) -> (..., Wq, Wk)."""
    keys = np.stack([weights[..., g].sum(axis=-1) for g in key_groups], axis=-1)  # (..., Tq, Wk)
    return np.stack([keys[..., g, :].mean(axis=-2) for g in query_groups], axis=-2)  # (..., Wq, Wk)


def merge_tokens(tokens: Sequence[str], groups: list[list[int]], word_start: str = "") -> list[str]:
    """A word's label: its pieces joined, WordPiece's '##' dropped (and a byte-level BPE's `word_start` mark, 'Ġ',
    which stands for the space before the word)."""
    return [
        "".join(
            tokens[i].removeprefix("##") if n else tokens[i].removeprefix(word_start) or tokens[i]
            for n, i in enumerate(g)
        )
        for g in groups
    ]


def groups_for(result: Trace, kind: str) -> tuple[list[list[int]], list[list[int]]]:
    """Word groups of an attention kind's queries and keys: the tokenizer's words for the text it read (the source,
    or a decoder-only model's text), WordPiece spelling for an encoder-decoder's output tokens."""
    queries, keys = result.tokens_for(kind)
    source = word_groups(result.source_word_ids) if result.source_word_ids else None
    own_text = result.decoder_only or kind == "encoder_self"  # the queries are the tokens read from the text
    query_groups = source if own_text and source else piece_groups(queries)
    key_groups = source if (result.decoder_only or kind != "decoder_self") and source else piece_groups(keys)
    return query_groups, key_groups


def at_word_level(
    result: Trace, kind: str, word_start: str = ""
) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """One attention kind of a trace merged into words: (L, H, Wq, Wk) weights, each layer merged when read (as the
    trace's layers are recomputed), the query words, the key words (`word_start`: the tokenizer's word-start mark,
    dropped from the labels: models.families.descriptor.Family.word_start)."""
    from attention_explorer.explorer.run import device_reducers  # noqa: PLC0415 -- it imports this module

    queries, keys = result.tokens_for(kind)
    query_groups, key_groups = groups_for(result, kind)
    attention = result.attention(kind)
    shape = (attention.n_heads, len(query_groups), len(key_groups))

    def merged(i: int) -> np.ndarray:  # on a GPU, merged there: only the (H, Wq, Wk) words' map comes back
        return attention.reduced(
            lambda w: merge_words(w, query_groups, key_groups),
            lambda w: device_reducers.merge_words(w, query_groups, key_groups),
            [i],
        )[0]

    weights = LayerArray(attention.n_layers, shape, merged)
    return (  # a word's pieces joined before they are made readable: a character split over two pieces is whole again
        weights,
        result.readable(merge_tokens(queries, query_groups, word_start)),
        result.readable(merge_tokens(keys, key_groups, word_start)),
    )
