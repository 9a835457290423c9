"""A chart with its downloads, and the clicks that open a head on another page."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

import plotly.graph_objects as go
import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, downloads, drill, state
from attention_explorer.explorer.figures.style import styled
from attention_explorer.explorer.views.frame import presenting


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


ATTENTION_PAGE = navigation.script("attention")


QKV_PAGE = navigation.script("qkv")


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
