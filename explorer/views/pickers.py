"""Pick what to look at: the attention kind, a layer, a head, a token, each kept in the shareable address."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal, position_label
from attention_explorer.explorer.lesson.wording import NOT_EXPLANATION, starting_note
from attention_explorer.explorer.run import analysis
from attention_explorer.explorer.run.heads import MEAN, MEAN_NAME
from attention_explorer.explorer.views.current import Chosen, current_trace, sidebar_family
from attention_explorer.explorer.views.frame import INTRO_BOX

KIND_NAMES = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder masked self-attention",
    "cross": "Encoder-decoder (cross) attention",
}


WORD_HELP = "Merge sub-word pieces back into words: sum over a word's key pieces, mean over its query pieces."


def about_heads(kind: str, starting: bool = True) -> None:
    """What the heads of the sidebar's model can show and what a weight does not say; `starting`: the page opened
    on the sentence's starting head for this attention `kind` (cached.get_start), said how it was chosen."""
    model_key = st.session_state[state.MODEL]
    notes = [cached.get_head_patterns(model_key), NOT_EXPLANATION]
    text = " ".join([*notes, starting_note(sidebar_family(), kind)] if starting else notes)
    # folded into the step's introduction, or folded on its own: the figure comes first
    box = st.session_state.pop(INTRO_BOX, None) or st.expander("What these heads can show", icon=":material/info:")
    box.caption(text)


def pick_attention(prefix: str, words: bool = True, starting: bool = True, cross: bool = True) -> Chosen:
    """The current trace and an attention kind (a radio `{prefix}_kind` when the model has more than one, also in
    the address), and, when `words`, a word-level toggle `{prefix}_words`; under the radio, what the model's heads
    can show (about_heads). `cross`: the page can draw cross-attention, where a model trained here opens (its
    alignment is there)."""
    family = sidebar_family()
    # the kinds from the model, before any run: encoder self-attention is drawn without decoding first
    kinds = list(family.kinds)
    opening = cross and not navigation.before_decoder(
        st.session_state.get(state.PAGE)
    )  # no decoder token before its step
    default = "cross" if opening and "cross" in kinds and family.trained_here else kinds[0]
    key = f"{prefix}_kind"
    # before the layer, head and token pickers read the address: the kind decides how many of each there are
    _from_address(key, state.URL_KIND, kinds, default, kind_name)
    kind = kinds[0]
    if len(kinds) > 1:
        kind = st.radio(
            "Attention",
            kinds,
            format_func=KIND_NAMES.get,
            horizontal=True,
            key=key,
            label_visibility="collapsed",  # the options name themselves
        )
        state.keep_focus(st.session_state, key, kind)
        st.query_params[state.URL_KIND] = kind
    about_heads(kind, starting)
    result = current_trace(kind)
    attention = result.attention(kind)
    if not (words and st.toggle("Word level", key=f"{prefix}_words", help=WORD_HELP)):
        return Chosen(result, kind, attention, *result.labels_for(kind), attention.weights)
    st.caption("Word level: each word's row is the mean of its pieces' rows; each column sums its pieces.")
    weights, queries, keys = cached.get_word_level(state.sidebar(st.session_state), kind)
    return Chosen(result, kind, attention, queries, keys, weights, analysis.groups_for(result, kind))


def kind_name(kind: str) -> str:
    """An attention kind as a sentence names it: 'encoder self-attention'."""
    name = KIND_NAMES[kind]
    return name[0].lower() + name[1:]


def _from_address(key: str, name: str, options: list, default: object, describe) -> None:
    """Give a picker its value from the shareable address (once), or its default, before it is drawn; a value
    the page cannot show is named in a notice."""
    wanted = state.url_value(st.session_state, name, key)
    if wanted is not None:
        if wanted in options:
            st.session_state[key] = wanted
        else:
            notice = (
                f"The address asks for {describe(wanted)}, which this view does not have; showing {describe(default)}."
            )
            st.warning(markdown_literal(notice), icon=":material/link_off:")  # a token may be in it
            st.session_state[key] = default
        state.chosen(st.session_state, key)
    elif key not in st.session_state or state.at_start(st.session_state, key) or st.session_state[key] not in options:
        state.start(st.session_state, key, default)  # a new sentence's starting point replaces the old one


# a token picker's list is filtered to the labels that contain what is typed ('contains', not Streamlit's default fuzzy
# match, under which "cat" also finds "create" and "Ġconcatenate"): among 2,048 tokens one is found by name
SEARCH = "contains"


SEARCH_HELP = "Type a token, or its position, to find it: the list keeps the labels that contain what you type."


def _relabel(key: str, tokens: tuple[str, ...]) -> None:
    """The browser keeps showing the label it last drew ("0: the") when only the labels change (another attention
    kind, another sentence) unless the server sends the value again: so set it again whenever they change."""
    labels = f"{key}_labels"
    if st.session_state.get(labels) != tokens:
        st.session_state[labels] = tokens
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def token_picker(container, label: str, tokens: Sequence[str], key: str) -> int:
    """A position of `tokens` picked by its label '3: the' (its value kept under `key`), found by typing."""
    _relabel(key, tuple(tokens))
    return container.selectbox(
        label,
        range(len(tokens)),
        format_func=lambda i: position_label(i, tokens[i]) if i < len(tokens) else f"token {i}",
        key=key,
        filter_mode=SEARCH,
        help=SEARCH_HELP,
    )


def _choose(container, label: str, options: list, key: str, name: str, default: object, describe, **search) -> object:
    """A selectbox whose value lives under `key` and in the address's `name` parameter."""
    _from_address(key, name, options, default, describe)
    value = container.selectbox(label, options, format_func=describe, key=key, **search)
    state.keep_focus(st.session_state, key, value)
    if isinstance(value, int) and value != MEAN:  # not "all tokens" (None) or the mean over heads
        st.query_params[name] = str(value + (name in (state.URL_LAYER, state.URL_HEAD)))  # these count from 1
    return value


def pick_layer(n_layers: int, key: str, container=st, index: int = 0) -> int:
    return _choose(container, "Layer", list(range(n_layers)), key, state.URL_LAYER, index, lambda i: f"layer {i + 1}")


def pick_head(n_heads: int, key: str, container=st, mean: bool = False, index: int = 0) -> int:
    """A head, numbered from 1; with `mean`, also the mean over heads (heads.MEAN) after the last head."""
    options = [*range(n_heads), *((MEAN,) if mean else ())]
    return _choose(
        container,
        "Head",
        options,
        key,
        state.URL_HEAD,
        options[index],
        lambda i: MEAN_NAME if i == MEAN else f"head {i + 1}",
    )


def pick_layer_head(
    n_layers: int, n_heads: int, prefix: str, mean: bool = False, layer: int = 0, head: int = 0
) -> tuple[int, int]:
    """A layer picker and a head picker side by side, keyed `{prefix}_layer` and `{prefix}_head`; `layer` and
    `head` are the options chosen by default."""
    left, right = st.columns(2)
    return pick_layer(n_layers, f"{prefix}_layer", left, layer), pick_head(n_heads, f"{prefix}_head", right, mean, head)


def pick_token(
    tokens: tuple[str, ...],
    label: str,
    key: str,
    container=st,
    allow_all: bool = False,
    index: int = 0,
    name: str = state.URL_TOKEN,
) -> int | None:
    """A token by position ('3: the'), so repeated tokens stay distinct (streamlit shows text, no HTML); `index`
    is the option chosen by default, `name` the address's parameter for it."""
    options = [None, *range(len(tokens))] if allow_all else list(range(len(tokens)))

    def describe(i: int | None) -> str:
        if i is None:
            return "all tokens"
        return position_label(i, tokens[i]) if i < len(tokens) else f"token {i}"

    _relabel(key, tokens)
    search = {"filter_mode": SEARCH, "help": SEARCH_HELP}
    return _choose(container, label, options, key, name, options[index], describe, **search)
