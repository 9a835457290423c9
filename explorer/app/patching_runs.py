"""Activation patching's cached runs (no page here): the checked inputs, the two texts' runs, the proposed
corruptions and each grid of patched runs, kept in the run store (explorer/app/store.py) under its key; a grid's chunks
are kept as they finish, so a measurement stopped by a click goes on from there."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention_explorer.explorer.app import cached, shelf, store
from attention_explorer.explorer.app.state import Choice
from attention_explorer.explorer.experiments import corruptions, patching, patching_encdec
from attention_explorer.explorer.experiments.patching import Patch
from attention_explorer.explorer.run import cost
from attention_explorer.explorer.run import logits as final_linear
from attention_explorer.models import ablation


def _tokens(setup: patching.Setup) -> int:
    """The longest of the texts a patched run reads."""
    return max(len(setup.clean_ids), len(setup.corrupt_ids), len(setup.decoder_input or ()))


def get_setup(choice: Choice, corrupt: str, answer: str, wrong: str) -> patching.Setup:
    """The inputs checked and read as token ids (PatchingError says what is wrong)."""
    loaded = shelf.model(choice.model)
    return store.shared().get(
        store.key("patching_setup", choice, corrupt, answer, wrong),
        lambda: patching.setup(loaded, choice.text, corrupt, answer, wrong, choice.max_tokens),
    )


def get_runs(model_name: str, setup: patching.Setup) -> tuple[patching.Run, patching.Run]:
    """(the clean run, the corrupted run) as patching reads them."""
    loaded = shelf.model(model_name)

    def both():
        return tuple(patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))

    return store.shared().get(
        store.key("patching_runs", model_name, setup),
        lambda: store.compute(
            "Running the clean and the corrupted text...",
            both,
            store.text_cost(model_name, _tokens(setup), 2, band=True),  # patching.read keeps no raw scores
        ),
    )


def get_top(model_name: str, ids: Sequence[int]) -> str:
    """The model's most likely next token after these ids."""
    loaded = shelf.model(model_name)

    @torch.inference_mode()
    def top() -> str:
        out = loaded.model(torch.tensor([list(ids)], device=loaded.device), logits=False)
        last = final_linear.output_row(loaded.model, out.decoder.output[0], -1)  # (V,): the last row's logits alone
        return loaded.target_vocabulary.id_to_token(int(last.argmax()))

    return store.shared().get(
        store.key("top_next", model_name, tuple(ids)),
        lambda: store.compute(
            "Reading the model's most likely next token...", top, store.text_cost(model_name, len(ids))
        ),
    )


def get_proposals(choice: Choice) -> list[corruptions.Proposal]:
    """The corrupted texts proposed for this clean one (corruptions.proposals)."""
    loaded = shelf.model(choice.model)
    tokens = len(cached.get_trace(choice).source_tokens)
    # a proposal that reads the model's own next tokens runs the text again for each: only where that is quick
    quick = not cost.asks_first(cost.forward_seconds(loaded.model.config, tokens, rows=1 + corruptions.TRIES))
    return store.shared().get(
        store.key("patching_proposals", choice),
        lambda: corruptions.proposals(loaded, choice.text, choice.max_tokens, answers(choice.model) if quick else None),
    )


def answers(model_name: str) -> corruptions.Answers:
    """What a change swaps: the two runs' most likely next tokens (decoder-only), or an encoder-decoder's two outputs
    where they first differ; None where it swaps nothing."""
    loaded = shelf.model(model_name)

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
    if store.shared().peek(store.key("patching_runs", model_name, setup)) is not None:
        return 0.0
    return patching.read_seconds(shelf.model(model_name), len(setup.clean_ids))


def patches(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
) -> list[Patch]:
    """A grid's patches: "residual" (layer x position), "heads" (every kind's layer x head) or "positions" (one
    head of `kind`)."""
    loaded = shelf.model(model_name)
    if which == "residual":
        return patching.residual_patches(loaded, setup)
    if which == "heads":
        return patching.head_patches(loaded)
    return patching.position_patches(setup, layer, head, kind)


def _key(model_name: str, setup: patching.Setup, which: str, layer: int, head: int, kind: str) -> tuple:
    return store.key("patching", model_name, setup, which, *((kind, layer, head) if which == "positions" else ()))


def seconds(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
) -> float:
    """About how long a grid takes (0 once kept)."""
    if store.shared().peek(_key(model_name, setup, which, layer, head, kind)) is not None:
        return 0.0
    return patching.seconds(shelf.model(model_name), setup, patches(model_name, setup, which, layer, head, kind))


def head_seconds(choice: Choice, setup: patching.Setup, corrupt: str) -> float:
    """About how long step 3 takes once every head is measured (0 for what is kept): the positions grid of the head
    that restores most (before the heads' grid is kept, of a head in the middle layer: half the layers from it up),
    and that head's maps in both runs (an encoder-decoder's layer in each; a decoder-only model's corrupted text's
    first run)."""
    loaded = shelf.model(choice.model)
    kind, head = "decoder_self", 0
    layer = ablation.shapes(loaded.model.config)[kind][0] // 2
    if (shares := store.shared().peek(_key(choice.model, setup, "heads", 0, 0, kind))) is not None:
        best = patching.head_patches(loaded)[int(max(range(len(shares)), key=lambda i: shares[i]))]
        kind, layer, head = best.kind, best.layer, best.head
    found = seconds(choice.model, setup, "positions", layer, head, kind)
    if loaded.is_encoder_decoder:
        for ids in (setup.clean_ids, setup.corrupt_ids):
            if store.shared().peek(store.key("patching_weights", choice.model, setup, tuple(ids), kind, layer)) is None:
                found = store.text_cost(choice.model, _tokens(setup)).seconds + found
    elif store.shared().peek(store.key("trace", choice.with_text(corrupt))) is None:
        found = store.first_run_cost(choice.with_text(corrupt)).seconds + found
    return found


def get_weights(model_name: str, setup: patching.Setup, ids, kind: str, layer: int):
    """(H, Tq, Tk) an encoder-decoder's layer of one attention kind in one source's run, the decoder reading
    setup.decoder_input."""
    loaded = shelf.model(model_name)
    return store.shared().get(
        store.key("patching_weights", model_name, setup, tuple(ids), kind, layer),
        lambda: store.compute(
            "Reading the head's maps...",
            lambda: patching_encdec.weights(loaded, ids, setup.decoder_input, kind, layer),
            store.text_cost(model_name, _tokens(setup)),
        ),
    )


def get_shares(
    model_name: str, setup: patching.Setup, which: str, layer: int = 0, head: int = 0, kind: str = "decoder_self"
):
    """Each patch's share restored, in the grid's order: chunks of batch rows kept as they finish, an inference slot
    admitted a chunk at a time (explorer/app/waiting.py), a progress bar meanwhile."""
    key = _key(model_name, setup, which, layer, head, kind)
    if (found := store.shared().peek(key)) is not None:
        return found
    loaded = shelf.model(model_name)
    clean, corrupt = get_runs(model_name, setup)
    chosen = patches(model_name, setup, which, layer, head, kind)
    # a chunk of batch rows at a time, admitted by its memory, in the long runs' lane
    return store.in_chunks(
        key,
        f"Patching {len(chosen)} activations, one batch row each...",
        "that change the run",
        seconds(model_name, setup, which, layer, head, kind),
        lambda rows: store.batch_bytes(model_name, _tokens(setup), rows),
        lambda kept: patching.measure(loaded, setup, clean, corrupt, chosen, kept),
    )
