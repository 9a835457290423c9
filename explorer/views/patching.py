"""Activation patching, shared by its Explore page and its lesson step: the clean text (the sidebar's), a corrupted
one, the right and the wrong answer; then, in the order a class asks, which positions carry the answer (the residual
stream), which heads (each head's output), and what such a head looks at (position by position, and its map in both
runs)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, patching_runs, state, waiting
from attention_explorer.explorer.app.callbacks import bound, use_model
from attention_explorer.explorer.app.waiting import ask_first, at_once
from attention_explorer.explorer.experiments import patching
from attention_explorer.explorer.experiments.corruptions import bare
from attention_explorer.explorer.experiments.patching import PatchingError
from attention_explorer.explorer.figures import experiments as experiment_figures
from attention_explorer.explorer.figures import patching as figures
from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.heatmap import fits_half_width, head_heatmap
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.navigation import BY_STEM, script
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, sidebar_loaded
from attention_explorer.explorer.views.frame import answer_box, predict, stop
from attention_explorer.explorer.views.offers import offered
from attention_explorer.explorer.views.zoom import drawn_window, window_caption
from attention_explorer.models import ablation
from attention_explorer.models.tokenize import SPACE_MARK

NAMES = "When Mary and John went to the store, John gave a drink to"
SWAPPED = "When Mary and John went to the store, Mary gave a drink to"
NAME_MODEL = "smollm2"
OVERVIEW = 256  # past this many tokens the two maps show block means
KINDS = {"encoder_self": "encoder", "decoder_self": "decoder", "cross": "cross"}  # a head's kind, as a name says it


def convention(where: str) -> str:
    """The patching convention, `where` the row that predicts ("at the last position", or an encoder-decoder's
    decoder's last row), and what its direction (clean into corrupted: denoising) can and cannot show."""
    return (
        f"Patching convention: the metric is the logit difference, logit(right) - logit(wrong), {where}; a patch "
        "copies one activation of the clean run into the corrupted run (denoising), and its result is the share "
        "restored, (patched - corrupted) / (clean - corrupted): 1 brings the clean answer back, 0 changes nothing. "
        "Denoising shows which parts are enough to restore what the change took away, not which are needed: a part "
        "near 0 may still be necessary (both runs have it), which turning it off (step "
        f"{BY_STEM['turn_off'].step}) tests."
    )


def changed_kind(corrupt: str, proposals) -> str:
    """What the corruption is, as the page says it: the proposal's kind ("name swap", "changed word", ...) where the
    corrupted text is one the page proposed, else "your change"."""
    return next((p.name for p in proposals if p.text == corrupt), "your change")


def _fill(corrupt: str, answer: str, wrong: str) -> None:
    for key, value in (
        (state.PATCHING_CORRUPT, corrupt),
        (state.PATCHING_ANSWER, answer),
        (state.PATCHING_WRONG, wrong),
    ):
        state.keep(st.session_state, key, value)


def _name_swap() -> None:
    """The button's on_click: SmolLM2 on the name-swap sentence, its corruption and answers."""
    use_model(NAME_MODEL, NAMES)
    state.keep(st.session_state, state.TEXT, NAMES)
    st.session_state.pop(state.ASIDE, None)
    _fill(SWAPPED, f"{SPACE_MARK}Mary", f"{SPACE_MARK}John")  # as the pages show the tokens ('␣Mary')
    st.session_state[state.PATCHING_PROPOSED_FOR] = state.Choice(
        NAME_MODEL, NAMES, int(st.session_state[state.MAX_TOKENS])
    )
    st.session_state.pop(state.PATCHING_HEAD, None)


def _offer_name_swap(key: str) -> None:
    if offered(NAME_MODEL):  # installed, and offered by this server
        st.button(
            "Try the name swap on SmolLM2: Mary and John",
            on_click=_name_swap,
            icon=":material/swap_horiz:",
            key=f"{key}_name_swap",
        )


def _token(loaded, token_id: int) -> str:
    """An output token as every page shows it (models.tokenize.Spelling: '␣Paris', not 'ĠParis')."""
    return loaded.family.spelling.readable(loaded.target_vocabulary.id_to_token(token_id))


def _source(loaded, token_id: int) -> str:
    """A token of the text as every page shows it."""
    return loaded.family.spelling.readable(loaded.tokenizer.id_to_token(token_id))


def _inputs(key: str, sidebar: state.Choice) -> None:
    """The corrupted text and the two answers, filled with the first proposal when the sidebar's text is new; each
    proposal one click away."""
    for name in (state.PATCHING_CORRUPT, state.PATCHING_ANSWER, state.PATCHING_WRONG):
        st.session_state.setdefault(name, "")
    readable = cached.model(sidebar.model).family.spelling.readable  # answers as every page shows tokens ('␣Paris')
    proposals = patching_runs.get_proposals(sidebar)
    if st.session_state.get(state.PATCHING_PROPOSED_FOR) != sidebar:
        st.session_state[state.PATCHING_PROPOSED_FOR] = sidebar
        first = proposals[0] if proposals else None
        _fill(first.text, readable(first.answer), readable(first.wrong)) if first else _fill("", "", "")
        st.session_state.pop(state.PATCHING_HEAD, None)
    if proposals:
        st.caption("Proposed corruptions of this text (one token changed, the answers they should swap):")
        columns = st.columns(len(proposals))
        for column, proposal in zip(columns, proposals, strict=True):
            column.button(  # labels and tooltips render markdown: the text's words are shown literally
                markdown_literal(f"{proposal.name}: {bare(proposal.answer)} / {bare(proposal.wrong)}"),
                on_click=_fill,
                args=(proposal.text, readable(proposal.answer), readable(proposal.wrong)),
                key=f"{key}_use_{proposal.name}",
                help=markdown_literal(proposal.text),
            )
    else:
        st.caption(
            "No corruption proposed for this text: write the clean text with one word changed for another of as "
            "many tokens."
        )
    st.text_input("Corrupted text (the same number of tokens, one detail changed)", **bound(state.PATCHING_CORRUPT))
    left, right = st.columns(2)
    left.text_input("Right answer (the clean text's next token)", **bound(state.PATCHING_ANSWER))
    right.text_input("Wrong answer (the corrupted text's next token)", **bound(state.PATCHING_WRONG))


def _clicked_head(point: Mapping, kinds: list[str]) -> None:
    """A cell of the head grids: customdata (layer, head, kind index, value)."""
    data = point.get("customdata")
    if data is not None:
        st.session_state[state.PATCHING_HEAD] = (kinds[int(data[2])], int(data[0]), int(data[1]))


def _layers(first: int, last: int) -> str:
    """'layer 3' or 'layers 1-10', counted from 1."""
    return f"layer {first + 1}" if first == last else f"layers {first + 1}-{last + 1}"


def depth(layer: int, n_layers: int) -> int:
    """Which of depths(n_layers) layer `layer` (from 0) sits in: thirds from 3 layers up (the last layer always in
    the last third), else each layer its own."""
    return layer if n_layers < 3 else min(2, 3 * layer // n_layers)


def depths(n_layers: int) -> list[str]:
    """Where in a stack of `n_layers` a layer can sit, as the class is asked: thirds of the layers, each with the
    layers it holds, from 3 layers up; 'the first layer' and 'the last layer' of 2 (thirds of 2 layers could never
    say 'last'); 'its only layer' of 1."""
    if n_layers == 1:
        return ["its only layer"]
    if n_layers == 2:
        return ["the first layer", "the last layer"]
    parts = ("the first third", "the middle third", "the last third")
    held = [[i for i in range(n_layers) if depth(i, n_layers) == part] for part in range(3)]
    return [f"{name} ({_layers(layers[0], layers[-1])})" for name, layers in zip(parts, held, strict=True)]


def patching_view(key: str, lesson: bool = False) -> None:
    """The whole experiment, from the inputs to one head's maps; `lesson`: the class predicts where the head that
    restores most sits before anything is patched."""
    loaded = sidebar_loaded()
    sidebar = state.sidebar(st.session_state)
    current_trace()  # the sidebar's text can be read (a message and a stop otherwise)
    if not loaded.family.next_token_head:
        st.info(
            markdown_literal(
                f"Patching measures a logit difference of the model's output; {loaded.title} is an encoder with no "
                "output layer. Choose SmolLM2, the induction model or an encoder-decoder, or try the classic example:"
            )
        )
        _offer_name_swap(key)
        stop()
    if lesson and loaded.is_encoder_decoder:  # the lesson has not shown the decoder yet: its words come at its step
        st.info(
            markdown_literal(
                f"On {loaded.title}, patching measures a word the decoder writes, and the decoder is the lesson's step "
                f"{BY_STEM['decoding'].step}. Here the lesson patches a model that reads one text: try the classic "
                "example, or patch this model on the Activation patching page."
            )
        )
        _offer_name_swap(key)
        st.page_link(script("patching"), label="Activation patching on this model", icon=":material/swap_horiz:")
        stop()
    _offer_name_swap(key)
    _inputs(key, sidebar)
    if not st.session_state[state.PATCHING_CORRUPT].strip():
        st.info("Write a corrupted text above: the clean one with one detail changed, as many tokens long.")
        stop()
    try:
        setup = patching_runs.get_setup(
            sidebar,
            st.session_state[state.PATCHING_CORRUPT],
            st.session_state[state.PATCHING_ANSWER],
            st.session_state[state.PATCHING_WRONG],
        )
    except (PatchingError, ValueError) as e:
        st.error(markdown_literal(str(e)), icon=":material/error:")
        stop()
    tokens = [_source(loaded, i) for i in setup.clean_ids]
    changes = ", ".join(
        f"position {i} {tokens[i]!r} -> {_source(loaded, setup.corrupt_ids[i])!r}" for i in setup.changed
    )
    right, wrong = _token(loaded, setup.answer), _token(loaded, setup.wrong)
    kind = changed_kind(st.session_state[state.PATCHING_CORRUPT], patching_runs.get_proposals(sidebar))
    st.markdown(markdown_literal(f"The change: {changes} ({kind})."))
    where = short = "at the last position"
    if setup.decoder_input:  # an encoder-decoder: the decoder reads the same words in both runs
        read = " ".join(_token(loaded, i) for i in setup.decoder_input)
        short = "at the decoder's last row"
        where = f"{short} (it reads {read} in both runs: the clean output up to where the two part)"
    what = "Patching first runs both texts, keeping every layer's state and each head's output."
    if not ask_first(what, patching_runs.runs_seconds(sidebar.model, setup), "Run both texts", f"{key}_runs"):
        stop()
    clean, corrupt = patching_runs.get_runs(sidebar.model, setup)
    gap = clean.difference - corrupt.difference
    st.markdown(
        markdown_literal(
            f"Logit difference, logit {right} - logit {wrong} {where}: clean run {clean.difference:+.2f}, corrupted "
            f"run {corrupt.difference:+.2f}. A patch can restore up to {gap:.2f} of it."
        )
    )
    st.caption(markdown_literal(convention(short)))
    if clean.difference <= corrupt.difference:
        st.warning(
            "The corrupted text does not lower the right answer against the wrong one here: the shares below measure "
            "how much of a change that goes the other way comes back."
        )
    guess = None
    if lesson:
        question = "Copying one head's output from the clean run: where in the model is the head that restores most?"
        asked = (sidebar, *setup.corrupt_ids, setup.answer, setup.wrong)
        n_layers = ablation.shapes(loaded.model.config)[patching.residual_kind(loaded)][0]
        # what the reveal runs at once, said on its button: each step's grid in turn up to one that asks first, and
        # the head's maps beside the last
        takes = at_once(
            *(patching_runs.seconds(sidebar.model, setup, which) for which in ("residual", "heads")),
            patching_runs.head_seconds(sidebar, setup, st.session_state[state.PATCHING_CORRUPT]),
        )
        guess = predict(question, depths(n_layers), asked, f"{key}_predict", waiting.reveal_label(takes))
        if guess is None:
            stop()
    _residual(loaded, sidebar.model, setup, tokens, key)
    kind, layer, head = _heads(loaded, sidebar.model, setup, guess, key)
    _positions(loaded, sidebar, setup, kind, layer, head, key)


def _residual(loaded, model_name: str, setup, tokens: list[str], key: str) -> None:
    """Step 1: the residual stream at every layer and position (an encoder-decoder: its encoder's)."""
    encoder = loaded.is_encoder_decoder
    st.subheader(
        "1. Which positions carry the answer: the " + ("encoder's residual stream" if encoder else "residual stream")
    )
    st.markdown(
        "Each cell copies the clean run's state at one position, entering one layer, into the corrupted run. Where "
        f"it restores the answer ({style.POSITIVE}, near 1), that state alone is enough to bring back what the change "
        "took away: what differs between the two runs and matters to the answer passes through that position at that "
        + (
            "depth of the encoder, and the decoder reads it there through its cross-attention."
            if encoder
            else "depth. Left of the first change nothing differs, so nothing is restored."
        )
        + " What both runs share is in the corrupted run already: patching says nothing of it."
    )
    n_layers = ablation.shapes(loaded.model.config)[patching.residual_kind(loaded)][0]
    what = f"Each of the {(n_layers + 1) * len(tokens)} cells is one more run" + (
        " of the whole model." if encoder else " from its layer up."
    )
    if not ask_first(what, patching_runs.seconds(model_name, setup, "residual"), "Patch every position", f"{key}_res"):
        stop()
    residual = patching_runs.get_shares(model_name, setup, "residual").reshape(n_layers + 1, -1)
    title = "Copy the encoder's residual stream" if encoder else "Copy the residual stream"
    chart(figures.residual_grid(residual, tokens, setup.changed, title), f"{key}_residual")


def _heads(loaded, model_name: str, setup, guess: int | None, key: str) -> tuple[str, int, int]:
    """Step 2: every head's output, a grid per attention kind; the head shown next: the one clicked, else the one
    that restores most."""
    st.subheader("2. Which heads move it: each head's output")
    st.markdown(
        "Each cell copies one head's output (weights @ v, before W^O) at every position from the clean run into "
        "the corrupted run. A head near 1 is enough on its own to restore the difference; a head near 0 restores "
        "none of it but may still be needed (denoising shows what is sufficient, not what is necessary); negative "
        "heads push against the answer."
    )
    shapes = ablation.shapes(loaded.model.config)
    total = sum(n_layers * n_heads for n_layers, n_heads in shapes.values())
    what = f"Each of the {total} heads is one more run" + (
        " of the whole model." if loaded.is_encoder_decoder else " from its layer up."
    )
    if not ask_first(what, patching_runs.seconds(model_name, setup, "heads"), "Patch every head", f"{key}_heads"):
        stop()
    shares = patching_runs.get_shares(model_name, setup, "heads")
    found = [(p.kind, p.layer, p.head, float(v)) for p, v in zip(patching.head_patches(loaded), shares, strict=True)]
    grids = {kind: np.full(shape, np.nan) for kind, shape in shapes.items()}
    for kind, layer, head, value in found:
        grids[kind][layer, head] = value
    ranked = sorted(found, key=lambda f: -f[3])
    kind, layer, head, _ = ranked[0]
    chosen = st.session_state.get(state.PATCHING_HEAD)
    if chosen is not None and chosen[0] in shapes:
        kind, layer, head = chosen
    several = len(shapes) > 1
    named = ", ".join(f"{_name(k, i, h, several)} ({v:.2f})" for k, i, h, v in ranked[:3])
    if guess is not None:  # the lesson's verdict, in the box every step gives its answer in
        best_kind, best_layer, best_head, best = ranked[0]
        n_layers = shapes[best_kind][0]
        found_depth = depth(best_layer, n_layers)
        names = depths(n_layers)
        said = (
            f"; your class picked {names[guess]}: {'right' if guess == found_depth else 'not so'}" if guess >= 0 else ""
        )
        verdict = f"The head that restores most, {_name(best_kind, best_layer, best_head, several)} ({best:.2f}), sits "
        answer_box(markdown_literal(f"{verdict}in {names[found_depth]}{said}."), guess, guess == found_depth)
    st.markdown(markdown_literal(f"The heads that restore most: {named}. Click a head to see what it looks at."))
    chart(
        experiment_figures.head_grids(grids, figures.SHARE, "Copy one head's output", number=".2f"),
        f"{key}_heads_grid",
        on_click=lambda point: _clicked_head(point, list(shapes)),
    )
    return kind, layer, head


def _name(kind: str, layer: int, head: int, several: bool) -> str:
    """'24.4', or with several attention kinds 'cross 2.1'."""
    return f"{KINDS[kind]} {layer + 1}.{head + 1}" if several else f"{layer + 1}.{head + 1}"


def _positions(loaded, sidebar, setup, kind: str, layer: int, head: int, key: str) -> None:
    """Step 3: one head's output copied at one position at a time, and its map in both runs."""
    model_name = sidebar.model
    several = loaded.is_encoder_decoder
    st.subheader(f"3. What head {_name(kind, layer, head, several)} looks at")
    if kind == "encoder_self":
        tokens, changed = [_source(loaded, i) for i in setup.clean_ids], setup.changed
    else:
        tokens = [_token(loaded, i) for i in (setup.decoder_input or setup.clean_ids)]
        changed = () if setup.decoder_input else setup.changed
    what = f"Each of the {len(tokens)} positions is one more run" + (
        " of the whole model." if several else f" from layer {layer + 1} up."
    )
    seconds = patching_runs.seconds(model_name, setup, "positions", layer, head, kind)
    if not ask_first(what, seconds, "Patch each position", f"{key}_positions"):
        stop()
    shares = patching_runs.get_shares(model_name, setup, "positions", layer, head, kind)
    title = f"Head {_name(kind, layer, head, several)}, one position at a time"
    chart(figures.position_bars(shares, tokens, changed, title), f"{key}_positions_chart")
    window = {}  # a local layer's (decoder-only runs of the sidebar's model) greys what its window hides
    if several:
        maps = [
            patching_runs.get_weights(model_name, setup, ids, kind, layer)[head]
            for ids in (setup.clean_ids, setup.corrupt_ids)
        ]
        source = [[_source(loaded, i) for i in ids] for ids in (setup.clean_ids, setup.corrupt_ids)]
        target = [_token(loaded, i) for i in setup.decoder_input]
        queries = source if kind == "encoder_self" else [target, target]
        keys = [target, target] if kind == "decoder_self" else source
        last_row = (  # an encoder head's last row is the source's last token; the decoder's last row predicts
            "The last row is the source's last token (the answer is predicted by the decoder's last row, which reads "
            "the encoder's output through cross-attention)"
            if kind == "encoder_self"
            else "The last row is the decoder's last row, the one that predicts the answer"
        )
    else:
        runs = [
            cached.get_trace(sidebar.with_text(text))
            for text in (sidebar.text, st.session_state[state.PATCHING_CORRUPT])
        ]
        maps = [run.attention("decoder_self").weights[layer, head] for run in runs]
        queries = keys = [run.readable(run.source_tokens) for run in runs]
        last_row = "The last row is the position that predicts the answer"
        window = drawn_window(runs[0].attention("decoder_self").windows, "decoder_self", layer)
        window_caption(runs[0].attention("decoder_self").windows, layer, max(len(k) for k in keys))
    _maps(maps, queries, keys, _name(kind, layer, head, several), key, last_row, window)


def _maps(maps, queries, keys, name: str, key: str, last_row: str, window: dict) -> None:
    """The head's attention map in the clean run and in the corrupted one, side by side, and where its last row looks
    in each (`last_row` says what that row is: the one that predicts, or an encoder head's last source token)."""
    said = [
        f"{run} to position {int(np.argmax(w[-1]))} {k[int(np.argmax(w[-1]))]!r} ({w[-1].max():.2f})"
        for run, w, k in zip(("in the clean run", "in the corrupted run"), maps, keys, strict=True)
    ]
    st.markdown(
        markdown_literal(f"Its attention in both runs. {last_row}; it gives most weight {said[0]}, and {said[1]}.")
    )
    narrow = fits_half_width(len(keys[0]))  # side by side while every key's label fits half the page
    columns = st.columns(2) if narrow else (st.container(), st.container())
    for column, weights, q, k, run in zip(columns, maps, queries, keys, ("clean", "corrupted"), strict=True):
        figure = head_heatmap(weights, q, k, f"{run}: head {name}", narrow=narrow, overview=OVERVIEW, **window)
        chart(figure, f"{key}_{run}_map", container=column)
