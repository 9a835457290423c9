"""Attention heatmap: one layer and head (or their mean) of the chosen model on the sidebar's sentence."""

from __future__ import annotations

import functools

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.app.callbacks import walk_heads
from attention_explorer.explorer.figures.heatmap import cells_note
from attention_explorer.explorer.figures.model_view import LAYER_CELLS, layer_heads
from attention_explorer.explorer.lesson.model_words import attention_formula
from attention_explorer.explorer.lesson.window_words import layer_span
from attention_explorer.explorer.run.blocks import factor
from attention_explorer.explorer.run.heads import MEAN, head_or_mean, head_title
from attention_explorer.explorer.views.chart import chart, drill_to_pickers
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.pickers import kind_name, pick_attention, pick_layer_head
from attention_explorer.explorer.views.zoom import head_map, word_of

st.header("Attention heatmap")
st.markdown(attention_formula(sidebar_family().block))  # eq. 1 as this model computes it

chosen = pick_attention(state.ATTENTION)
attention = chosen.attention
if chosen.kind == "decoder_self":
    st.caption(
        r"Masked (causal) self-attention: before the softmax, every score of a later key is set to $-\infty$, so "
        "each row puts all its weight on its own position and those before it (the upper triangle is 0)."
    )
start = cached.get_start(state.sidebar(st.session_state), chosen.kind)
layer, head = pick_layer_head(
    attention.n_layers, attention.n_heads, state.ATTENTION, mean=True, layer=start.layer, head=start.head
)
weights, title = head_or_mean(chosen.weights, layer, head), head_title(layer, head, attention.n_heads).capitalize()
# a local layer (a sliding window of keys): what it hides drawn grey and its edge dashed, where cells are tokens
window = attention.windows[layer] if attention.windows and chosen.kind == "decoder_self" else None
if window is not None or attention.windows:
    st.caption(layer_span(layer, window, attention.mask.shape[1], drawn=chosen.groups is None))


follow = "Click a row to follow that query token through Q, K and V step by step"
st.caption(
    f"{follow} (a mean of heads has no Q, K and V of its own: the click opens head 1)."
    if head == MEAN
    else f"{follow}."
)
first_pieces = None if chosen.groups is None else tuple(word[0] for word in chosen.groups[0])
view = (kind_name(chosen.kind), *head_title(layer, head, attention.n_heads).split(", "))
clicked = functools.partial(walk_heads, chosen.kind, first_pieces, layer, head)
# a long map opens its full-resolution region on the sentence's starting link (at word level: the words holding it)
focus = (start.query, start.key)
if chosen.groups is not None:
    focus = (word_of(chosen.groups[0], start.query), word_of(chosen.groups[1], start.key))
masked = chosen.kind == "decoder_self"
drawn = {"window": window} if window is not None and chosen.groups is None else {}
head_map(weights, chosen.queries, chosen.keys, title, "attention_heatmap", focus, clicked, view, masked=masked, **drawn)
token_legend()  # the marks its token labels use

st.subheader(f"All heads of layer {layer + 1}")
f_q, f_k = factor(len(chosen.queries), LAYER_CELLS), factor(len(chosen.keys), LAYER_CELLS)
averaged = f"; {cells_note(f_q, f_k)} (their mean)" if max(f_q, f_k) > 1 else ""
greyed = window is not None and chosen.groups is None and attention.mask.shape[1] > window  # a local layer's band
grey = " Grey: the cells whose every key the window hides." if greyed else ""
st.caption(f"Small multiples, each scaled to its own maximum{averaged}. Click one to show it above.{grey}")
chart(
    layer_heads(chosen.weights[layer], layer, window if chosen.groups is None else None),
    "attention_layer_heads",
    on_click=drill_to_pickers(state.ATTENTION_LAYER, state.ATTENTION_HEAD),
    view=view[:2],
    title=f"All heads of layer {layer + 1}",
)
