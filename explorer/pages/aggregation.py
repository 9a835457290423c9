"""Aggregation: raw attention (mean over heads), attention rollout and attention flow, token or word level."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures import zoom
from attention_explorer.explorer.figures.heatmap import fits_half_width, head_heatmap
from attention_explorer.explorer.lesson.window_words import rollout_window_words
from attention_explorer.explorer.run import analysis, device_reducers
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.pickers import pick_attention, pick_layer
from attention_explorer.explorer.views.zoom import drawn_window, window_caption

FLOW_MAX_TOKENS = 32  # one max-flow per (query, key) pair: about 0.3 s at 32 tokens and 6 layers, 2.5 s at 64

st.header("Rollout and flow")
st.markdown(
    "One head of one layer shows only part of the story, because every layer also keeps its input through the "
    "residual connection. **Attention rollout** (Abnar & Zuidema 2020) multiplies the layers' attention, each "
    "averaged over heads and mixed half-and-half with the identity for the residual, from the first layer up "
    "to the chosen one. **Attention flow** treats the same matrices as capacities and computes the maximum flow "
    "from each position at the chosen layer down to each input token."
)
st.caption(
    "Each map's colours span its own 1st to 99th percentile (named in its title), not 0 to 1: rollout over "
    "many tokens spreads its weight thin and flow spreads it evenly: on 0 to 1 one would look blank, the other solid."
)

chosen = pick_attention("aggregate", starting=False, cross=False)
if chosen.kind == "cross":
    st.info("Rollout and flow follow one stream of tokens through its layers; pick a self-attention.")
    st.stop()
attention = chosen.attention
layer = pick_layer(attention.n_layers, "aggregate_layer", index=attention.n_layers - 1)

# one layer's mean over heads and, below, the layers' residual-mixed maps: on a GPU each reduced there, only (T, T) back
raw = chosen.view(attention.reduced(lambda heads: heads.mean(axis=0), lambda heads: heads.mean(0), [layer])[0])
queries, keys = chosen.queries, chosen.keys
# a long text's rollout as its overview draws it, reduced by the first run (the whole rollout is L T^3 and reads
# every layer); at word level, or a text drawn whole, computed here from the layers
reduced = None if chosen.groups else cached.get_rollout_overview(state.sidebar(st.session_state), chosen.kind, layer)
length = len(chosen.trace.tokens_for(chosen.kind)[0])  # flow's and rollout's cost grow with tokens, not words
rolled = reduced
if reduced is None and (length <= zoom.FULL or chosen.groups is None):
    mixed = attention.reduced(analysis.residual_mixed, device_reducers.residual_mixed, range(layer + 1))
    rolled = chosen.view(analysis.rollout_of(mixed)[-1])

# two per row (three side by side leave each too narrow to read) while every key's label fits half the page;
# past that one under another, each key still named
narrow = fits_half_width(len(keys))
shown = {"narrow": narrow, "stretched": True, "overview": zoom.beside(len(queries), len(keys))}  # long: block means
top = st.columns(2) if narrow else (st.container(), st.container())
window = drawn_window(attention.windows, chosen.kind, layer, words=chosen.groups is not None)  # raw: one layer's
raw_map = head_heatmap(raw, queries, keys, f"Raw: layer {layer + 1}, mean of heads", **shown, **window)
chart(raw_map, "aggregate_raw", top[0])
if rolled is None:  # word level on a long text: every layer's whole map at once (4.5 GB at 2,048 tokens), T^3 each
    top[1].info(
        f"At word level the rollout is computed for inputs of up to {zoom.FULL} tokens; this one has {length}. "
        "Turn word level off to see the rollout over every token (as block means)."
    )
else:
    rolled_title = f"Rollout: layers 1-{layer + 1}"
    chart(
        head_heatmap(rolled, queries, keys, rolled_title, blocked=reduced is not None, **shown),
        "aggregate_rollout",
        top[1],
    )
if attention.windows:  # the raw map is one layer's; rollout and flow are many layers', so no one window is theirs
    window_caption(attention.windows, layer, length, words=chosen.groups is not None)
    st.caption(rollout_window_words(attention.windows, layer, length))
bottom = st.columns(2) if narrow else (st.container(), st.container())
bottom[1].caption(
    "Reading them: raw attention is one layer's mixing only. Rollout follows it through every layer below, so "
    "weight drifts towards the tokens that many layers keep attending to. Flow asks how much could pass at most "
    "through any route, so it spreads more evenly and saturates sooner."
)
if length > FLOW_MAX_TOKENS:
    bottom[0].info(f"Attention flow is computed for inputs of up to {FLOW_MAX_TOKENS} tokens; this one has {length}.")
    st.stop()
with bottom[0]:  # drawn last: the max-flows take a moment, and the other two need not wait for them
    flows = cached.get_flow(state.sidebar(st.session_state), chosen.kind, layer)
    flows = chosen.view(flows)
    chart(
        head_heatmap(flows, queries, keys, f"Flow: layers 1-{layer + 1}", narrow=narrow, stretched=True),
        "aggregate_flow",
    )
token_legend()  # the marks its token labels use
