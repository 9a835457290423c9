"""The experiments' cached runs (no page here): heads turned off (alone, a layer at a time, or picked), the logit lens
and direct logit attribution, each kept in the run store (explorer/app/store.py) under its key, each long one asked
for first by its page from the estimate beside it (cost.py)."""

from __future__ import annotations

from attention_explorer.explorer.app import cached, shelf, store
from attention_explorer.explorer.app.state import Choice
from attention_explorer.explorer.experiments import ablate, attribution, lens, replacements, sample
from attention_explorer.explorer.run import admission, cost, trace


def _tokens(answer: ablate.Answer) -> int:
    return max(len(answer.source_ids), len(answer.decoder_input or ()))


def _layer_rows(loaded) -> int:
    """layer_effects' batch rows: one a layer, and the clean run."""
    config = loaded.model.config
    return config.n_encoder_layers + config.n_decoder_layers + 1


def _run_bytes(model_name: str, result: trace.Trace) -> int:
    return store.text_cost(model_name, len(result.source_tokens)).bytes


def get_replacement(choice: Choice, method: str) -> replacements.Replacement:
    """What heads turned off by `method` write: nothing (zero), their mean over the model's sample of texts (kept
    once per model) or their output on another sample text (kept per text)."""
    loaded = shelf.model(choice.model)
    if method == "zero":
        return replacements.zero()
    if method == "mean":
        what = f"Averaging each head's output over {sample.name(loaded)}..."
        return store.shared().get(
            store.key("mean_ablation", choice.model),
            lambda: store.compute(
                what, lambda: ablate.replacement(loaded, "mean"), store.text_cost(choice.model, loaded.max_tokens)
            ),
        )
    answer = get_answer(choice)
    return store.shared().get(
        store.key("resampled", choice),
        lambda: store.compute(
            "Running another text of the sample for resample ablation...",
            lambda: ablate.replacement(loaded, method, answer.source_ids),
            store.text_cost(choice.model, len(answer.source_ids)),
        ),
    )


def get_answer(choice: Choice) -> ablate.Answer:
    """What the experiments measure on this sentence (ablate.answer)."""
    loaded = shelf.model(choice.model)
    return store.shared().get(
        store.key("answer", choice),
        lambda: ablate.answer(loaded, cached.get_trace(choice)),
    )


def get_read_answer(choice: Choice) -> ablate.Answer:
    """What the read-outs (the logit lens, the attribution) read: the experiments' answer and, for a decoder-only
    model, the text's last row too, whose target is the model's own top next token (ablate.with_text_end)."""
    loaded = shelf.model(choice.model)
    answer = get_answer(choice)
    if not loaded.is_decoder_only or answer.targets is None:
        return answer
    return store.shared().get(
        store.key("read_answer", choice),
        lambda: ablate.with_text_end(loaded, answer, cached.get_trace(choice)),
    )


EFFECTS = "Turning off every head, one batch row each..."


def _effects_parts(choice: Choice, method: str):
    """(the key of every head's effects, the chunks of batch rows they are measured in, the rows in all)."""
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    rows = sum(n_layers * n_heads for n_layers, n_heads in ablate.model_shapes(loaded).values())
    return store.key("effects", choice, method), ablate.parts(loaded, answer, rows), rows


def effects_left(choice: Choice, method: str) -> tuple[int, int, float]:
    """(heads measured so far, heads in all, about how many seconds the rest takes): chunks of a measurement that was
    stopped half way are kept, and only the rest is run (0 s once every head is kept)."""
    key, chunks, rows = _effects_parts(choice, method)
    if store.shared().peek(key) is not None:
        return rows, rows, 0.0
    done = sum(stop - start for start, stop in chunks if store.shared().peek((*key, start, stop)) is not None)
    clean = 0 if store.shared().peek((*key, None)) is not None else 1
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    logits = answer.decoder_input is not None
    return done, rows, cost.forward_seconds(loaded.model.config, tokens, rows - done + clean, logits)


def get_effects(choice: Choice, method: str) -> ablate.Effects:
    """Every head turned off alone, in batched forwards: each chunk of batch rows kept as it finishes (a measurement
    stopped by a click goes on from there), admitted a chunk at a time, a progress bar meanwhile."""
    loaded = shelf.model(choice.model)
    answer = get_answer(choice)
    replaced = get_replacement(choice, method)
    key = store.key("effects", choice, method)
    if (found := store.shared().peek(key)) is not None:
        return found  # type: ignore[return-value]
    seconds = effects_left(choice, method)[2]  # the whole measurement's lane: a long one
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))

    return store.in_chunks(
        key,
        EFFECTS,
        "heads",
        seconds,
        lambda rows: store.batch_bytes(choice.model, tokens, rows),
        lambda kept: ablate.effects(loaded, answer, replaced, kept),
    )


def layer_effects_seconds(choice: Choice) -> float:
    """About how long get_layer_effects takes (0 once kept): one forward a layer with its heads off, the clean one,
    and the run with the most-needed layer off that the page shows beside it."""
    if store.shared().peek(store.key("layer_effects", choice)) is not None:
        return 0.0
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    layers = len(loaded.model.encoder.layers if loaded.model.encoder is not None else ()) + len(
        loaded.model.decoder.layers if loaded.model.decoder is not None else ()
    )
    return cost.forward_seconds(loaded.model.config, tokens, layers + 2, answer.decoder_input is not None)


def get_layer_effects(choice: Choice) -> ablate.LayerEffects:
    """Every layer's heads turned off together (zero ablation), in batched forwards."""
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    return store.shared().get(
        store.key("layer_effects", choice),
        lambda: store.compute(
            "Turning off each layer's heads...",
            lambda: ablate.layer_effects(loaded, answer),
            admission.Cost(
                layer_effects_seconds(choice),
                store.batch_bytes(
                    choice.model,
                    _tokens(answer),
                    store.chunk_rows(ablate.parts(loaded, answer, _layer_rows(loaded))[0]),
                ),
            ),
        ),
    )


def outcome_seconds(choice: Choice, heads: tuple, method: str) -> float:
    """About how long get_outcome takes (0 once kept): the run with the heads off, each of its layers read beside the
    clean run's, and the right answer scored with and without them."""
    key = store.key("outcome", choice, tuple(sorted(heads)), method)
    if store.shared().peek(key) is not None:
        return 0.0
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    tokens = max(len(answer.source_ids), len(answer.decoder_input or ()))
    return cost.forward_seconds(loaded.model.config, tokens, 5, answer.decoder_input is not None)


def get_outcome(choice: Choice, heads: tuple, method: str) -> ablate.Outcome:
    """The sentence run again with these heads off, beside the clean run (AblationError for a bad request)."""
    loaded = shelf.model(choice.model)
    clean = cached.get_trace(choice)
    replaced = get_replacement(choice, method)
    return store.shared().get(
        store.key("outcome", choice, tuple(sorted(heads)), method),
        lambda: store.compute(
            "Running the model with those heads off...",
            lambda: ablate.outcome(loaded, clean, heads, method, replaced),
            admission.Cost(outcome_seconds(choice, heads, method), 2 * _run_bytes(choice.model, clean)),
        ),
    )


def get_lens(choice: Choice, position: int) -> lens.Lens:
    """Every sub-layer's state read through the output layer, at the decoder rows of get_read_answer a page looking at
    `position` reads (lens.window: every row of a short text); a decoder-only model's from its trace, without a
    forward, its last row included."""
    loaded = shelf.model(choice.model)
    answer = get_read_answer(choice)
    rows = lens.window(loaded, len(answer.decoder_input), position) if answer.decoder_input else None
    run = cached.get_trace(choice) if loaded.is_decoder_only else None
    return store.shared().get(
        store.key("lens", choice, rows),
        lambda: store.compute(
            "Reading every layer through the output matrix...",
            lambda: lens.lens(loaded, answer, rows=rows, run=run),
            store.text_cost(choice.model, _tokens(answer)),
        ),
    )


def get_attribution(choice: Choice, position: int, token_id: int, against: int | None = None):
    """One logit, or the logit difference with `against`, split into what each part of the model wrote (at any row
    of get_read_answer: a decoder-only text's last row too)."""
    loaded = shelf.model(choice.model)
    answer = get_read_answer(choice)
    entering = None
    if loaded.is_decoder_only:  # its answer is its own text: the run kept the state entering every layer
        states = cached.get_trace(choice).decoder_states
        assert states is not None and len(states["embeddings"]) == len(answer.source_ids)  # its rows and one more
        entering = lambda i: states["embeddings"] if i == 0 else states["after_ffn"][i - 1]  # noqa: E731
    return store.shared().get(
        store.key("attribution", choice, position, token_id, against),
        lambda: store.compute(
            "Splitting the logit into its parts...",
            lambda: attribution.attribute(loaded, answer, position, token_id, entering, against),
            store.text_cost(choice.model, _tokens(answer)),
        ),
    )


def get_forced_trace(choice: Choice) -> trace.Trace:
    """The run whose decoder reads the experiments' answer (an encoder-decoder teacher-forced on it; a decoder-only
    model's own text): the maps beside the attribution."""
    loaded = shelf.model(choice.model)
    if not loaded.is_encoder_decoder:
        return cached.get_trace(choice)
    answer = get_answer(choice)
    return store.shared().get(
        store.key("forced", choice),
        lambda: store.compute(
            "Running the decoder on the right answer...",
            lambda: trace.run(
                loaded,
                choice.text,
                choice.max_tokens,
                forced=list(answer.decoder_input or ()),
                reload=store.reload(choice.model),
            ),
            store.text_cost(choice.model, _tokens(answer)),
        ),
    )
