"""Head view: lines from each query token to the key tokens it attends to, one colour per head."""

from __future__ import annotations

import functools

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.app.callbacks import focus_token, head_label
from attention_explorer.explorer.figures.head_view import WINDOW, head_view, window_start
from attention_explorer.explorer.lesson.wording import attention_formula, head_output
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.head_chips import pick_heads
from attention_explorer.explorer.views.pickers import pick_attention, pick_layer, pick_token
from attention_explorer.explorer.views.zoom import drawn_window

st.header("Head view")
config = cached.model(st.session_state[state.MODEL]).model.config
st.caption(f"The lines draw one head's attention weights A_i; the head's output is {head_output(config)}.")
st.markdown(
    "Queries on the left, keys on the right. A line's opacity is the attention weight, its colour the head; each "
    "query shows its strongest keys (weights under 0.05 are left out). Click a head in the legend to hide it, or "
    f"click a token (or pick it) to see only its lines. Past {WINDOW} tokens the view shows {WINDOW} at a time: "
    "move them with the slider; the grey rows above and below stand for the tokens not shown."
)

chosen = pick_attention("head")
formula = st.empty()  # the formula above the pickers, with the picked layer's mask (a local layer's window)
attention = chosen.attention
# the sentence's starting head (cached.get_start) and its link's query token highlighted: at word level, its word
start = cached.get_start(state.sidebar(st.session_state), chosen.kind)
query = start.query if chosen.groups is None else next(i for i, g in enumerate(chosen.groups[0]) if start.query in g)
left, middle = st.columns(2)
layer = pick_layer(attention.n_layers, "head_layer", left, start.layer)
formula.latex(attention_formula(chosen.kind, config, layer))  # decoder self-attention adds its mask
focus = pick_token(chosen.queries, "Highlight token", "head_focus", middle, allow_all=True, index=query + 1)
if state.HEAD_HEADS not in st.session_state or state.at_start(st.session_state, state.HEAD_HEADS):
    state.start(st.session_state, state.HEAD_HEADS, [start.head])  # a new sentence's starting head, until one is picked
heads = pick_heads(attention.n_heads, state.HEAD_HEADS, head_label)  # its chips in the heads' colours
if not heads:
    st.info("Pick at least one head.")
    st.stop()
n_tokens = max(len(chosen.queries), len(chosen.keys))
# on the starting link's query (token level): its key in the same window where both fit
linked = start.key if chosen.groups is None and focus == start.query else None
start = None
if n_tokens > WINDOW:  # keyed by the focus: picking a token moves the window to it
    start = st.slider(
        f"Tokens shown: {WINDOW} from (of {n_tokens})",  # not "window": a local layer's window is another thing
        0,
        n_tokens - WINDOW,
        window_start(n_tokens, focus, also=linked),
        key=f"head_window_{focus}",
    )
window = drawn_window(attention.windows, chosen.kind, layer, words=chosen.groups is not None)
if window:  # a local layer: the keys its window hides from the highlighted token (its mask is in the formula)
    span = f"Layer {layer + 1} is local: each token sees at most the {window['window']:,} keys before it, itself"
    span += " included."
    hidden = None if focus is None else max(0, focus - window["window"] + 1)  # keys at window or more back
    stub = ", and the row for earlier tokens counts those it holds"  # where the view starts past token 0
    st.caption(
        f"{span} Highlight a token to grey the keys its window hides (a grey square and label, above a dashed edge)."
        if hidden is None
        else f"{span} The highlighted token, at position {focus}, sees every key before it: none is hidden."
        if not hidden
        else f"{span} It hides {hidden:,} keys from the highlighted token, all those above the dashed edge: each one "
        f"drawn gets a grey square and a grey label{stub * bool(start)}."
        if hidden > (start or 0)
        else f"{span} It hides the first {hidden:,} keys from the highlighted token, all in the row for earlier tokens "
        "above the dashed edge."
    )
elif attention.windows and chosen.kind == "decoder_self":  # global, or local drawn by word (not drawn)
    span = attention.windows[layer]
    local = [i for i, w in enumerate(attention.windows) if w is not None and n_tokens > w]  # where a window hides keys
    pointer = (
        f" Layer {local[0] + 1} is local, with a window of {attention.windows[local[0]]:,} keys shorter than this "
        "text: pick it to see the keys its window hides."
        if local and span is None and chosen.groups is None
        else ""
    )
    st.caption(
        f"Layer {layer + 1} is global: each token sees every key before it, itself included.{pointer}"
        if span is None
        else f"Layer {layer + 1} is local (a window of {span:,} keys); at word level what it hides is not drawn."
    )
chart(
    head_view(chosen.weights[layer], chosen.queries, chosen.keys, heads, focus, start=start, **window),
    "head_lines",
    on_click=functools.partial(focus_token, "head_focus"),
)
token_legend()  # the marks its token labels use
