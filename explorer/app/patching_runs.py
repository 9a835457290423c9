"""Activation patching's cached runs (no page here): the checked inputs, the two texts' runs, the proposed
corruptions and each grid of patched runs, kept in the shared store (cached.store) under cached._key; a grid's chunks
are kept as they finish, so a measurement stopped by a click goes on from there."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
import torch

from attention_explorer.explorer.app import cached, experiment_runs, waiting
from attention_explorer.explorer.experiments import corruptions, patching, patching_encdec
from attention_explorer.explorer.experiments.patching import Patch
from attention_explorer.explorer.run import admission, cost


def _tokens(setup: patching.Setup) -> int:
    """The longest of the texts a patched run reads."""
    return max(len(setup.clean_ids), len(setup.corrupt_ids), len(setup.decoder_input or ()))


def get_setup(model_name: str, text: str, max_tokens: int, corrupt: str, answer: str, wrong: str) -> patching.Setup:
    """The inputs checked and read as token ids (PatchingError says what is wrong)."""
    loaded = cached.model(model_name)
    return cached.store().get(
        cached._key("patching_setup", model_name, text, max_tokens, corrupt, answer, wrong),
        lambda: patching.setup(loaded, text, corrupt, answer, wrong, max_tokens),
    )


def get_runs(model_name: str, setup: patching.Setup) -> tuple[patching.Run, patching.Run]:
    """(the clean run, the corrupted run) as patching reads them."""
    loaded = cached.model(model_name)

    def both():
        return tuple(patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))

    return cached.store().get(
        cached._key("patching_runs", model_name, setup),
        lambda: cached._compute(
            "Running the clean and the corrupted text...", both, cached.text_cost(model_name, _tokens(setup), 2)
        ),
    )


def get_top(model_name: str, ids: Sequence[int]) -> str:
    """The model's most likely next token after these ids."""
    loaded = cached.model(model_name)

    @torch.inference_mode()
    def top() -> str:
        logits = loaded.model(torch.tensor([list(ids)])).logits
        return loaded.target_vocabulary.id_to_token(int(logits[0, -1].argmax()))

    return cached.store().get(
        cached._key("top_next", model_name, tuple(ids)),
        lambda: cached._compute(
            "Reading the model's most likely next token...", top, cached.text_cost(model_name, len(ids))
        ),
    )


def get_proposals(model_name: str, text: str, max_tokens: int) -> list[corruptions.Proposal]:
    """The corrupted texts proposed for this clean one (corruptions.proposals)."""
    loaded = cached.model(model_name)
    tokens = len(cached.get_trace(model_name, text, max_tokens).source_tokens)
    # a proposal that reads the model's own next tokens runs the text again for each: only where that is quick
    quick = cost.forward_seconds(loaded.model.config, tokens, rows=1 + corruptions.TRIES) <= cost.ASK_AFTER_SECONDS
    return cached.store().get(
        cached._key("patching_proposals", model_name, text, max_tokens),
        lambda: corruptions.proposals(loaded, text, max_tokens, answers(model_name) if quick else None),
    )


def answers(model_name: str) -> corruptions.Answers:
    """What a change swaps: the two runs' most likely next tokens (decoder-only), or an encoder-decoder's two outputs
    where they first differ; None where it swaps nothing."""
    loaded = cached.model(model_name)

    def swapped(clean, corrupt):
        if loaded.is_encoder_decoder:
            _, right, wrong = patching_encdec.target_row(loaded, clean, corrupt)
            vocabulary = loaded.target_vocabulary
            right, wrong = vocabulary.id_to_token(right), vocabulary.id_to_token(wrong)
        else:
            right, wrong = get_top(model_name, clean), get_top(model_name, corrupt)
        return None if right == wrong else (right, wrong)

    return swapped


def runs_seconds(model_name: str, setup: patching.Setup) -> float:
    """About how long reading both texts takes (0 once kept)."""
    if cached.store().peek(cached._key("patching_runs", model_name, setup)) is not None:
        return 0.0
    return patching.read_seconds(cached.model(model_name), len(setup.clean_ids))


def patches(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
) -> list[Patch]:
    """A grid's patches: "residual" (layer x position), "heads" (every kind's layer x head) or "positions" (one
    head of `kind`)."""
    loaded = cached.model(model_name)
    if which == "residual":
        return patching.residual_patches(loaded, setup)
    if which == "heads":
        return patching.head_patches(loaded)
    return patching.position_patches(setup, layer, head, kind)


def _key(model_name: str, setup: patching.Setup, which: str, layer: int, head: int, kind: str) -> tuple:
    return cached._key("patching", model_name, setup, which, *((kind, layer, head) if which == "positions" else ()))


def seconds(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
) -> float:
    """About how long a grid takes (0 once kept)."""
    if cached.store().peek(_key(model_name, setup, which, layer, head, kind)) is not None:
        return 0.0
    return patching.seconds(cached.model(model_name), setup, patches(model_name, setup, which, layer, head, kind))


def get_weights(model_name: str, setup: patching.Setup, ids, kind: str, layer: int):
    """(H, Tq, Tk) an encoder-decoder's layer of one attention kind in one source's run, the decoder reading
    setup.decoder_input."""
    loaded = cached.model(model_name)
    return cached.store().get(
        cached._key("patching_weights", model_name, setup, tuple(ids), kind, layer),
        lambda: cached._compute(
            "Reading the head's maps...",
            lambda: patching_encdec.weights(loaded, ids, setup.decoder_input, kind, layer),
            cached.text_cost(model_name, _tokens(setup)),
        ),
    )


def get_shares(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
):
    """Each patch's share restored, in the grid's order: chunks of batch rows kept as they finish, an inference slot
    admitted a chunk at a time (explorer/app/waiting.py), a progress bar meanwhile."""
    key = _key(model_name, setup, which, layer, head, kind)
    if (found := cached.store().peek(key)) is not None:
        return found
    loaded = cached.model(model_name)
    clean, corrupt = get_runs(model_name, setup)
    chosen = patches(model_name, setup, which, layer, head, kind)
    message = f"Patching {len(chosen)} activations, one batch row each..."
    bar = st.progress(0.0, text=message)
    seconds_all = seconds(model_name, setup, which, layer, head, kind)

    def kept(part, rows, work):
        def run():  # a chunk of batch rows at a time, admitted by its memory, in the long runs' lane
            rows = experiment_runs.chunk_rows(part)
            needs = admission.Cost(seconds_all, experiment_runs.batch_bytes(model_name, _tokens(setup), rows))
            with waiting.admitted(needs):
                return work()

        values = cached.store().get((*key, *part), run)
        bar.progress(part[1] / rows, text=f"{message} {part[1]} of {rows} that change the run")
        return values

    try:
        return cached.store().get(key, lambda: patching.measure(loaded, setup, clean, corrupt, chosen, kept))
    finally:
        bar.empty()
