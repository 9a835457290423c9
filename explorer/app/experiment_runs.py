"""The experiments' cached runs (no page here): heads turned off (alone, a layer at a time, or picked), the logit lens
and direct logit attribution, each kept in the shared store (cached.store) under cached._key, each long one asked for
first by its page from the estimate beside it (cost.py)."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, waiting
from attention_explorer.explorer.experiments import ablate, attribution, lens, replacements, sample
from attention_explorer.explorer.run import admission, cost, trace


def batch_bytes(model_name: str, tokens: int, rows: int) -> int:
    """An experiment's chunk of `rows` batch rows over `tokens` tokens (cost.batch_bytes)."""
    loaded = cached.model(model_name)
    return cost.batch_bytes(loaded.model.config, tokens, rows, loaded.family.next_token_head)


def _tokens(answer: ablate.Answer) -> int:
    return max(len(answer.source_ids), len(answer.decoder_input or ()))


def _layer_rows(loaded) -> int:
    """layer_effects' batch rows: one a layer, and the clean run."""
    config = loaded.model.config
    return config.n_encoder_layers + config.n_decoder_layers + 1


def _run_bytes(model_name: str, result: trace.Trace) -> int:
    return cached.text_cost(model_name, len(result.source_tokens)).bytes


def chunk_rows(part: tuple[int, int] | None) -> int:
    """The batch rows of one chunk of a measurement (None: the clean run, one row)."""
    return part[1] - part[0] if part is not None else 1


def get_replacement(model_name: str, text: str, max_tokens: int, method: str) -> replacements.Replacement:
    """What heads turned off by `method` write: nothing (zero), their mean over the model's sample of texts (kept
    once per model) or their output on another sample text (kept per text)."""
    loaded = cached.model(model_name)
    if method == "zero":
        return replacements.zero()
    if method == "mean":
        what = f"Averaging each head's output over {sample.name(loaded)}..."
        return cached.store().get(
            cached._key("mean_ablation", model_name),
            lambda: cached._compute(
                what, lambda: ablate.replacement(loaded, "mean"), cached.text_cost(model_name, loaded.max_tokens)
            ),
        )
    answer = get_answer(model_name, text, max_tokens)
    return cached.store().get(
        cached._key("resampled", model_name, text, max_tokens),
        lambda: cached._compute(
            "Running another text of the sample for resample ablation...",
            lambda: ablate.replacement(loaded, method, answer.source_ids),
            cached.text_cost(model_name, len(answer.source_ids)),
        ),
    )


def get_answer(model_name: str, text: str, max_tokens: int) -> ablate.Answer:
    """What the experiments measure on this sentence (ablate.answer)."""
    loaded = cached.model(model_name)
    return cached.store().get(
        cached._key("answer", model_name, text, max_tokens),
        lambda: ablate.answer(loaded, cached.get_trace(model_name, text, max_tokens)),
    )


def get_read_answer(model_name: str, text: str, max_tokens: int) -> ablate.Answer:
    """What the read-outs (the logit lens, the attribution) read: the experiments' answer and, for a decoder-only
    model, the text's last row too, whose target is the model's own top next token (ablate.with_text_end)."""
    loaded = cached.model(model_name)
    answer = get_answer(model_name, text, max_tokens)
    if not loaded.is_decoder_only or answer.targets is None:
        return answer
    return cached.store().get(
        cached._key("read_answer", model_name, text, max_tokens),
        lambda: ablate.with_text_end(loaded, answer, cached.get_trace(model_name, text, max_tokens)),
    )


EFFECTS = "Turning off every head, one batch row each..."


def _effects_parts(model_name: str, text: str, max_tokens: int, method: str):
    """(the key of every head's effects, the chunks of batch rows they are measured in, the rows in all)."""
    loaded, answer = cached.model(model_name), get_answer(model_name, text, max_tokens)
    rows = sum(n_layers * n_heads for n_layers, n_heads in ablate.model_shapes(loaded).values())
    return cached._key("effects", model_name, text, max_tokens, method), ablate.parts(loaded, answer, rows), rows


def effects_left(model_name: str, text: str, max_tokens: int, method: str) -> tuple[int, int, float]:
    """(heads measured so far, heads in all, about how many seconds the rest takes): chunks of a measurement that was
    stopped half way are kept, and only the rest is run (0 s once every head is kept)."""
    key, chunks, rows = _effects_parts(model_name, text, max_tokens, method)
    if cached.store().peek(key) is not None:
        return rows, rows, 0.0
    done = sum(stop - start for start, stop in chunks if cached.store().peek((*key, start, stop)) is not None)
    clean = 0 if cached.store().peek((*key, None)) is not None else 1
    loaded, answer = cached.model(model_name), get_answer(model_name, text, max_tokens)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    logits = answer.decoder_input is not None
    return done, rows, cost.forward_seconds(loaded.model.config, tokens, rows - done + clean, logits)


def get_effects(model_name: str, text: str, max_tokens: int, method: str) -> ablate.Effects:
    """Every head turned off alone, in batched forwards: each chunk of batch rows kept as it finishes (a measurement
    stopped by a click goes on from there), admitted a chunk at a time, a progress bar meanwhile."""
    loaded = cached.model(model_name)
    answer = get_answer(model_name, text, max_tokens)
    replaced = get_replacement(model_name, text, max_tokens, method)
    key = cached._key("effects", model_name, text, max_tokens, method)
    if (found := cached.store().peek(key)) is not None:
        return found  # type: ignore[return-value]
    bar = st.progress(0.0, text=EFFECTS)
    seconds = effects_left(model_name, text, max_tokens, method)[2]  # the whole measurement's lane: a long one
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))

    def kept(part, rows, work):
        def run():  # a chunk of batch rows at a time, admitted by its memory
            with waiting.admitted(admission.Cost(seconds, batch_bytes(model_name, tokens, chunk_rows(part)))):
                return work()

        values = cached.store().get((*key, *(part or (None,))), run)
        if part is not None:
            bar.progress(part[1] / rows, text=f"{EFFECTS} {part[1]} of {rows} heads")
        return values

    try:
        return cached.store().get(key, lambda: ablate.effects(loaded, answer, replaced, kept))
    finally:
        bar.empty()


def layer_effects_seconds(model_name: str, text: str, max_tokens: int) -> float:
    """About how long get_layer_effects takes (0 once kept): one forward a layer with its heads off, the clean one,
    and the run with the most-needed layer off that the page shows beside it."""
    if cached.store().peek(cached._key("layer_effects", model_name, text, max_tokens)) is not None:
        return 0.0
    loaded, answer = cached.model(model_name), get_answer(model_name, text, max_tokens)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    layers = len(loaded.model.encoder.layers if loaded.model.encoder is not None else ()) + len(
        loaded.model.decoder.layers if loaded.model.decoder is not None else ()
    )
    return cost.forward_seconds(loaded.model.config, tokens, layers + 2, answer.decoder_input is not None)


def get_layer_effects(model_name: str, text: str, max_tokens: int) -> ablate.LayerEffects:
    """Every layer's heads turned off together (zero ablation), in batched forwards."""
    loaded, answer = cached.model(model_name), get_answer(model_name, text, max_tokens)
    return cached.store().get(
        cached._key("layer_effects", model_name, text, max_tokens),
        lambda: cached._compute(
            "Turning off each layer's heads...",
            lambda: ablate.layer_effects(loaded, answer),
            admission.Cost(
                layer_effects_seconds(model_name, text, max_tokens),
                batch_bytes(
                    model_name, _tokens(answer), chunk_rows(ablate.parts(loaded, answer, _layer_rows(loaded))[0])
                ),
            ),
        ),
    )


def outcome_seconds(model_name: str, text: str, max_tokens: int, heads: tuple, method: str) -> float:
    """About how long get_outcome takes (0 once kept): the run with the heads off, each of its layers read beside the
    clean run's, and the right answer scored with and without them."""
    key = cached._key("outcome", model_name, text, max_tokens, tuple(sorted(heads)), method)
    if cached.store().peek(key) is not None:
        return 0.0
    loaded, answer = cached.model(model_name), get_answer(model_name, text, max_tokens)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    return cost.forward_seconds(loaded.model.config, tokens, 5, answer.decoder_input is not None)


def get_outcome(model_name: str, text: str, max_tokens: int, heads: tuple, method: str) -> ablate.Outcome:
    """The sentence run again with these heads off, beside the clean run (AblationError for a bad request)."""
    loaded = cached.model(model_name)
    clean = cached.get_trace(model_name, text, max_tokens)
    replaced = get_replacement(model_name, text, max_tokens, method)
    return cached.store().get(
        cached._key("outcome", model_name, text, max_tokens, tuple(sorted(heads)), method),
        lambda: cached._compute(
            "Running the model with those heads off...",
            lambda: ablate.outcome(loaded, clean, heads, method, replaced),
            admission.Cost(
                outcome_seconds(model_name, text, max_tokens, heads, method), 2 * _run_bytes(model_name, clean)
            ),
        ),
    )


def get_lens(model_name: str, text: str, max_tokens: int, position: int) -> lens.Lens:
    """Every sub-layer's state read through the output layer, at the decoder rows of get_read_answer a page looking at
    `position` reads (lens.window: every row of a short text); a decoder-only model's from its trace, without a
    forward, its last row included."""
    loaded = cached.model(model_name)
    answer = get_read_answer(model_name, text, max_tokens)
    rows = lens.window(loaded, len(answer.decoder_input), position) if answer.decoder_input else None
    run = cached.get_trace(model_name, text, max_tokens) if loaded.is_decoder_only else None
    return cached.store().get(
        cached._key("lens", model_name, text, max_tokens, rows),
        lambda: cached._compute(
            "Reading every layer through the output matrix...",
            lambda: lens.lens(loaded, answer, rows=rows, run=run),
            cached.text_cost(model_name, _tokens(answer)),
        ),
    )


def get_attribution(
    model_name: str, text: str, max_tokens: int, position: int, token_id: int, against: int | None = None
):
    """One logit, or the logit difference with `against`, split into what each part of the model wrote (at any row
    of get_read_answer: a decoder-only text's last row too)."""
    loaded = cached.model(model_name)
    answer = get_read_answer(model_name, text, max_tokens)
    entering = None
    if loaded.is_decoder_only:  # its answer is its own text: the run kept the state entering every layer
        states = cached.get_trace(model_name, text, max_tokens).decoder_states
        assert states is not None and len(states["embeddings"]) == len(answer.source_ids)  # its rows and one more
        entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    return cached.store().get(
        cached._key("attribution", model_name, text, max_tokens, position, token_id, against),
        lambda: cached._compute(
            "Splitting the logit into its parts...",
            lambda: attribution.attribute(loaded, answer, position, token_id, entering, against),
            cached.text_cost(model_name, _tokens(answer)),
        ),
    )


def get_forced_trace(model_name: str, text: str, max_tokens: int) -> trace.Trace:
    """The run whose decoder reads the experiments' answer (an encoder-decoder teacher-forced on it; a decoder-only
    model's own text): the maps beside the attribution."""
    loaded = cached.model(model_name)
    if not loaded.is_encoder_decoder:
        return cached.get_trace(model_name, text, max_tokens)
    answer = get_answer(model_name, text, max_tokens)
    return cached.store().get(
        cached._key("forced", model_name, text, max_tokens),
        lambda: cached._compute(
            "Running the decoder on the right answer...",
            lambda: trace.run(
                loaded, text, max_tokens, forced=list(answer.decoder_input or ()), reload=cached._reload(model_name)
            ),
            cached.text_cost(model_name, _tokens(answer)),
        ),
    )
