"""Positional encoding: the paper's sinusoids, and a pretrained model's learned positions beside them."""

from __future__ import annotations

import streamlit as st

from explorer import cached, state
from explorer.figures import positional as figures
from explorer.pages._shared import chart, intro, page_footer, page_header
from explorer.positions import neighbour_cosine, sinusoid_curves
from explorer.wording import learned_positions

page_header("Positional encoding")
st.latex(
    r"PE_{(pos,\,2i)} = \sin\!\left(pos / 10000^{2i/d_{model}}\right) \qquad "
    r"PE_{(pos,\,2i+1)} = \cos\!\left(pos / 10000^{2i/d_{model}}\right)"
)
intro(
    "Attention itself ignores order, so the Transformer adds a position vector to each token embedding "
    "(section 3.5). Each pair of dimensions is a sine and cosine of one frequency, from one cycle every "
    r"$2\pi$ positions down to one every $10000 \cdot 2\pi$; any fixed offset is then a linear map of the "
    "encoding. BERT- and GPT-2-family models instead learn one vector per position."
)

model_name = st.session_state[state.MODEL]
tables = cached.get_positions(model_name)
sinusoid = tables["sinusoidal"]
max_len, d_model = sinusoid.shape
left, right = st.columns(2)
positions = left.slider("Positions shown", 8, max_len, min(64, max_len), key="positional_positions")
# one fast, two middling and one slow frequency: the period grows with the dimension index
default_dims = [d for d in (0, 1, 40, 100, 200) if d < d_model]
dims = right.multiselect("Dimensions (curves)", list(range(d_model)), default=default_dims, key="positional_dims")
st.subheader("Sinusoids for chosen dimensions")
if dims:
    smooth = sinusoid_curves(positions, d_model, dims)
    chart(figures.curves(sinusoid[:positions], dims, smooth), "positional_curves")
    st.caption("Dots are the table's values at whole positions; the line is the formula between them.")
else:
    st.info("Pick at least one dimension to draw its curve.")

learned = tables.get("learned")
columns = st.columns(2) if learned is not None else [st.container()]
with columns[0]:
    chart(figures.table_heatmap(sinusoid[:positions], f"Sinusoidal, d_model {d_model}"), "positional_table")
    chart(figures.similarity_heatmap(sinusoid[:positions], "Sinusoidal: cosine(PE_i, PE_j)"), "positional_similarity")
if learned is not None:
    with columns[1]:
        chart(figures.table_heatmap(learned[:positions], "Learned (this model's own)"), "positional_learned_table")
        chart(
            figures.similarity_heatmap(learned[:positions], "Learned: cosine(P_i, P_j)"),
            "positional_learned_similarity",
        )
    st.caption(learned_positions(neighbour_cosine(learned), neighbour_cosine(sinusoid)))
page_footer()
