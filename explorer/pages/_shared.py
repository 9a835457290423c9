"""What every page does first: fetch the trace for the sidebar's model and sentence, and pick what to look at."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attention_explorer.explorer import lesson
from attention_explorer.explorer.app import cached, downloads, drill, state
from attention_explorer.explorer.figures.labels import markdown_literal, position_label
from attention_explorer.explorer.figures.style import styled
from attention_explorer.explorer.lesson import starting, then_and_now
from attention_explorer.explorer.lesson.wording import NOT_EXPLANATION, starting_note
from attention_explorer.explorer.pages._unreadable import cannot_read
from attention_explorer.explorer.run import analysis
from attention_explorer.explorer.run.heads import MEAN, MEAN_NAME
from attention_explorer.explorer.run.trace import UNKNOWN, AttentionTrace, Trace, unknown_pieces
from attention_explorer.models.family import Family
from attention_explorer.models.tokenize import TokenizeError

KIND_NAMES = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder masked self-attention",
    "cross": "Encoder-decoder (cross) attention",
}


WORD_HELP = "Merge sub-word pieces back into words: sum over a word's key pieces, mean over its query pieces."


@dataclass(frozen=True)
class Chosen:
    """The trace, the attention kind picked on this page, and that kind's query and key labels (words when the
    page's word-level toggle is on; `view` merges weights to match)."""

    trace: Trace
    kind: str
    attention: AttentionTrace
    queries: tuple[str, ...]
    keys: tuple[str, ...]
    weights: np.ndarray  # (L, H, Tq, Tk) as drawn: the model's weights, or merged into words (cached)
    groups: tuple[list[list[int]], list[list[int]]] | None = None  # (query groups, key groups) at word level

    def view(self, weights: np.ndarray) -> np.ndarray:
        """Something derived from the token-level weights (a rollout, a flow), (..., Tq, Tk), at this page's level."""
        return weights if self.groups is None else analysis.merge_words(weights, *self.groups)


def sidebar_family() -> Family:
    """What the sidebar's model is (models.family): pages decide by this, never by the model's key."""
    return cached.model(st.session_state[state.MODEL]).family


def token_legend(container=st) -> None:
    """One line under a chart whose labels are tokens: the marks readable tokens use (models.tokenize.Spelling;
    nothing for a tokenizer whose tokens show none)."""
    legend = sidebar_family().spelling.legend()
    if legend:
        container.caption(markdown_literal(legend))


def sidebar_loaded():
    """The sidebar's model (shared, read-only)."""
    return cached.model(st.session_state[state.MODEL])


def presenting() -> bool:
    """Presenter mode: large text for a projector (the sidebar's toggle, or ?present=1)."""
    return bool(st.session_state.get(state.PRESENT))


def this_page() -> lesson.Page | None:
    """The lesson table's entry for the page drawn on this run (the Overview is the root address)."""
    return lesson.BY_STEM.get(st.session_state.get(state.PAGE) or lesson.OVERVIEW.stem)


def _step_links(page: lesson.Page, left, right) -> None:
    """Previous and Next along the lesson path (the Overview's Next is Start), in two given containers."""
    before, after = lesson.neighbours(page.stem)
    if before is not None:
        short = "Overview" if before.step == 0 else f"step {before.step}"
        label = f"Previous: {short}" if presenting() else f"Previous: {before.label}"
        left.page_link(before.script, label=label, icon=":material/arrow_back:", help=before.label)
    if after is not None:
        word = "Start" if page.step == 0 else "Next"
        # beside the title in presenter mode: the step's number only, its title in the tooltip
        label = f"{word}: step {after.step}" if presenting() else f"{word}: {after.label}"
        right.page_link(after.script, label=label, icon=":material/arrow_forward:", help=after.label)


def page_header(title: str | None = None) -> None:
    """The page's title; a lesson step says "Step i of N: <title>" with Previous / Next above it (page_footer
    repeats them at the bottom), or, in presenter mode, beside it on one line. `title`: an Explore page's own."""
    page = this_page()
    if page is None or page.step is None:
        st.header(title or (page.title if page else ""))
        return
    heading = f"Step {page.step} of {lesson.N_STEPS}: {page.title}" if page.step else page.title
    # the links, the title and its line close together, without the page's gap between them: the step's figure
    # still fits on a 900 px screen under them
    box = st.container(gap=None)
    if presenting():  # one line: the figure has the rest of the screen
        left, middle, right = box.columns([1, 3, 1], vertical_alignment="center")
        _step_links(page, left, right)
        middle.header(heading)
    else:
        _step_links(page, *box.columns(2))
        box.header(heading)
    thread = then_and_now_line()
    if thread:  # the lesson's thread, in view on every step before anything is opened
        box.caption(markdown_literal(thread))


def then_and_now_line() -> str:
    """What the 2017 paper did at this lesson step and what the sidebar's model does ("the same" where it does
    what the paper did); "" on a page that is no lesson step."""
    page = this_page()
    if page is None or page.step is None:
        return ""
    return then_and_now.line(cached.model(st.session_state[state.MODEL]), page.stem)


# presenter mode fits a layer x head grid of up to this many layers on the first screen; a deeper one (SmolLM2's 30)
# keeps its own height and scrolls, since squeezed into one screen each cell would be a few pixels
PRESENT_LAYERS = 6

INTRO_BOX = state.INTRO_BOX


def intro(text: str) -> None:
    """A step's opening paragraph (what the 2017 paper did here is under the title: page_header); in presenter mode
    it is folded, with what the heads can show (about_heads), so the figure fits on the first screen (the teacher
    tells it)."""
    if presenting():
        box = st.session_state[INTRO_BOX] = st.expander("What this step shows", icon=":material/info:")
        box.markdown(text)
    else:
        st.markdown(text)


def page_footer() -> None:
    """Previous / Next again under a lesson step, so a class that scrolled down goes on from there."""
    page = this_page()
    if page is not None and page.step is not None:
        st.divider()
        _step_links(page, *st.columns(2))


def stop() -> None:
    """End the page here (after a message saying why), keeping the lesson's Previous / Next under it."""
    page_footer()
    st.stop()


def focus_start(kind: str) -> tuple[int, int, int]:
    """Where the lesson's focus opens for an attention kind on this sentence: (layer, head, query token), the
    strongest content link's (cached.get_start); every step that shows a layer, head or token starts there. Under a
    causal mask, never on the last token, which sees every key: step 5's mask would hide nothing there."""
    sidebar = state.sidebar(st.session_state)
    start = cached.get_start(*sidebar, kind)
    queries = cached.get_trace_for(*sidebar, kind).tokens_for(kind)[0]
    query = starting.content_query(queries, start.query)
    return start.layer, start.head, starting.masked_query(queries, query) if kind == "decoder_self" else query


def predict(
    question: str, options: list[str], context: tuple, key: str, reveal: str = "Reveal the model's answer"
) -> int | None:
    """Predict, then reveal: the class picks one of `options` and presses Reveal; returns the guess's index once
    revealed (None before). `context` names the question (the model, sentence, head, token): a new one asks again."""
    asked = hash(context)
    revealed = f"{key}_revealed"
    st.markdown("**Predict first.** " + markdown_literal(question))
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    guess = left.selectbox(
        "Your class's answer",
        range(len(options)),
        index=None,
        format_func=options.__getitem__,
        placeholder="pick an answer...",
        key=f"{key}_guess_{asked}",
    )
    if st.session_state.get(revealed) == asked:
        return guess if guess is not None else -1
    right.button(
        reveal,
        key=f"{key}_reveal",
        disabled=guess is None,
        on_click=_reveal,
        args=(revealed, asked),
        type="primary",
    )
    if guess is None and not presenting():
        st.caption("Pick an answer, then reveal it.")
    return None


def _reveal(key: str, asked: int) -> None:
    st.session_state[key] = asked


def current_trace(kind: str | None = None) -> Trace:
    """The trace for the sidebar's choices (with a `kind`, the run that kind needs: cached.get_trace_for); a friendly
    message and a stop when the text cannot be used."""
    try:
        sidebar = state.sidebar(st.session_state)
        result = cached.get_trace(*sidebar) if kind is None else cached.get_trace_for(*sidebar, kind)
    except TokenizeError as e:
        cannot_read(e)
        stop()
    unknown = unknown_pieces(result)
    if unknown:
        pieces = f"{len(unknown)} piece{'s' if len(unknown) > 1 else ''} of the text"
        notice = f"{pieces} became {UNKNOWN}, which the model cannot tell apart: {', '.join(map(repr, unknown))}."
        st.warning(markdown_literal(notice), icon=":material/help:")
    if result.truncated:
        st.warning(f"The input was cut to {len(result.source_tokens)} tokens ({result.truncated} tokens dropped).")
    return result


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
    opening = cross and not lesson.before_decoder(st.session_state.get(state.PAGE))  # no decoder token before its step
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
    weights, queries, keys = cached.get_word_level(*state.sidebar(st.session_state), kind)
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


def chart(
    figure: go.Figure,
    key: str,
    container=st,
    name: str = "",
    on_click: Callable[[Mapping], None] | None = None,
    present_height: int | None = None,
    view: Sequence[str] = (),
    title: str = "",
    **options: object,
) -> object:
    """A Plotly chart and, under it, its downloads: server-side PNG, SVG and PDF (where a Chromium is found; else a
    sentence saying how to enable them), offline HTML, and its data as CSV and JSON (each made only when clicked),
    titled and named with the model, the sentence and `view` (the picks it shows: "layer 2", "head 3"); `title` names
    a figure drawn without one. `name` is the files' stem (default: the key). `on_click(point)` runs before the next
    run when a click target (figures.clicks) is clicked: it sets the pickers' keys (drill.py). `present_height`: a
    step's main figure is at most this tall in presenter mode, so that it fits on the first screen."""
    if present_height is not None and presenting() and (figure.layout.height or 450) > present_height:
        figure.update_layout(height=present_height)
    if on_click is not None:
        # a fresh chart after each click, so the same cell clicked again (after a dropdown moved) is a new click
        clicks = f"{key}_clicks"
        n_clicks = st.session_state.get(clicks, 0)
        chart_key = f"{key}_{n_clicks}" if n_clicks else key

        def clicked() -> None:
            point = drill.clicked(st.session_state.get(chart_key))
            st.session_state[clicks] = st.session_state.get(clicks, 0) + 1
            if point is not None:
                on_click(point)

        options = {**options, "on_select": clicked, "selection_mode": "points"}
    else:
        chart_key = key
    event = container.plotly_chart(styled(figure, presenting()), key=chart_key, **options)
    model = st.session_state[state.MODEL]
    about = downloads.About(model, cached.described(model).title, st.session_state[state.TEXT], tuple(view), title)
    # images only where a Chromium is found (a file check: kaleido draws when a button is clicked, not before)
    images = downloads.IMAGE_FORMATS if downloads.chromium() is not None else ()
    files = (
        *((kind.upper(), kind, partial(downloads.to_image, figure, about, kind)) for kind in images),
        ("HTML (offline)", "html", lambda: downloads.to_html(figure, about)),
        ("CSV", "csv", lambda: downloads.to_csv(figure, about)),
        ("JSON", "json", lambda: downloads.to_json(figure, about)),
    )
    with container.popover("Download", icon=":material/download:", key=f"{key}_download"):
        trouble = downloads.image_trouble()
        if trouble:
            st.caption(trouble)
        for label, extension, make in files:
            named = downloads.file_name(name or key, about, extension)
            mime = downloads.MIME_TYPES[extension]
            st.download_button(label, make, named, mime, key=f"{key}_{extension}", on_click="ignore")
    return event


ATTENTION_PAGE = lesson.script("attention")
QKV_PAGE = lesson.script("qkv")


def show_in_attention(kind: str, layer: int, head: int, words: bool = False) -> None:
    """Set the attention heatmap's own keys to this kind, layer and head, at token or word level."""
    st.session_state[state.ATTENTION_WORDS] = words
    state.choose(st.session_state, state.ATTENTION_KIND, kind)  # a choice: not replaced by another model's default
    state.choose(st.session_state, state.ATTENTION_LAYER, layer)
    state.choose(st.session_state, state.ATTENTION_HEAD, head)


def open_in_attention(kind: str, layer: int, head: int, words: bool = False) -> None:
    """Switch to the attention heatmap showing this kind, layer and head, at token or word level (its own keys)."""
    show_in_attention(kind, layer, head, words)
    st.switch_page(ATTENTION_PAGE)


def drill_to_attention(kind: str, words: bool = False) -> Callable[[Mapping], None]:
    """A chart's on_click: the clicked cell's (layer, head) opens on the attention heatmap."""

    def opened(point: Mapping) -> None:
        chosen = drill.head_of(point)
        if chosen is not None:
            show_in_attention(kind, *chosen, words)
            st.session_state[state.DRILL_TO] = ATTENTION_PAGE

    return opened


def drill_to_pickers(layer_key: str, head_key: str) -> Callable[[Mapping], None]:
    """A chart's on_click: the clicked cell's (layer, head) goes into this page's own layer and head pickers."""
    return lambda point: drill.select_head(st.session_state, point, layer_key, head_key)
