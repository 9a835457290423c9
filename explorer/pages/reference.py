"""Ours vs reference: the from-scratch model's attention beside Hugging Face transformers' on the same input."""

from __future__ import annotations

import numpy as np
import streamlit as st

from explorer import cached, reference_view, state
from explorer.figures.heatmap import head_heatmap
from explorer.figures.statistics import statistic_grid
from explorer.pages._shared import current_trace, pick_head, pick_layer

st.header("Ours vs the transformers reference")
st.markdown(
    "The same all-MiniLM-L6-v2 weights run through this project's from-scratch encoder and through Hugging Face "
    "`transformers` (eager attention). Below: the largest absolute difference between the two, head by head, "
    "over every query and key, then any head side by side."
)

key = st.session_state[state.MODEL]
if key not in reference_view.REFERENCE_MODELS:
    st.info("Only the pretrained MiniLM has a transformers twin here: pick it in the sidebar.")
    st.stop()
trace = current_trace()
ours = trace.encoder_self.weights
theirs = cached.get_reference_attention(*state.sidebar(st.session_state))
differences = cached.get_reference_difference(*state.sidebar(st.session_state))
worst = float(differences.max())
(st.success if worst <= 1e-5 else st.error)(
    f"Largest difference over all {ours.shape[0]} x {ours.shape[1]} heads and {ours.shape[2]} x {ours.shape[3]} "
    "weights each: "
    f"{worst:.3g} (the project's bound is 1e-5)."
)
labels = np.array([[f"{d:.3g}" for d in row] for row in differences], dtype=object)
# scaled from 0 to the bound (or past it), so an all-zero grid reads as "nothing" rather than as mid-scale
grid = statistic_grid(differences, labels, "max |ours - reference|", zrange=(0.0, max(1e-5, worst)))
st.plotly_chart(grid, key="reference_grid")

left, right = st.columns(2)
layer = pick_layer(ours.shape[0], "reference_layer", left)
head = pick_head(ours.shape[1], "reference_head", right)
tokens = trace.source_tokens
cols = st.columns(2)
cols[0].plotly_chart(head_heatmap(ours[layer, head], tokens, tokens, "Ours (from scratch)"), key="reference_ours")
cols[1].plotly_chart(head_heatmap(theirs[layer, head], tokens, tokens, "transformers"), key="reference_theirs")
