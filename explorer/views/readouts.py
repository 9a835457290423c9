"""The read-outs' views, shared by their Explore pages and the lesson's step 13: the logit lens (each sub-layer's
state through the output matrix) and direct logit attribution (which part wrote a logit)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import experiment_runs, state
from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.figures import experiments as figures
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.run import output
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, sidebar_family, sidebar_loaded, token_legend
from attention_explorer.explorer.views.offers import needs_decoder
from attention_explorer.explorer.views.pickers import KIND_NAMES
from attention_explorer.explorer.views.zoom import head_map


def rank_chart(found, position: int, answer, key: str, present_height: int | None = None) -> None:
    """One position's target through the layers: its rank and probability after each read (the logit lens)."""
    chart(
        figures.rank_lines(
            found.reads,
            found.target_rank[:, found.index(position)],
            found.target_probability[:, found.index(position)],
            sidebar_family().spelling.readable(found.targets[position]),
            model_words.target_name(answer, position),
        ),
        key,
        present_height=present_height,
    )


def _sidebar():
    return state.sidebar(st.session_state)


def lens_chart(found, answer: ablate.Answer, key: str, present_height: int | None = None) -> None:
    """The logit lens as one map: reads down, positions across (the rows read: a window of a long text), each cell
    the top next token and its probability; a decoder-only text's last row marked as the one nothing follows."""
    end = len(found.positions) - 1 if answer.text_end else None
    spelling = sidebar_family().spelling  # readable tokens; a special token named as one in its cell's hover
    chart(
        figures.lens_map(
            found.reads,
            spelling.labels(found.positions[found.rows.start : found.rows.stop]),
            [spelling.labels([r[0] for r in read]) for read in found.top_tokens],
            found.top_probabilities[..., 0],
            found.rows.start,
            end,
            model_words.TEXT_END,
            spelling.specials,
        ),
        f"{key}_map",
        present_height=present_height,
    )


def lens_view(key: str = "lens") -> None:
    """Every layer's and sub-layer's state read through the output layer."""
    loaded = sidebar_loaded()
    read = current_trace()  # first: a sentence the model cannot read says so on every page
    needs_decoder(loaded)
    answer = experiment_runs.get_read_answer(_sidebar())
    positions = answer_positions(answer)
    ends, inside = model_words.read_ends(read.truncated)
    # the row picked under the map: the map shows the rows around it (a window of a long text)
    position = default_row(positions, answer, f"{key}_position")
    found = experiment_runs.get_lens(_sidebar(), position)
    norm = f"the final {loaded.family.block.norm_name} and then " if found.final_norm else ""
    window = (
        ""
        if len(found.rows) == len(positions)
        else f" The map shows positions {found.rows.start}-{found.rows.stop - 1} of {len(positions)}, around the "
        "position picked under it."
    )
    st.markdown(
        f"Each row reads the decoder's state after one sub-layer through {norm}the output matrix, as if the model "
        "stopped there; each cell is the most likely next token then, coloured by its probability. The bottom row "
        "is the model's own output."
        + (
            f" At the last position, {len(positions) - 1}, {ends}: nothing {inside} follows it, so its bottom cell "
            "is the model's own answer, and no token there is right or wrong."
            if answer.text_end
            else ""
        )
        + window
    )
    shown = found.positions[found.rows.start : found.rows.stop]
    own = sum(row[0] == token for row, token in zip(found.top_tokens[0], shown, strict=True))
    if output.output_matrix(loaded).target_embedding and own > len(shown) / 2:
        st.caption(model_words.tied_lens_note(own, len(shown), loaded.family.block))
    special_note(loaded, [row[0] for row in found.top_tokens[0]], own)
    lens_chart(found, answer, key)
    token_legend()
    position = pick_row(positions, answer, f"{key}_position")
    rank_chart(found, position, answer, f"{key}_rank")
    row = found.index(position)
    readable = sidebar_family().spelling.readable
    st.dataframe(
        [
            {
                "read": r,
                **{
                    f"{k + 1}.": f"{readable(found.top_tokens[i][row][k])} ({found.top_probabilities[i, row, k]:.0%})"
                    for k in range(found.top_probabilities.shape[-1])
                },
            }
            for i, r in enumerate(found.reads)
        ],
        hide_index=True,
        width="stretch",
    )


def special_note(loaded, embedding_row: list[str], own: int) -> None:
    """One line on the embedding row's special tokens ('<filename>' on SmolLM2), where it names any; `own`: the
    cells of that row that name their position's own token."""
    named = sorted(set(embedding_row) & set(loaded.family.specials))
    if not named:
        return
    if output.output_matrix(loaded).target_embedding:
        why = (
            "that row reads each token's own embedding through the output matrix, which is the embedding matrix "
            f"itself (tied): {own} of its {len(embedding_row)} cells name the position's own token, and where another "
            "token's embedding scores higher than the token's own, it can be a marker like this"
        )
    else:
        why = "that row reads each token's embedding before any layer has worked on it: its best match says little"
    st.caption(
        markdown_literal(
            f"{', '.join(named)} in the embedding row: a special token of this vocabulary (a marker its training "
            f"data used, not a word of the text); {why}."
        )
    )


def answer_positions(answer: ablate.Answer) -> tuple[str, ...]:
    """The decoder's input tokens, one per row."""
    assert answer.decoder_input is not None
    vocabulary = sidebar_loaded().target_vocabulary
    return tuple(vocabulary.id_to_token(i) for i in answer.decoder_input)


def default_row(positions: tuple[str, ...], answer: ablate.Answer, key: str) -> int:
    """The row the picker `key` holds (set to its default when it holds none: a decoder-only text's last row, else the
    last row whose right answer counts; model_words.question_row): what the views drawn above the picker read."""
    if key not in st.session_state or st.session_state[key] >= len(positions):
        st.session_state[key] = model_words.question_row(answer, None)
    return st.session_state[key]


def pick_row(positions: tuple[str, ...], answer: ablate.Answer, key: str) -> int:
    """A decoder row, by default a decoder-only text's last one, else the last one whose right answer counts."""
    default_row(positions, answer, key)
    assert answer.targets is not None
    vocabulary, readable = sidebar_loaded().target_vocabulary, sidebar_family().spelling.readable
    targets = [readable(vocabulary.id_to_token(i)) for i in answer.targets]
    return st.selectbox(
        "Position (the row that predicts the next token)",
        range(len(positions)),
        # a list's own lookup: a function reading the session (the model) failed where it is called outside a run
        format_func=[
            f"{i}: {readable(token)} -> {targets[i]}" + (f" ({model_words.TEXT_END})" if answer.own_row(i) else "")
            for i, token in enumerate(positions)
        ].__getitem__,
        key=key,
    )


def _target(answer: ablate.Answer, row: int) -> str:
    loaded = sidebar_loaded()
    assert answer.targets is not None
    return sidebar_family().spelling.readable(loaded.target_vocabulary.id_to_token(answer.targets[row]))


def compared_with(loaded, found, position: int, token: int, choices: Mapping[int, str], key: str) -> int | None:
    """A second token to split the logit difference against (keyed `key`_against), or None: one logit alone. The
    offers: the other radio choice and the model's top next tokens at this row."""
    top = found.top_tokens[-1][found.index(position)]
    offers: dict[int | None, str] = {None: "nothing: split the logit alone"}
    for other, named in choices.items():
        if other != token:
            offers[other] = named
    for rank, name in enumerate(top):
        other = loaded.target_vocabulary.token_to_id(name)
        if other is not None and other != token and other not in offers:
            offers[other] = f"the model's choice {rank + 1}: {sidebar_family().spelling.readable(name)}"
    if st.session_state.get(f"{key}_against") not in offers:
        st.session_state[f"{key}_against"] = None
    return st.selectbox(
        "Compared with",
        list(offers),
        format_func=offers.__getitem__,
        key=f"{key}_against",
        help="Split the logit difference between the two tokens (how much more the model favours the first) "
        "instead of one logit: the usual measure of one behaviour, free of what raises every token's logit alike.",
    )


def attribution_view(key: str = "attribution") -> None:
    """One logit split into the embedding, each head, each feed-forward; a grid linked to the head's map."""
    loaded = sidebar_loaded()
    current_trace()  # first: a sentence the model cannot read says so on every page
    needs_decoder(loaded)
    answer = experiment_runs.get_read_answer(_sidebar())
    position = pick_row(answer_positions(answer), answer, f"{key}_position")
    found = experiment_runs.get_lens(_sidebar(), position)
    right = answer.targets[position]
    predicted_token = found.top_tokens[-1][found.index(position)][0]
    predicted = loaded.target_vocabulary.token_to_id(predicted_token)
    choices = {right: f"{model_words.target_name(answer, position)}: {_target(answer, position)}"}
    if predicted is not None and predicted != right:
        choices[predicted] = f"the model's prediction: {sidebar_family().spelling.readable(predicted_token)}"
    token = st.radio("Logit of", list(choices), format_func=choices.get, horizontal=True, key=f"{key}_token")
    against = compared_with(loaded, found, position, token, choices, key)
    split = experiment_runs.get_attribution(_sidebar(), position, token, against)
    readable = sidebar_family().spelling.readable
    one, other = readable(split.token), readable(split.against or "")
    named = f"Logit of {one}"
    if split.against is not None:
        named = f"Logit difference {one} \u2212 {other}"
    st.metric(f"{named} at position {position}", f"{split.logit:.3f}")
    st.caption(
        markdown_literal(
            f"Each part below is its share of {split.split(readable)}; the parts add up to {split.total:.4f}"
            + ("." if split.against is None else f" (each part's share of {one}'s logit minus its share of {other}'s).")
        )
    )
    if not split.exact_all_layers:
        st.info(
            "This model is post-LN, as in the paper: every sub-layer ends in LayerNorm(x + Sublayer(x)), so what a "
            "head in an earlier layer writes reaches the output only after every later LayerNorm has re-centred it "
            "and divided it by the spread of the whole sum, and every later sub-layer has read it. So only the last "
            "layer is split: its input (everything below, as one part), its heads and its feed-forward, through its "
            "own LayerNorms with their scales frozen at this run's. Blank cells: layers that cannot be separated."
        )
    kinds = list(split.heads)
    layer_key, head_key, kind_key = f"{key}_layer", f"{key}_head", f"{key}_kind"

    def clicked(point: Mapping) -> None:
        data = point.get("customdata") if point else None
        if isinstance(data, list | tuple) and len(data) >= 3:
            st.session_state[layer_key], st.session_state[head_key], st.session_state[kind_key] = data[:3]

    # one under the other, each the page's width: side by side, a grid of 2 kinds x 4 heads had no room for its numbers
    share = "share of the logit" if split.against is None else "share of the logit difference"
    grid = figures.head_grids(split.heads, share, "Each head's direct share")
    chart(grid, f"{key}_grid", on_click=clicked)
    chart(figures.part_bars(split.names, split.values, title="The largest parts"), f"{key}_bars")
    n_layers, n_heads = split.heads[kinds[-1]].shape
    kind = kinds[min(st.session_state.get(kind_key, len(kinds) - 1), len(kinds) - 1)]
    layer = st.session_state.get(layer_key, split.first_layer)
    head = st.session_state.get(head_key)
    if layer >= n_layers or head is None or head >= n_heads:  # nothing clicked yet: the largest head of the last kind
        layer = split.first_layer
        head = int(np.nanargmax(np.abs(split.heads[kinds[-1]][layer])))
    forced = experiment_runs.get_forced_trace(_sidebar())
    queries, keys = forced.labels_for(kind)
    if kind == "encoder_self":  # its rows are the source's tokens, not the decoder positions a logit is read at
        st.caption(
            "Click a head in the grid to see its map. An encoder head's rows are the source's tokens; it reaches "
            f"position {position}'s logit through the cross-attention."
        )
    else:
        st.caption(f"Click a head in the grid to see its map. Outlined: row {position}, whose logit is split.")
    row = None if kind == "encoder_self" else position
    weights = forced.attention(kind).weights[layer, head]
    title = f"{KIND_NAMES[kind]}, layer {layer + 1}, head {head + 1}"
    focus = (position, int(np.argmax(weights[position]))) if row is not None else (0, 0)
    head_map(weights, queries, keys, title, f"{key}_map", focus, masked=kind == "decoder_self", marked_row=row)
