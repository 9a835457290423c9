"""Q/K/V step by step: one head's computation for one query token, with the model's own numbers."""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from explorer import cached, starting, state, walkthrough, wording
from explorer.figures.labels import position_labels
from explorer.figures.walkthrough import masked_scores, per_key_bars, vector_strip
from explorer.pages._shared import chart, pick_attention, pick_head, pick_layer, pick_token
from explorer.wording import scaling_note

SHOWN = 8  # values of a long vector shown inline; all of them are in the download


def pick_keys(s: walkthrough.HeadSteps, keys: tuple[str, ...], kind: str) -> np.ndarray | None:
    """Past ALL_KEYS keys: which keys the bars and strips draw (None: every key). Values never change."""
    if len(keys) <= walkthrough.ALL_KEYS:
        return None
    left, middle, right = st.columns([2, 2, 3])
    window = left.radio(
        "Keys drawn",
        ["strongest", "window"],
        format_func={"strongest": "the strongest (and the query)", "window": "a window around a key"}.get,
        key="qkv_keys_mode",
    )
    n = middle.slider("How many keys", 8, 40, 16, key="qkv_keys_n")
    if window == "window":
        if st.session_state.get("qkv_keys_center") not in range(len(keys)):
            st.session_state.pop("qkv_keys_center", None)  # a shorter sentence
        around = min(s.query, len(keys) - 1) if kind != "cross" else int(np.argmax(s.weights))
        center = right.selectbox(
            "Around key",
            range(len(keys)),
            around,
            format_func=position_labels(keys).__getitem__,
            key="qkv_keys_center",
        )
        picked = walkthrough.window_keys(len(keys), center, n)
    else:
        picked = walkthrough.strongest_keys(s.weights, n, keep=(s.query,) if kind != "cross" else ())
    st.caption(
        f"{len(keys)} keys: the charts draw {len(picked)} of them; the light line above each bar chart and the "
        "CSV download hold every key."
    )
    return picked


st.header("Q, K, V step by step")
st.markdown(
    "One head, one query token, every number taken from the model's own forward pass: project the input to "
    "q, k and v, score the query against every key, scale, mask, softmax, and mix the values."
)

chosen = pick_attention("qkv", words=False)
attention, queries, keys = chosen.attention, chosen.queries, chosen.keys
start = cached.get_start(*state.sidebar(st.session_state), chosen.kind)  # opens on a content word's strongest link
c1, c2, c3 = st.columns(3)
layer = pick_layer(attention.n_layers, "qkv_layer", c1, start.layer)
head = pick_head(attention.n_heads, "qkv_head", c2, index=start.head)
query = pick_token(queries, "Query token", state.QKV_QUERY, c3, index=starting.content_query(queries, start.query))
config = cached.model(st.session_state[state.MODEL]).model.config
s = walkthrough.steps(chosen.trace, chosen.kind, layer, head, query, config)
shown = pick_keys(s, keys, chosen.kind)


def preview(vector: np.ndarray) -> str:
    shown = ", ".join(f"{x:.4f}" for x in vector[:SHOWN])
    return f"[{shown}{', ...' if vector.size > SHOWN else ''}]  ({vector.size} values)"


st.subheader("1. The input row")
st.markdown(f"x = {s.x_query_source}, row {query}: `{preview(s.x_query)}`")
if note := wording.pre_ln_note(config):
    st.caption(note)
st.subheader("2. Project to q, k, v")
st.latex(
    rf"q = x W^Q_{{{head + 1}}} + b^Q_{{{head + 1}}},\; k_j = x_j W^K_{{{head + 1}}} + b^K_{{{head + 1}}},\;"
    rf" v_j = x_j W^V_{{{head + 1}}} + b^V_{{{head + 1}}}"
    rf"\qquad W^Q, W^K, W^V \in \mathbb{{R}}^{{{s.d_model} \times {s.d_head}}}"
)
st.markdown(f"Keys and values come from {s.x_keys_source}. q = `{preview(s.q)}`")
st.caption("Each projection has a bias (b^Q, b^K, b^V): recomputing q as x W^Q alone is off by that bias.")
chart(vector_strip(s.q, [queries[query]], "q"), "qkv_q")
chart(vector_strip(s.k, keys, "K (one row per key)", shown), "qkv_k")
chart(vector_strip(s.v, keys, "V (one row per key)", shown), "qkv_v")

st.subheader("3. Score, scale, mask, softmax")
st.latex(r"\text{score}_j = q \cdot k_j \qquad \frac{q \cdot k_j}{\sqrt{d_k}},\ d_k = " + str(s.d_head))
chart(per_key_bars(s.raw_scores, keys, "q . k_j", s.mask, shown=shown), "qkv_raw")
chart(per_key_bars(s.scaled_scores, keys, f"q . k_j / sqrt({s.d_head})", s.mask, shown=shown), "qkv_scaled")
if not s.mask.all():
    hidden = int((~s.mask).sum())
    st.markdown(
        f"The mask hides {hidden} key(s) (grey; their bars above show the score before masking). Before the softmax "
        "the model replaces each hidden score by the lowest float32 number, -3.4e38 (in effect minus infinity), so "
        "they get weight exactly 0."
    )
    chart(masked_scores(s.masked_scores, s.mask, keys, "after the mask: what the softmax sees"), "qkv_masked")
chart(per_key_bars(s.weights, keys, "softmax weights (the model's)", s.mask, shown=shown), "qkv_weights")

# a toggle, not an expander: a closed expander's contents are still built and sent on every rerun
if st.toggle("What if: change the softmax temperature (not the model's computation)", key="qkv_what_if_on"):
    temperature = st.slider("Temperature T", 0.1, 5.0, 1.0, 0.1, key="qkv_temperature")
    what_if = walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, temperature)
    st.caption(
        "softmax(scores / T): T < 1 sharpens, T > 1 flattens. T = 1 is the model: it always uses T = 1. "
        + scaling_note(s.d_head, float(s.scaled_scores[s.mask].std()))
    )
    what_if_bars = per_key_bars(
        s.weights, keys, "model (T = 1) vs what-if", s.mask, what_if, f"T = {temperature}", shown=shown
    )
    chart(what_if_bars, "qkv_what_if")

st.subheader("4. Weight the values and sum: this head's output z")
chart(vector_strip(s.weighted_values, keys, "weight_j x v_j", shown), "qkv_weighted")
chart(vector_strip(s.z, [f"z (head {head + 1})"], "z = sum_j weight_j v_j"), "qkv_z")

st.subheader("5. Concatenate the heads and multiply by W_O")
st.latex(
    rf"\text{{MultiHead}} = \text{{Concat}}(z_1, \dots, z_{{{attention.n_heads}}})\, W^O + b^O,"
    rf"\quad W^O \in \mathbb{{R}}^{{{s.d_model} \times {s.d_model}}}"
)
st.markdown(f"This head fills dimensions {head * s.d_head} to {(head + 1) * s.d_head - 1} of the concatenation.")
chart(vector_strip(s.concat, ["concat"], "Concat of every head's z"), "qkv_concat")
chart(vector_strip(s.output, ["output"], "After W_O (before the residual and LayerNorm)"), "qkv_output")

st.download_button(  # written only when clicked (a partial, not a lambda: it keeps no page globals)
    "Download every value (CSV)",
    functools.partial(walkthrough.to_csv, s),
    file_name="qkv_steps.csv",
    mime="text/csv",
    key="qkv_download",
    on_click="ignore",
)
