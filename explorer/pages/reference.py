"""Ours vs reference: the from-scratch model's attention beside Hugging Face transformers' on the same input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_explorer.explorer.app import cached, compare_runs, state
from attention_explorer.explorer.app.waiting import ask_first
from attention_explorer.explorer.figures import style
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.lesson.wording import starting_note
from attention_explorer.explorer.run import admission, cost, reference_view
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, token_legend
from attention_explorer.explorer.views.frame import stop
from attention_explorer.explorer.views.pickers import pick_layer_head
from attention_explorer.explorer.views.zoom import drawn_window, head_map, largest_cell, window_caption

OVERVIEW = 256  # the side-by-side pair past this many tokens: block means (the difference stays per token)

st.header("Ours vs the transformers reference")

key = st.session_state[state.MODEL]
folder = reference_view.folder_of(key)
if folder is None:
    st.markdown(
        "A model read from Hugging Face files runs through this project's from-scratch engine and through Hugging Face "
        "`transformers` (eager attention), and the two are compared weight by weight."
    )
    st.info(
        "Only models read from Hugging Face files (the pretrained MiniLM, or a local or Hugging Face cache folder) "
        "have a transformers reference here: pick one in the sidebar."
    )
    st.stop()
loaded = cached.model(key)
kind = loaded.family.kinds[0]  # the attention that reads the text: BERT's encoder self-, GPT-2's decoder self-
stack = "decoder (masked self-attention)" if kind == "decoder_self" else "encoder"
st.markdown(
    f"The same {loaded.title} weights run through this project's from-scratch {stack} and through Hugging Face "
    f"`transformers` (`{reference_view.class_name(folder)}`, eager attention). Below: the largest absolute difference "
    "between the two, head by head, over every query and key, then any head side by side."
)
trace = current_trace()
ours = trace.attention(kind).weights
sidebar = state.sidebar(st.session_state)
start = cached.get_start(sidebar, kind)  # the sentence's head worth seeing, as every page opens on
st.caption(starting_note(loaded.family, kind))
summary = st.container()  # the grid goes above the pickers, but comes from the same reference run as the head
layer, head = pick_layer_head(*ours.shape[:2], "reference", layer=start.layer, head=start.head)
tokens = trace.readable(trace.source_tokens)
window = drawn_window(trace.attention(kind).windows, kind, layer)  # a local layer: ours, theirs and A - B grey it
window_caption(trace.attention(kind).windows, layer, len(tokens))
cols = st.columns(2)
chart(  # ours first: a long text's reference waits for a click, and ours is drawn meanwhile
    head_heatmap(ours[layer, head], tokens, tokens, "Ours (from scratch)", narrow=True, overview=OVERVIEW, **window),
    "reference_ours",
    container=cols[0],
)
seconds = compare_runs.reference_seconds(sidebar, layer, head)
what = (
    f"Running transformers up to layer {layer + 1} gives its map of this head."
    if compare_runs.reference_grid_kept(sidebar)
    else f"The comparison runs transformers over all {len(tokens):,} tokens and sets each of its {ours.shape[0]} "
    "layers against ours."
)
load, load_bytes = compare_runs.reference_load(sidebar)
if load >= 1:  # the first visit loads transformers' own copy of the model: said before, with its time and memory
    how = "converts the GGUF file's weights again" if folder.endswith(".gguf") else "reads the model's files"
    what = (
        f"First transformers loads its own copy of {loaded.title}: it {how}, {cost.about(load)} and about "
        f"{admission.gigabytes(load_bytes)} more of the server's memory, kept for later visits. Then: {what[0].lower()}"
        f"{what[1:]}"
    )
if not ask_first(
    what, seconds + load, "Run the transformers reference", "reference_run", summary, load_bytes, always=load >= 1
):
    stop()
try:
    differences, theirs_head = compare_runs.get_reference_difference(sidebar, layer, head)
except (OSError, ValueError) as e:  # a folder our engine reads but transformers cannot (e.g. no model_type it knows)
    st.error(f"transformers could not read the files of {loaded.title}: {e}")
    st.stop()
worst = float(differences.max())
with summary:
    (st.success if worst <= 1e-5 else st.error)(
        f"Largest difference over all {ours.shape[0]} x {ours.shape[1]} heads and {ours.shape[2]} x {ours.shape[3]} "
        "weights each: "
        f"{worst:.3g} (the project's bound is 1e-5)."
    )
    labels = np.array([[f"{d:.3g}" for d in row] for row in differences], dtype=object)
    # scaled from 0 to the bound (or past it), so an all-zero grid reads as "nothing" rather than as mid-scale
    grid = statistic_grid(
        differences,
        labels,
        "max |ours - reference|",
        zrange=(0.0, max(1e-5, worst)),
        title="Largest |ours - transformers| weight per head",
    )
    chart(grid, "reference_grid")
    with st.expander("The same numbers as a table (click a column header to sort)"):
        st.dataframe(
            pd.DataFrame(
                [
                    {"layer": i + 1, "head": j + 1, "max |ours - reference|": float(differences[i, j])}
                    for i in range(differences.shape[0])
                    for j in range(differences.shape[1])
                ]
            ),
            hide_index=True,
            key="reference_table",
            column_config={"max |ours - reference|": st.column_config.NumberColumn(format="%.3e")},
        )

chart(
    head_heatmap(theirs_head, tokens, tokens, "transformers", narrow=True, overview=OVERVIEW, **window),
    "reference_theirs",
    container=cols[1],
)
difference = ours[layer, head].astype(np.float64) - theirs_head.astype(np.float64)
largest = float(np.abs(difference).max())
st.markdown(
    f"**Ours - transformers**, layer {layer + 1}, head {head + 1}: {style.POSITIVE} where ours is larger, "
    f"{style.NEGATIVE} where the "
    + (
        f"reference is; the scale runs to the largest difference ({largest:.3g}), so float rounding shows as noise."
        if largest
        else "reference is. Here every weight is identical to the last bit: the difference is exactly 0."
    )
)
focus = largest_cell(difference)  # a long text: the region opens where the two differ most
head_map(difference, tokens, tokens, "Ours - transformers", "reference_difference", focus, diverging=True, **window)
token_legend()  # the marks its token labels use
