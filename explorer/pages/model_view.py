"""Model view: every layer x head in one figure; pick one to see it at full resolution or open it."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.heatmap import cells_note
from attention_explorer.explorer.figures.model_view import THUMBNAIL, layer_window, model_view, pool, thumbnail_px
from attention_explorer.explorer.lesson.window_words import layer_span, layers_summary
from attention_explorer.explorer.lesson.wording import attention_formula, head_output, model_view_hint
from attention_explorer.explorer.run.blocks import factor
from attention_explorer.explorer.views.chart import chart, drill_to_pickers, open_in_attention
from attention_explorer.explorer.views.corpus import open_in_corpus
from attention_explorer.explorer.views.current import focus_start, sidebar_family, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header, presenting
from attention_explorer.explorer.views.pickers import kind_name, pick_attention, pick_head, pick_layer
from attention_explorer.explorer.views.zoom import head_map, word_of

page_header("Model view")
intro(
    "The stack's heads, layers down and heads across: each thumbnail is one head's attention weights A_i "
    "(queries down, keys across); the head's output is "
    f"{head_output(cached.model(st.session_state[state.MODEL]).model.config)}. {model_view_hint(sidebar_family())}"
)

chosen = pick_attention("qkv")  # the lesson's focus: the kind, layer and head the other steps show
# the formula beside the pickers, the notes under the grid: the grid on the first screen
equation, left, right = st.columns([3, 1, 1], vertical_alignment="center")
attention = chosen.attention
layer0, head0, focus_query = focus_start(chosen.kind)
layer = pick_layer(attention.n_layers, state.FOCUS_LAYER, left, layer0)
# decoder self-attention adds its mask: the picked layer's (a local layer's window)
equation.latex(attention_formula(chosen.kind, cached.model(st.session_state[state.MODEL]).model.config, layer))
head = pick_head(attention.n_heads, state.FOCUS_HEAD, right, index=head0)
# thumbnails as large as the page's width allows; a deep stack (SmolLM2's 30 layers) shows a window of layers
thumb = thumbnail_px(attention.n_heads, presenting())
window = layer_window(attention.n_layers, layer, thumb, presenting())
if chosen.groups is None:  # block means reduced one layer at a time (cached), never the whole stack's weights at once
    thumbnails = cached.get_thumbnails(state.sidebar(st.session_state), chosen.kind)[window.start : window.stop]
else:  # word level: the merged weights are already whole
    thumbnails = pool(chosen.weights[window.start : window.stop], THUMBNAIL)
# a model with local layers (a sliding window of keys): each row named local or global
windows = attention.windows if chosen.kind == "decoder_self" else ()
spans = ["global" if w is None else "local" for w in windows[window.start : window.stop]]
chart(
    model_view(
        thumbnails,
        THUMBNAIL,
        (layer, head),
        window.start,
        thumb,
        spans=spans,
        # token level: each local layer's thumbnails grey the cells its window hides wholly
        windows=windows[window.start : window.stop] if chosen.groups is None else (),
        n_tokens=attention.mask.shape[1],
    ),
    "model_grid",
    on_click=drill_to_pickers(state.FOCUS_LAYER, state.FOCUS_HEAD),
    view=(kind_name(chosen.kind),),
    title="Every layer and head" if len(window) == attention.n_layers else f"Layers {window.start + 1}-{window.stop}",
)
shown = (
    ""
    if len(window) == attention.n_layers
    else f"Layers {window.start + 1}-{window.stop} of {attention.n_layers} (pick a layer to see its rows). "
)
f_q, f_k = factor(len(chosen.queries), THUMBNAIL), factor(len(chosen.keys), THUMBNAIL)
cells = thumbnails.shape[-2:]
drawn = (
    f"Each thumbnail is {cells[0]} x {cells[1]} cells and {cells_note(f_q, f_k)} (their mean)"
    if max(f_q, f_k) > 1
    else "Each thumbnail draws every weight of its head"
)
st.caption(
    f"{shown}Click a thumbnail to see that head below; the button under it opens the head in the attention heatmap. "
    f"{drawn}. Each thumbnail is scaled to its own maximum, so a nearly uniform head looks as contrasty as a sharp "
    "one: the full-size map below keeps the 0-1 scale."
)

if windows:
    longer = attention.mask.shape[1] > min((w for w in windows if w is not None), default=attention.mask.shape[1])
    grey = " A local layer's thumbnails grey the cells whose every key its window hides."
    sizes = sorted({w for w in windows if w is not None})
    back = f"{sizes[0]:,}" if len(sizes) == 1 else "its window's size"  # windows of more than one size: no one number
    grey += f" The dashed line is the window's edge: the keys left of it are {back} or more back from the query."
    grey *= chosen.groups is None and longer  # token level, on a text longer than the window
    st.caption(layers_summary(windows) + grey)
title = f"Layer {layer + 1}, head {head + 1}"
st.subheader(f"{title} at full resolution")
if windows:
    st.caption(layer_span(layer, windows[layer], attention.mask.shape[1], drawn=chosen.groups is None))
weights = chosen.weights[layer, head]
picked = st.session_state.get(state.FOCUS_TOKEN)  # the query the lesson follows, when a step has picked one
query = (
    picked if isinstance(picked, int) and 0 <= picked < len(chosen.trace.tokens_for(chosen.kind)[0]) else focus_query
)
query = query if chosen.groups is None else word_of(chosen.groups[0], query)
focus = (query, int(np.argmax(weights[min(query, len(weights) - 1)])))  # the lesson's query and its strongest key
view = (kind_name(chosen.kind), f"layer {layer + 1}", f"head {head + 1}")
head_map(
    weights,
    chosen.queries,
    chosen.keys,
    title,
    "model_selected",
    focus,
    view=view,
    masked=chosen.kind == "decoder_self",
    **({"window": windows[layer]} if windows and windows[layer] is not None and chosen.groups is None else {}),
)
if st.button("Open in the attention heatmap", key="model_open"):
    open_in_attention(chosen.kind, layer, head, chosen.groups is not None)
token_legend()  # the marks its token labels use
# the lesson's aside: one sentence shows a head on one text; its job shows over many
st.button(
    f"Layer {layer + 1}, head {head + 1} over many texts: what it does on every sentence, not only this one",
    key="model_corpus",
    on_click=open_in_corpus,
    args=(layer, head),
    icon=":material/dataset:",
)
page_footer()
