"""Activation patching, shared by its Explore page and its lesson step: the clean text (the sidebar's), a corrupted
one, the right and the wrong answer; then, in the order a class asks, which positions carry the answer (the residual
stream), which heads (each head's output), and what such a head looks at (position by position, and its map in both
runs)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import streamlit as st

from explorer.app import cached, patching_runs, state
from explorer.app.callbacks import bound, use_model
from explorer.experiments.patching import PatchingError
from explorer.figures import experiments as experiment_figures
from explorer.figures import patching as figures
from explorer.figures.heatmap import fits_half_width, head_heatmap
from explorer.figures.labels import markdown_literal
from explorer.pages._long import ask_first
from explorer.pages._shared import chart, current_trace, predict, sidebar_loaded, stop
from models import registry

NAMES = "When Mary and John went to the store, John gave a drink to"
SWAPPED = "When Mary and John went to the store, Mary gave a drink to"
NAME_MODEL = "smollm2"
CORRUPT, ANSWER, WRONG = "patching_corrupt", "patching_answer", "patching_wrong"
PROPOSED_FOR = "patching_proposed_for"  # (model, text, max tokens) the boxes were last filled for
HEAD = "patching_head"  # (layer, head) whose positions and map are shown
OVERVIEW = 256  # past this many tokens the two maps show block means
CONVENTION = (
    "Patching convention: the metric is the logit difference, logit(right) - logit(wrong), at the last position; a "
    "patch copies one activation of the clean run into the corrupted run, and its result is the share restored, "
    "(patched - corrupted) / (clean - corrupted): 1 brings the clean answer back, 0 changes nothing."
)


def _fill(corrupt: str, answer: str, wrong: str) -> None:
    for key, value in ((CORRUPT, corrupt), (ANSWER, answer), (WRONG, wrong)):
        state.keep(st.session_state, key, value)


def _name_swap() -> None:
    """The button's on_click: SmolLM2 on the name-swap sentence, its corruption and answers."""
    use_model(NAME_MODEL, NAMES)
    state.keep(st.session_state, state.TEXT, NAMES)
    st.session_state.pop(state.ASIDE, None)
    _fill(SWAPPED, " Mary", " John")
    st.session_state[PROPOSED_FOR] = (NAME_MODEL, NAMES, st.session_state[state.MAX_TOKENS])
    st.session_state.pop(HEAD, None)


def _offer_name_swap(key: str) -> None:
    if NAME_MODEL in registry.MODELS:
        st.button(
            "Try the name swap on SmolLM2: Mary and John",
            on_click=_name_swap,
            icon=":material/swap_horiz:",
            key=f"{key}_name_swap",
        )


def _token(loaded, token_id: int) -> str:
    return loaded.target_vocabulary.id_to_token(token_id)


def _inputs(key: str, sidebar: tuple[str, str, int]) -> None:
    """The corrupted text and the two answers, filled with the first proposal when the sidebar's text is new; each
    proposal one click away."""
    for name in (CORRUPT, ANSWER, WRONG):
        st.session_state.setdefault(name, "")
    proposals = patching_runs.get_proposals(*sidebar)
    if st.session_state.get(PROPOSED_FOR) != sidebar:
        st.session_state[PROPOSED_FOR] = sidebar
        first = proposals[0] if proposals else None
        _fill(first.text, first.answer, first.wrong) if first else _fill("", "", "")
        st.session_state.pop(HEAD, None)
    if proposals:
        st.caption("Proposed corruptions of this text (one token changed, the answers they should swap):")
        columns = st.columns(len(proposals))
        for column, proposal in zip(columns, proposals, strict=True):
            column.button(
                f"{proposal.name}: {proposal.answer.strip('Ġ▁')} / {proposal.wrong.strip('Ġ▁')}",
                on_click=_fill,
                args=(proposal.text, proposal.answer, proposal.wrong),
                key=f"{key}_use_{proposal.name}",
                help=proposal.text,
            )
    else:
        st.caption(
            "No corruption proposed for this text: write the clean text with one word changed for another of as "
            "many tokens."
        )
    st.text_input("Corrupted text (the same number of tokens, one detail changed)", **bound(CORRUPT))
    left, right = st.columns(2)
    left.text_input("Right answer (the clean text's next token)", **bound(ANSWER))
    right.text_input("Wrong answer (the corrupted text's next token)", **bound(WRONG))


def _clicked_head(point: Mapping) -> None:
    data = point.get("customdata")
    if data is not None:
        st.session_state[HEAD] = (int(data[0]), int(data[1]))


DEPTHS = ("the first third of the layers", "the middle third", "the last third")


def _depth(layer: int, n_layers: int) -> int:
    return min(2, 3 * layer // n_layers)


def patching_view(key: str, lesson: bool = False) -> None:
    """The whole experiment, from the inputs to one head's maps; `lesson`: the class predicts where the head that
    restores most sits before anything is patched."""
    loaded = sidebar_loaded()
    sidebar = state.sidebar(st.session_state)
    if not loaded.is_decoder_only:
        what = "an encoder-decoder" if loaded.is_encoder_decoder else "an encoder with no output layer"
        st.info(
            markdown_literal(
                f"Patching here measures the next token of a decoder-only model; {loaded.title} is {what}. Choose "
                "SmolLM2, the induction model or a GPT-2 or Llama folder, or try the classic example:"
            )
        )
        _offer_name_swap(key)
        stop()
    current_trace()  # the sidebar's text can be read (a message and a stop otherwise)
    _offer_name_swap(key)
    _inputs(key, sidebar)
    if not st.session_state[CORRUPT].strip():
        st.info("Write a corrupted text above: the clean one with one detail changed, as many tokens long.")
        stop()
    try:
        setup = patching_runs.get_setup(
            *sidebar, st.session_state[CORRUPT], st.session_state[ANSWER], st.session_state[WRONG]
        )
    except (PatchingError, ValueError) as e:
        st.error(markdown_literal(str(e)), icon=":material/error:")
        stop()
    tokens = [_token(loaded, i) for i in setup.clean_ids]
    changes = ", ".join(
        f"position {i} {tokens[i]!r} -> {_token(loaded, setup.corrupt_ids[i])!r}" for i in setup.changed
    )
    right, wrong = _token(loaded, setup.answer), _token(loaded, setup.wrong)
    st.markdown(markdown_literal(f"Changed: {changes}."))
    what = "Patching first runs both texts, keeping every layer's state and each head's output."
    if not ask_first(what, patching_runs.runs_seconds(sidebar[0], setup), "Run both texts", f"{key}_runs"):
        stop()
    clean, corrupt = patching_runs.get_runs(sidebar[0], setup)
    gap = clean.difference - corrupt.difference
    st.markdown(
        markdown_literal(
            f"Logit difference, logit {right} - logit {wrong} at the last position: clean run {clean.difference:+.2f}, "
            f"corrupted run {corrupt.difference:+.2f}. A patch can restore up to {gap:.2f} of it."
        )
    )
    st.caption(markdown_literal(CONVENTION))
    if clean.difference <= corrupt.difference:
        st.warning(
            "The corrupted text does not lower the right answer against the wrong one here: the shares below measure "
            "how much of a change that goes the other way comes back."
        )
    config = loaded.model.config
    guess = None
    if lesson:
        question = "Copying one head's output from the clean run: where in the model is the head that restores most?"
        asked = (*sidebar, *setup.corrupt_ids, setup.answer, setup.wrong)
        guess = predict(question, list(DEPTHS), asked, f"{key}_predict")
        if guess is None:
            stop()

    st.subheader("1. Which positions carry the answer: the residual stream")
    st.markdown(
        "Each cell copies the clean run's state at one position, entering one layer, into the corrupted run. Where "
        "it restores the answer (blue, near 1), everything the answer needs passes through that position at that "
        "depth. Left of the first change nothing differs, so nothing is restored."
    )
    what = f"Each of the {(config.n_decoder_layers + 1) * len(tokens)} cells is one more run from its layer up."
    if not ask_first(what, patching_runs.seconds(sidebar[0], setup, "residual"), "Patch every position", f"{key}_res"):
        stop()
    residual = patching_runs.get_shares(sidebar[0], setup, "residual").reshape(config.n_decoder_layers + 1, -1)
    chart(figures.residual_grid(residual, tokens, setup.changed, "Copy the residual stream"), f"{key}_residual")

    st.subheader("2. Which heads move it: each head's output")
    st.markdown(
        "Each cell copies one head's output (weights @ v, before W^O) at every position from the clean run into "
        "the corrupted run. Heads near 1 carry much of the answer on their own; negative heads push against it."
    )
    what = f"Each of the {config.n_decoder_layers * config.n_heads} heads is one more run from its layer up."
    if not ask_first(what, patching_runs.seconds(sidebar[0], setup, "heads"), "Patch every head", f"{key}_heads"):
        stop()
    heads = patching_runs.get_shares(sidebar[0], setup, "heads").reshape(config.n_decoder_layers, config.n_heads)
    best = np.unravel_index(np.argmax(heads), heads.shape)
    layer, head = st.session_state.get(HEAD, (int(best[0]), int(best[1])))
    ranked = np.argsort(-heads, axis=None)[:3]
    named = ", ".join(f"{i // config.n_heads + 1}.{i % config.n_heads + 1} ({heads.flat[i]:.2f})" for i in ranked)
    said = ""
    if guess is not None and guess >= 0:
        where = DEPTHS[_depth(int(best[0]), config.n_decoder_layers)]
        said = f" It sits in {where}; your class picked {DEPTHS[guess]}."
    st.markdown(markdown_literal(f"The heads that restore most: {named}.{said} Click a head to see what it looks at."))
    chart(
        experiment_figures.head_grids({"decoder_self": heads}, figures.SHARE, "Copy one head's output", number=".2f"),
        f"{key}_heads_grid",
        on_click=_clicked_head,
    )

    st.subheader(f"3. What head {layer + 1}.{head + 1} looks at")
    what = f"Each of the {len(tokens)} positions is one more run from layer {layer + 1} up."
    seconds = patching_runs.seconds(sidebar[0], setup, "positions", layer, head)
    if not ask_first(what, seconds, "Patch each position", f"{key}_positions"):
        stop()
    positions = patching_runs.get_shares(sidebar[0], setup, "positions", layer, head)
    chart(
        figures.position_bars(positions, tokens, setup.changed, f"Head {layer + 1}.{head + 1}, one position at a time"),
        f"{key}_positions_chart",
    )
    _maps(sidebar, st.session_state[CORRUPT], layer, head, key)


def _maps(sidebar: tuple[str, str, int], corrupt: str, layer: int, head: int, key: str) -> None:
    """The head's attention map in the clean run and in the corrupted one, side by side."""
    model_name, text, max_tokens = sidebar
    runs = [cached.get_trace(model_name, text, max_tokens), cached.get_trace(model_name, corrupt, max_tokens)]
    tokens = runs[0].source_tokens
    last = [run.attention("decoder_self").weights[layer][head][-1] for run in runs]  # the row that predicts
    said = [
        f"{name} to position {int(np.argmax(row))} {run.source_tokens[int(np.argmax(row))]!r} ({row.max():.2f})"
        for name, run, row in zip(("in the clean run", "in the corrupted run"), runs, last, strict=True)
    ]
    st.markdown(
        markdown_literal(
            f"Its attention in both runs. The last row is the position that predicts the answer; it gives most weight "
            f"{said[0]}, and {said[1]}."
        )
    )
    narrow = fits_half_width(len(tokens))  # side by side while every key's label fits half the page
    columns = st.columns(2) if narrow else (st.container(), st.container())
    for column, run, name in zip(columns, runs, ("clean", "corrupted"), strict=True):
        weights = run.attention("decoder_self").weights[layer][head]
        title = f"{name}: layer {layer + 1}, head {head + 1}"
        figure = head_heatmap(weights, run.source_tokens, run.source_tokens, title, narrow=narrow, overview=OVERVIEW)
        chart(figure, f"{key}_{name}_map", container=column)
