"""The experiments' cached runs (no page here): heads turned off (alone, a layer at a time, or picked), the logit lens
and direct logit attribution, each kept in the run store (explorer/app/store.py) under its key, each long one asked
for first by its page from the estimate beside it (cost.py)."""

from __future__ import annotations

from attention_explorer.explorer.app import cached, shelf, store
from attention_explorer.explorer.app.state import Choice
from attention_explorer.explorer.experiments import ablate, attribution, lens, replacements, sample
from attention_explorer.explorer.run import admission, cost, trace
from attention_explorer.models.ablation import Head


def _tokens(answer: ablate.Answer) -> int:
    return max(len(answer.source_ids), len(answer.decoder_input or ()))


def _layer_rows(loaded) -> int:
    """layer_effects' batch rows: one a layer, and the clean run."""
    config = loaded.model.config
    return config.n_encoder_layers + config.n_decoder_layers + 1


def _run_bytes(model_name: str, result: trace.Trace) -> int:
    return store.text_cost(model_name, len(result.source_tokens)).bytes


def _replacement_key(choice: Choice, method: str) -> tuple:
    return store.key("mean_ablation", choice.model) if method == "mean" else store.key("resampled", choice)


def _replacement_cost(choice: Choice, method: str) -> admission.Cost:
    """A mean replacement: about a forward at the model's most tokens; a resampled one: a forward over the answer."""
    if method == "mean":
        return store.text_cost(choice.model, shelf.model(choice.model).max_tokens)
    return store.text_cost(choice.model, len(get_answer(choice).source_ids))


def replacement_seconds(choice: Choice, method: str) -> float:
    """About how long get_replacement takes before the heads' runs it serves (0 for zero, or once kept)."""
    if method == "zero" or store.shared().peek(_replacement_key(choice, method)) is not None:
        return 0.0
    return _replacement_cost(choice, method).seconds


def get_replacement(choice: Choice, method: str) -> replacements.Replacement:
    """What heads turned off by `method` write: nothing (zero), their mean over the model's sample of texts (kept
    once per model) or their output on another sample text (kept per text)."""
    loaded = shelf.model(choice.model)
    if method == "zero":
        return replacements.zero()
    if method == "mean":
        what = f"Averaging each head's output over {sample.name(loaded)}..."
        compute = lambda: ablate.replacement(loaded, "mean")  # noqa: E731
    else:
        what = "Running another text of the sample for resample ablation..."
        compute = lambda: ablate.replacement(loaded, method, get_answer(choice).source_ids)  # noqa: E731
    return store.shared().get(
        _replacement_key(choice, method),
        lambda: store.compute(what, compute, _replacement_cost(choice, method)),
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


def _forwards(loaded, answer: ablate.Answer, rows: list[int]) -> float:
    """Separate batched forwards over the answer's tokens, of `rows[i]` batch rows each, as ablate._forward runs them
    (with the output layer where the answer is scored by it): each reads the weights and dispatches its layers once."""
    config, tokens, logits = loaded.model.config, _tokens(answer), answer.decoder_input is not None
    return sum((cost.forward_seconds(config, tokens, n, logits) for n in rows), 0.0)


def effects_left(choice: Choice, method: str) -> tuple[int, int, float]:
    """(heads measured so far, heads in all, about how many seconds the rest takes): chunks of a measurement that was
    stopped half way are kept, and only the rest is run (0 s once every head is kept): the clean run (one batch row)
    unless kept, then a forward for each chunk of batch rows not kept (ablate._each_row)."""
    key, chunks, rows = _effects_parts(choice, method)
    if store.shared().peek(key) is not None:
        return rows, rows, 0.0
    left = [stop - start for start, stop in chunks if store.shared().peek((*key, start, stop)) is None]
    clean = [] if store.shared().peek((*key, None)) is not None else [1]
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    return rows - sum(left), rows, _forwards(loaded, answer, clean + left) + replacement_seconds(choice, method)


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
    """About how long get_layer_effects takes (0 once kept): the clean run (one batch row), then a forward for each
    chunk of the layers' batch rows, one a layer with its heads off (ablate._each_row)."""
    if store.shared().peek(store.key("layer_effects", choice)) is not None:
        return 0.0
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    layers = _layer_rows(loaded) - 1
    return _forwards(loaded, answer, [1] + [stop - start for start, stop in ablate.parts(loaded, answer, layers)])


def top_layer(choice: Choice) -> tuple[Head, ...] | None:
    """The heads of the layer whose heads off hurt most (what Turn heads off's lesson step runs next), once the
    layers' effects are kept; None before."""
    found = store.shared().peek(store.key("layer_effects", choice))
    if found is None:
        return None
    (kind, layer), _ = found.ranked()[0]
    n_heads = ablate.model_shapes(shelf.model(choice.model))[kind][1]
    return tuple(Head(kind, layer, h) for h in range(n_heads))


def top_head(choice: Choice, method: str) -> tuple[Head] | None:
    """The head whose removal alone hurt most, as a one-head tuple, once every head's effect is kept; None before."""
    found = store.shared().peek(store.key("effects", choice, method))
    return None if found is None else (found.ranked()[0][0],)


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


def outcome_seconds(choice: Choice, heads: tuple | None, method: str) -> float:
    """About how long get_outcome takes (0 once kept; `heads` None: heads not known yet, never kept): ablate.outcome's
    run with the heads off (a trace, as a first run; an encoder-decoder's teacher-forced, then its greedy output with
    them off) and two one-row forwards: the right answer scored with and without them (output.score), or the
    sentence embedding with and without them; before them, a mean or resampled replacement unless kept."""
    key = None if heads is None else store.key("outcome", choice, tuple(sorted(heads)), method)
    if key is not None and store.shared().peek(key) is not None:
        return 0.0
    loaded, answer = shelf.model(choice.model), get_answer(choice)
    config, tokens = loaded.model.config, _tokens(answer)
    seconds = cost.forward_seconds(config, tokens, 1, loaded.family.next_token_head) + _forwards(loaded, answer, [1, 1])
    seconds = seconds + replacement_seconds(choice, method)  # what the heads off write, first (mean, resample)
    if loaded.is_encoder_decoder:
        source = len(answer.source_ids)
        seconds = seconds + cost.greedy_seconds(config, source, trace.target_budget(source))
    return seconds


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
            store.stand_in(store.text_cost(choice.model, _tokens(answer))),
        ),
    )


def attribution_seconds(choice: Choice, position: int, token_id: int, against: int | None = None) -> float:
    """About how long get_attribution takes (0 once kept): about a forward over the answer."""
    if store.shared().peek(store.key("attribution", choice, position, token_id, against)) is not None:
        return 0.0
    return store.text_cost(choice.model, _tokens(get_read_answer(choice))).seconds


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
            store.stand_in(store.text_cost(choice.model, _tokens(answer))),
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
