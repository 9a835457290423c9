"""Model view: every layer x head in one figure; pick one to see it at full resolution or open it."""

from __future__ import annotations

import streamlit as st

from explorer import cached, state
from explorer.figures.heatmap import head_heatmap
from explorer.figures.model_view import THUMBNAIL, model_view
from explorer.pages._shared import (
    PRESENT_LAYERS,
    chart,
    drill_to_pickers,
    focus_start,
    intro,
    kind_name,
    open_in_attention,
    page_footer,
    page_header,
    pick_attention,
    pick_head,
    pick_layer,
    sidebar_family,
)
from explorer.wording import attention_formula, head_output, model_view_hint

page_header("Model view")
intro(
    "Each thumbnail draws one head's attention weights A_i; the head's output is "
    f"{head_output(cached.model(st.session_state[state.MODEL]).model.config)}. Every head "
    "of every layer at a glance: layers run down, heads across, and each thumbnail is that head's "
    f"attention (queries down, keys across). {model_view_hint(sidebar_family())} Thumbnails are "
    f"averaged down to at most {THUMBNAIL} x {THUMBNAIL} cells and each is scaled to its own maximum, so a nearly "
    "uniform head looks as contrasty as a sharp one: the full-size map below keeps the 0-1 scale."
)

chosen = pick_attention("qkv")  # the lesson's focus: the kind, layer and head the other steps show
st.latex(
    attention_formula(chosen.kind, cached.model(st.session_state[state.MODEL]).model.config)
)  # decoder self-attention adds its mask
attention = chosen.attention
layer0, head0, _ = focus_start(chosen.kind)
left, right = st.columns(2)
layer = pick_layer(attention.n_layers, state.FOCUS_LAYER, left, layer0)
head = pick_head(attention.n_heads, state.FOCUS_HEAD, right, index=head0)
st.caption("Click a thumbnail to see that head below; the button under it opens the head in the attention heatmap.")
chart(
    model_view(chosen.weights, THUMBNAIL, selected=(layer, head)),
    "model_grid",
    on_click=drill_to_pickers(state.FOCUS_LAYER, state.FOCUS_HEAD),
    present_height=340 if attention.n_layers <= PRESENT_LAYERS else None,
    view=(kind_name(chosen.kind),),
    title="Every layer and head",
)

title = f"Layer {layer + 1}, head {head + 1}"
st.subheader(f"{title} at full resolution")
chart(
    head_heatmap(chosen.weights[layer, head], chosen.queries, chosen.keys, title),
    "model_selected",
    view=(kind_name(chosen.kind), f"layer {layer + 1}", f"head {head + 1}"),
)
if st.button("Open in the attention heatmap", key="model_open"):
    open_in_attention(chosen.kind, layer, head, chosen.groups is not None)
page_footer()
