"""A trace as plain data: the JSON document and CSV rows that `python -m explorer export` writes."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from explorer.run.trace import Trace
from models.ablation import Ablation, Head


def to_document(trace: Trace) -> dict:
    """{"model", "tokens": {"source", "target"?}, "attention": {kind: [layer][head][query][key]}}; a model with an
    output matrix adds "next_tokens" (at every decoder row, its most likely next token as the tokenizer writes it), an
    encoder-decoder also "output" (what greedy decoding wrote); a decoder-only model's attention is "decoder_self"."""
    tokens: dict[str, list[str]] = {"source": list(trace.source_tokens)}
    doc: dict = {"model": trace.model_key, "tokens": tokens}
    if not trace.decoder_only and trace.target_tokens is not None:
        tokens["target"] = list(trace.target_tokens)
    if trace.top_tokens is not None:
        doc["next_tokens"] = [row[0] for row in trace.top_tokens]
    if trace.output_tokens is not None and not trace.decoder_only:
        doc["output"] = list(trace.output_tokens)
    if trace.truncated:
        doc["truncated"] = trace.truncated
    # float32 -> Python float is exact, so the numbers are the model's own
    doc["attention"] = {kind: trace.attention(kind).weights.tolist() for kind in trace.kinds}
    return doc


CSV_HEADER = ("kind", "layer", "head", "query_index", "query_token", "key_index", "key_token", "weight")


def csv_rows(trace: Trace) -> Iterator[tuple]:
    """One row per (kind, layer, head, query, key) with both tokens spelled out."""
    for kind in trace.kinds:
        queries, keys = trace.tokens_for(kind)
        weights = trace.attention(kind).weights
        for layer in range(weights.shape[0]):
            for head in range(weights.shape[1]):
                for qi, query in enumerate(queries):
                    row = weights[layer, head, qi].tolist()
                    for ki, key in enumerate(keys):
                        yield kind, layer, head, qi, query, ki, key, row[ki]


def write_csv(trace: Trace, out: io.TextIOBase) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_rows(trace))


def forward_document(loaded, trace: Trace, target: str = "", ablation: Ablation | None = None) -> dict:
    """{"sublayers": {stack: [layer: {step: [token][dim]}]}} for every model, and for a model with an output
    "loss": {"targets", "per_token", "mean", "label_smoothing"} against `target` or the task's right answer (the
    model's own greedy output when no right answer is known); a decoder-only model's loss is its text's. `ablation`:
    the heads the trace was run with turned off, so that the loss is the same run's."""
    from explorer.run import forward, output

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


def ablation_document(heads: tuple[Head, ...], method: str) -> dict:
    """{"ablated": ["cross:2.1", ...], "ablation": "zero" | "mean"} naming the heads turned off (counted from 1, with
    their attention kind, as --ablate reads them back); nothing for a clean run."""
    if not heads:
        return {}
    return {"ablated": [f"{head.kind}:{head.address}" for head in heads], "ablation": method}


def lens_document(loaded, trace: Trace, ablation: Ablation | None = None) -> dict:
    """{"logit_lens": [layer][position]} for a model with an output matrix: the most likely next token after each
    decoder layer, read through the output layer (explorer.experiments.lens) on the trace's own decoder input and with
    the same heads turned off, so its last row is the document's "next_tokens"; nothing for an encoder-only model."""
    from explorer.experiments import lens

    if trace.top_tokens is None or trace.target_tokens is None:
        return {}
    return {"logit_lens": lens.for_trace(loaded, trace, ablation).by_layer()}
