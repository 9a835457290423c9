"""Compare weights: a model beside its untrained copy (random weights) on the sidebar's sentence: MiniLM and
minilm-random, or a folder NAME and NAME-random (a Gemma 3 or Mistral folder: its local layers' windows greyed)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.heatmap import fits_half_width, head_heatmap
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import compare
from attention_explorer.explorer.run.heads import head_or_mean, head_title
from attention_explorer.explorer.views.chart import chart, drill_to_pickers
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.pickers import pick_attention, pick_layer_head
from attention_explorer.explorer.views.zoom import drawn_window

RANDOM = "-random"  # a model's untrained copy is offered as its key plus this: minilm-random, a folder NAME-random
OVERVIEW = 256  # the pair, each in half the page's width, past this many tokens: block means (as Compare sentences)


def pair_of(key: str) -> tuple[str, str] | None:
    """(pretrained, random) for the sidebar's model: it and its copy KEY-random, where the catalogue has both."""
    base = key.removesuffix(RANDOM)
    if base != key and cached.catalogued(base):
        return base, key
    return (key, key + RANDOM) if cached.catalogued(key + RANDOM) else None


st.header("Compare: pretrained vs random weights")
model = st.session_state[state.MODEL]
pair = pair_of(model)
if pair is None or pair[0] == "minilm":
    st.markdown(
        "The same sentence through all-MiniLM-L6-v2 with its pretrained weights and with random ones (same shape, "
        "same tokenizer). Untrained heads spread their attention almost evenly; training is what makes the "
        "patterns you see elsewhere: attention to the previous token, to [SEP], to related words."
    )
else:
    st.markdown(
        f"The same sentence through {cached.described(pair[0]).title} and through "
        f"{cached.described(pair[1]).title}, offered beside it as its copy with random weights. Untrained heads "
        "spread their attention evenly over the keys they may see; training is what makes the patterns you see "
        "elsewhere."
    )
if pair is None:
    st.info(
        "This comparison is for a model and its random-weights copy: pick all-MiniLM-L6-v2 (pretrained or random) in "
        f"the sidebar, or a folder offered beside its copy named with {RANDOM} (NAME and NAME{RANDOM})."
    )
    st.stop()
if missing := [key for key in pair if key not in cached.model_keys()]:  # serve --models left it out
    st.info(f"This comparison needs both; this server does not offer {cached.described(missing[0]).title}.")
    st.stop()
chosen = pick_attention("compare")
sidebar = state.sidebar(st.session_state)
short = dict(zip(pair, ("Pretrained", "Random weights"), strict=True))


def drawn(key: str) -> np.ndarray:  # same tokenizer, so the sidebar model's labels fit both
    if chosen.groups is not None:
        return cached.get_word_level(sidebar.with_model(key), chosen.kind)[0]
    return cached.get_trace(sidebar.with_model(key)).attention(chosen.kind).weights


weights = {key: drawn(key) for key in pair}
tokens = {key: cached.get_trace(sidebar.with_model(key)).tokens_for(chosen.kind) for key in pair}
if weights[pair[0]].shape != weights[pair[1]].shape or tokens[pair[0]] != tokens[pair[1]]:
    st.info("These two models do not share a shape and a tokenizer on this sentence, so their maps do not line up.")
    st.stop()
n_layers, n_heads = weights[pair[0]].shape[:2]
to_detail = drill_to_pickers("compare_layer", "compare_head")  # a clicked grid cell: that head in the detail
st.subheader("Which heads training changed most")
st.caption(
    "Per head, the largest difference between the pretrained and the random weights on this sentence (one cell "
    "of its map). Click a cell to see that head side by side below."
)
changed = compare.changed_most(weights[pair[0]] - weights[pair[1]])  # same tokens: cells line up
trained = statistic_grid(*changed, "max |pretrained - random|", title="Largest |pretrained - random| weight per head")
chart(trained, "compare_trained", on_click=to_detail)
start = cached.get_start(sidebar.with_model(pair[0]), chosen.kind)  # a head the pretrained weights made striking
layer, head = pick_layer_head(n_layers, n_heads, "compare", mean=True, layer=start.layer, head=start.head)
if max(len(chosen.queries), len(chosen.keys)) > OVERVIEW:
    st.caption(
        f"Past {OVERVIEW} tokens each map shows means over blocks of tokens (hover names each block); the attention "
        "heatmap shows any head at full resolution."
    )
# side by side while every key's label fits half the page; past that one under the other, each key still named
narrow = fits_half_width(len(chosen.keys))
# a pair with local layers greys what the window hides (the MiniLM pair has none: every layer global)
window = drawn_window(chosen.attention.windows, chosen.kind, layer, words=chosen.groups is not None)
columns = st.columns(2) if narrow else (st.container(), st.container())
for column, key in zip(columns, pair, strict=True):
    title = f"{short[key]}: {head_title(layer, head, n_heads)}"  # fits a half-width chart
    weight = head_or_mean(weights[key], layer, head)
    figure = head_heatmap(weight, chosen.queries, chosen.keys, title, narrow=narrow, overview=OVERVIEW, **window)
    chart(figure, f"compare_{key}", column)
st.subheader("Entropy of every head")
most = (
    "the maximum, log(tokens)"
    if chosen.kind != "decoder_self"
    else "the most each row can have, the log of the keys it may see (at most log(tokens))"
)
st.caption(
    f"How spread out each head's attention is (in nats, averaged over the rows): random heads sit near {most}. "
    "Click a cell to see that head side by side above."
)
columns = st.columns(2)
for column, key in zip(columns, pair, strict=True):
    stats, labels = cached.get_statistics(sidebar.with_model(key), chosen.kind)
    top = float(np.log(len(chosen.trace.tokens_for(chosen.kind)[1])))
    grid = statistic_grid(stats["entropy"], labels, "entropy", zrange=(0.0, top), title=f"{short[key]}: entropy")
    chart(grid, f"compare_entropy_{key}", column, on_click=to_detail)
token_legend()  # the marks its token labels use
