"""One head's map at any length: drawn whole up to zoom.FULL queries and keys, as it always was; past that, an overview
of block means and a region of it at full resolution, picked by a click on the overview or by the query and key it is
centred on (found by typing a token)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import drill, state
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.figures.decoding import mark_row
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.lesson.window_words import layer_span
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.pickers import token_picker


def drawn_window(windows: Sequence[int | None], kind: str, layer: int, words: bool = False) -> dict:
    """head_heatmap's and head_map's `window` option for layer `layer` of a self-attention with these windows
    (AttentionTrace.windows): {"window": w} for a local layer drawn token by token, else {} (a global layer, cross-
    attention, or words, whose cells are groups of tokens)."""
    window = windows[layer] if windows and kind == "decoder_self" and not words else None
    return {} if window is None else {"window": window}


def window_caption(windows: Sequence[int | None], layer: int, n_tokens: int, words: bool = False, container=st) -> None:
    """Under a page's maps of layer `layer`: local or global, and what its window does to the map on `n_tokens` tokens
    (window_words.layer_span); nothing for a model without local layers. A map of block means greys a block only
    where the window hides all of it, so past head_heatmap's overview that is said too."""
    if not windows:
        return
    said = layer_span(layer, windows[layer], n_tokens, drawn=not words)
    if windows[layer] is not None and not words and n_tokens > windows[layer] and n_tokens > zoom.OVERVIEW_CELLS:
        said += " Where a map shows means over blocks of tokens, a block is grey only when the window hides all of it."
    container.caption(said)


def word_of(groups: Sequence[Sequence[int]], position: int) -> int:
    """The word (at word level: the group of pieces) that holds token `position`."""
    return next((i for i, pieces in enumerate(groups) if position in pieces), 0)


def largest_cell(weights: np.ndarray) -> tuple[int, int]:
    """(query, key) of the cell largest in size: where a difference map opens its region."""
    query, key = np.unravel_index(int(np.argmax(np.abs(weights))), weights.shape)
    return int(query), int(key)


def _keys(key: str) -> tuple[str, str, str]:
    return f"{key}_zoom_query", f"{key}_zoom_key", f"{key}_zoom_size"


def centre_on(key: str, point: Mapping) -> None:
    """A click on the overview: the region centred on the tile clicked."""
    query_key, key_key, _ = _keys(key)
    drill.select_region(st.session_state, point, query_key, key_key)


def pick_region(queries: Sequence[str], keys: Sequence[str], key: str, focus: tuple[int, int] = (0, 0)) -> zoom.Region:
    """The region drawn at full resolution: the query and key it is centred on (searchable pickers, starting at
    `focus` and moving to a new sentence's until one is chosen) and its size."""
    query_key, key_key, size_key = _keys(key)
    for widget, n, start in ((query_key, len(queries), focus[0]), (key_key, len(keys), focus[1])):
        start = min(max(0, start), n - 1)
        held = st.session_state.get(widget)
        if held is None or held not in range(n) or state.at_start(st.session_state, widget):
            state.start(st.session_state, widget, start)
    if st.session_state.get(size_key) not in zoom.REGION_SIZES:
        st.session_state[size_key] = zoom.REGION
    left, middle, right = st.columns([2, 2, 1])
    query = token_picker(left, "Region around query", queries, query_key)
    centre = token_picker(middle, "Region around key", keys, key_key)
    size = right.selectbox(
        "Region size",
        zoom.REGION_SIZES,
        format_func=lambda s: f"{s} x {s}",
        key=size_key,
        help="Positions a side drawn at full resolution (at most 512: a 512 x 512 map is 1.4 MB to send).",
    )
    return zoom.region_around(len(queries), len(keys), query, centre, size)


def head_map(
    weights: np.ndarray,
    queries: Sequence[str],
    keys: Sequence[str],
    title: str,
    key: str,
    focus: tuple[int, int] = (0, 0),
    on_click: Callable[[Mapping], None] | None = None,
    view: Sequence[str] = (),
    masked: bool = False,
    marked_row: int | None = None,
    **options,
) -> None:
    """One head's (Tq, Tk) map under chart key `key`: whole up to zoom.FULL positions a side; past it, the overview
    (`{key}_overview`), the region's pickers, and the region at full resolution (`key`). `on_click(point)`: a click
    on a cell or row of the full-resolution map (its customdata names the text's own query position); `options`
    go to head_heatmap (diverging, narrow). `masked`: a causal map, whose hidden weights (0) the block means count.
    `marked_row`: a query row outlined (figures.decoding.mark_row), wherever it is drawn."""
    if not zoom.needs_overview(len(queries), len(keys)):
        figure = head_heatmap(weights, queries, keys, title, clickable=on_click is not None, **options)
        if marked_row is not None:
            figure = mark_row(figure, marked_row, len(keys))
        chart(figure, key, on_click=on_click, view=view)
        return
    _zoomed(weights, tuple(queries), tuple(keys), title, key, focus, on_click, tuple(view), masked, marked_row, options)


@st.fragment
def _zoomed(weights, queries, keys, title, key, focus, on_click, view, masked, marked_row, options) -> None:
    """The overview and the region: moving the region reruns this alone (the weights are the fragment's own)."""
    if st.session_state.get(state.DRILL_TO):  # a click on the region opens another page: the app follows it
        st.rerun(scope="app")
    diverging = bool(options.get("diverging"))
    note = zoom.overview_note(len(queries), len(keys), masked, diverging)
    st.caption(
        f"{len(queries)} queries x {len(keys)} keys: too many to draw one by one, so the first map is an overview. "
        f"{note} Click it, or pick a query and a key below, to draw that region at full resolution, its tokens named."
    )
    above = st.container()
    region = pick_region(queries, keys, key, focus)
    with above:
        chart(
            zoom.overview_heatmap(
                weights, queries, keys, title, region, diverging=diverging, row=marked_row, window=options.get("window")
            ),
            f"{key}_overview",
            on_click=functools.partial(centre_on, key),
            view=(*view, "overview"),
        )
    figure = zoom.region_heatmap(weights, queries, keys, region, title, clickable=on_click is not None, **options)
    if marked_row in region.queries:
        figure = mark_row(figure, marked_row - region.queries.start, len(region.keys))
    chart(figure, key, on_click=on_click, view=(*view, region.words))
