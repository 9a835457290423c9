"""A trace as plain data: the JSON document, CSV rows and .npz file that `python -m explorer export` writes, each
read one attention layer at a time (`AttentionTrace.layer`), so a long text's attention is never held all at once."""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_explorer.explorer.experiments.replacements import Replacement
from attention_explorer.explorer.run import spreadsheet
from attention_explorer.explorer.run.trace import AttentionLayer, AttentionTrace, Trace
from attention_explorer.models.ablation import Ablation, Head

# what --what may ask the .npz for, per (kind, layer): softmax weights, the scores softmax read, the projections
NPZ_WHAT = ("weights", "scores", "qkv")


@dataclass(frozen=True)
class Selection:
    """The layers and heads an export writes, counted from 0 and ascending; None: every one the attention has."""

    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None

    def of(self, attention: AttentionTrace) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(layers, heads) of this attention kind to write."""
        layers = tuple(range(attention.n_layers)) if self.layers is None else self.layers
        heads = tuple(range(attention.n_heads)) if self.heads is None else self.heads
        return layers, heads


_PART = re.compile(r"(\d+)(?:-(\d+))?")


def numbers(text: str, count: int, option: str) -> tuple[int, ...]:
    """'1,3-5' -> (0, 2, 3, 4): numbers and ranges counted from 1 (as the pages show them), each in 1..count, returned
    counted from 0, ascending and once each; a ValueError naming the valid range for anything else."""
    noun = option.removeprefix("--").removesuffix("s")
    valid = f"choose from 1-{count}" if count > 1 else f"the model has only {noun} 1"
    chosen: set[int] = set()
    for part in text.split(","):
        found = _PART.fullmatch(part.strip())
        if found is None:
            raise ValueError(f"{option} {text!r}: write numbers and ranges counted from 1, such as 1,3-5; {valid}")
        first = int(found[1])
        last = first if found[2] is None else int(found[2])
        if last < first:
            raise ValueError(f"{option} {text!r}: the range {part.strip()} runs backwards; write {last}-{first}")
        outside = [n for n in (first, last) if not 1 <= n <= count]
        if outside:
            raise ValueError(f"{option} {text!r}: there is no {noun} {outside[0]}; {valid}")
        chosen.update(range(first - 1, last))
    return tuple(sorted(chosen))


def selection(layers: str | None, heads: str | None, shapes: Mapping[str, tuple[int, int]]) -> Selection:
    """--layers and --heads read against a model's (layers, heads) per attention kind (models.ablation.shapes): a
    number must exist in every kind, since one selection applies to them all."""
    n_layers = min(n for n, _ in shapes.values())
    n_heads = min(h for _, h in shapes.values())
    return Selection(
        None if layers is None else numbers(layers, n_layers, "--layers"),
        None if heads is None else numbers(heads, n_heads, "--heads"),
    )


def token_lists(trace: Trace) -> dict[str, list[str]]:
    """{"source": [...], "target": [...]}; a decoder-only model's text is its source alone."""
    tokens = {"source": list(trace.source_tokens)}
    if not trace.decoder_only and trace.target_tokens is not None:
        tokens["target"] = list(trace.target_tokens)
    return tokens


def readable_token_lists(trace: Trace) -> dict[str, list[str]]:
    """token_lists as the pages show them (models.tokenize.Spelling: 'Ġcapital' is '␣capital')."""
    return {name: list(trace.readable(tokens)) for name, tokens in token_lists(trace).items()}


def to_document(trace: Trace, chosen: Selection = Selection()) -> dict:
    """{"model", "tokens": {"source", "target"?}, "readable_tokens" (the same, as the pages show them: '␣capital'
    for 'Ġcapital'), "attention": {kind: [layer][head][query][key]}, "attention_layers" and "attention_heads":
    {kind: [numbers counted from 1]}}, the layers and heads `chosen` in the order written; a model with an output
    matrix adds "next_tokens" (at every decoder row, its most likely next token as the tokenizer writes it) and
    "readable_next_tokens" (the same as the pages show them), an
    encoder-decoder also "output" (what greedy decoding wrote); a decoder-only model's attention is
    "decoder_self"."""
    doc: dict = {"model": trace.model_key, "tokens": token_lists(trace), "readable_tokens": readable_token_lists(trace)}
    if trace.top_tokens is not None:
        doc["next_tokens"] = [row[0] for row in trace.top_tokens]
        doc["readable_next_tokens"] = list(trace.readable(doc["next_tokens"]))  # beside them, as the pages show them
    if trace.output_tokens is not None and not trace.decoder_only:
        doc["output"] = list(trace.output_tokens)
    if trace.truncated:
        doc["truncated"] = trace.truncated
    attention: dict[str, list] = {}
    written: dict[str, dict[str, list[int]]] = {"attention_layers": {}, "attention_heads": {}}
    for kind in trace.kinds:
        found = trace.attention(kind)
        layers, heads = chosen.of(found)
        # float32 -> Python float is exact, so the numbers are the model's own; one layer read at a time
        attention[kind] = [found.layer(i).weights[list(heads)].tolist() for i in layers]
        written["attention_layers"][kind] = [i + 1 for i in layers]
        written["attention_heads"][kind] = [h + 1 for h in heads]
    return {**doc, "attention": attention, **written}


# each token as the tokenizer writes it ('Ġcapital') and, beside it, as the pages show it ('␣capital')
CSV_HEADER = (
    "kind",
    "layer",
    "head",
    "query_index",
    "query_token",
    "query_readable",
    "key_index",
    "key_token",
    "key_readable",
    "weight",
)


def csv_rows(trace: Trace, chosen: Selection = Selection()) -> Iterator[tuple]:
    """One row per (kind, layer, head, query, key) with both tokens spelled out, raw and readable; layer and head
    count from 0."""
    for kind in trace.kinds:
        queries, keys = trace.tokens_for(kind)
        queries = list(zip(queries, trace.readable(queries), strict=True))
        keys = list(zip(keys, trace.readable(keys), strict=True))
        found = trace.attention(kind)
        layers, heads = chosen.of(found)
        for layer in layers:
            # a generator of its own: this layer's weights go once its rows are written, before the next is read
            yield from _layer_rows(kind, layer, found.layer(layer).weights, heads, queries, keys)


def _layer_rows(kind: str, layer: int, weights: np.ndarray, heads, queries, keys) -> Iterator[tuple]:
    for head in heads:
        for qi, (query, query_readable) in enumerate(queries):
            row = weights[head, qi].tolist()
            for ki, (key, key_readable) in enumerate(keys):
                yield kind, layer, head, qi, query, query_readable, ki, key, key_readable, row[ki]


def write_csv(trace: Trace, out: io.TextIOBase, chosen: Selection = Selection()) -> None:
    """CSV_HEADER, then csv_rows; a token a spreadsheet would run written as text (spreadsheet.Writer)."""
    writer = spreadsheet.Writer(out)
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_rows(trace, chosen))


def npz_what(text: str) -> tuple[str, ...]:
    """--what 'weights,qkv' -> ("weights", "qkv"); a ValueError naming the choices for anything else."""
    asked = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
    unknown = [part for part in asked if part not in NPZ_WHAT]
    if unknown:
        raise ValueError(f"--what {text!r}: {unknown[0]!r} is not one of {', '.join(NPZ_WHAT)}")
    return asked


def layer_arrays(
    layer: AttentionLayer, heads: tuple[int, ...], what: tuple[str, ...]
) -> Iterator[tuple[str, np.ndarray]]:
    """(name, array) of one layer's chosen heads: "weights" (H', Tq, Tk); "scores" q k^T / sqrt(d_k) before the
    mask, (H', Tq, Tk); "q" (H', Tq, Dh), "k" and "v" (H', Tk, Dh), a shared key/value head repeated per query head."""
    rows = list(heads)
    if "weights" in what:
        yield "weights", layer.weights[rows]
    if "scores" in what:
        # times d_k^-1/2 in float32, as models.attention.scale does: the very scores softmax read
        yield "scores", layer.raw_scores[rows] * np.float32(layer.q.shape[-1] ** -0.5)
    if "qkv" in what:
        yield from (("q", layer.q[rows]), ("k", layer.k[rows]), ("v", layer.v[rows]))


def _put(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    """One .npy entry, laid out as numpy.savez writes it; zip64, as the file passes 4 GB (SmolLM2 at 2,048 tokens)."""
    with archive.open(f"{name}.npy", "w", force_zip64=True) as entry:
        np.lib.format.write_array(entry, np.asarray(array), allow_pickle=False)


def _put_layer(archive: zipfile.ZipFile, kind: str, number: int, layer: AttentionLayer, heads, what) -> None:
    # its own frame: the layer's arrays go when it returns, before the next layer is read
    for name, array in layer_arrays(layer, heads, what):
        _put(archive, f"{kind}/layer{number}/{name}", array)


def write_npz(
    trace: Trace,
    path: Path,
    chosen: Selection = Selection(),
    what: tuple[str, ...] = ("weights",),
    extra: Mapping[str, object] | None = None,
) -> None:
    """A .npz that plain numpy.load reads, written entry by entry so at most one layer is in memory: "model",
    "tokens/source" (and "tokens/target"), "readable_tokens/source" (...) as the pages show them, per kind
    "{kind}/layers" and "{kind}/heads" (counted from 1) and per chosen layer "{kind}/layer{n}/weights" etc.
    (layer_arrays); `extra`: more entries, such as the ablated heads."""
    partial = path.with_name(path.name + ".partial")  # a failed export leaves no half-written file behind
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            _put(archive, "model", np.array(trace.model_key))
            for name, tokens in token_lists(trace).items():
                _put(archive, f"tokens/{name}", np.array(tokens, dtype=str))
            for name, tokens in readable_token_lists(trace).items():  # beside them, as the pages show them
                _put(archive, f"readable_tokens/{name}", np.array(tokens, dtype=str))
            for name, value in (extra or {}).items():
                _put(archive, name, np.array(value, dtype=str))
            for kind in trace.kinds:
                found = trace.attention(kind)
                layers, heads = chosen.of(found)
                _put(archive, f"{kind}/layers", np.array(layers, dtype=np.int64) + 1)
                _put(archive, f"{kind}/heads", np.array(heads, dtype=np.int64) + 1)
                for layer in layers:
                    _put_layer(archive, kind, layer + 1, found.layer(layer), heads, what)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def forward_document(loaded, trace: Trace, target: str = "", ablation: Ablation | None = None) -> dict:
    """{"sublayers": {stack: [layer: {step: [token][dim]}]}} for every model, and for a model with an output
    "loss": {"targets", "per_token", "mean", "label_smoothing"} against `target` or the task's right answer (the
    model's own greedy output when no right answer is known); a decoder-only model's loss is its text's. `ablation`:
    the heads the trace was run with turned off, so that the loss is the same run's."""
    from attention_explorer.explorer.run import forward, output

    sublayers = forward.sublayer_vectors(loaded, trace)
    doc: dict = {
        "sublayers": {
            stack: [{name: vectors.tolist() for name, vectors in layer.items()} for layer in layers]
            for stack, layers in sublayers.items()
        }
    }
    scorable = loaded.is_encoder_decoder or (loaded.is_decoder_only and len(trace.source_tokens) > 1)
    if scorable:  # a decoder-only text of one token has no next token to score
        ids, where = output.target_for(loaded, trace, target)
        source = forward.token_ids(loaded, trace, forward.stack_of(trace.kinds[0]))
        scored = output.score(loaded, source, ids, ablation=ablation)
        doc["loss"] = {
            "targets": list(scored.targets),
            "target_from": where,
            "per_token": scored.per_token.tolist(),
            "mean": scored.mean,
            "label_smoothing": scored.epsilon,
        }
    return doc


def ablation_document(heads: tuple[Head, ...], method: str, replaced: Replacement | None = None) -> dict:
    """{"ablated": ["cross:2.1", ...], "ablation": "zero" | "mean" | "resample"} naming the heads turned off (counted
    from 1, with their attention kind, as --ablate reads them back), and with `replaced` the convention in a sentence,
    how many texts and token positions its values come from and, for resample ablation, the other text; nothing for
    a clean run."""
    if not heads:
        return {}
    doc: dict = {"ablated": [f"{head.kind}:{head.address}" for head in heads], "ablation": method}
    if replaced is not None:
        doc["ablation_convention"] = replaced.convention
        if replaced.method != "zero":
            doc["ablation_texts"], doc["ablation_tokens"] = replaced.texts, replaced.tokens
        if replaced.other:
            doc["ablation_other_text"] = replaced.other
    return doc


def lens_document(loaded, trace: Trace, ablation: Ablation | None = None) -> dict:
    """{"logit_lens": [layer][position]} for a model with an output matrix: the most likely next token after each
    decoder layer, read through the output layer (explorer.experiments.lens) on the trace's own decoder input and with
    the same heads turned off, so its last row is the document's "next_tokens"; nothing for an encoder-only model."""
    from attention_explorer.explorer.experiments import lens

    if trace.top_tokens is None or trace.target_tokens is None:
        return {}
    return {"logit_lens": lens.for_trace(loaded, trace, ablation).by_layer()}
