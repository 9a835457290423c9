"""Overview: the chosen model drawn as the paper's figure 1, each part linking to the page that shows it."""

from __future__ import annotations

import streamlit as st

from explorer import cached, state
from explorer.figures.labels import escape_tokens
from explorer.figures.overview import figure_one
from explorer.pages._shared import chart

st.header("Overview")
loaded = cached.model(st.session_state[state.MODEL])
config = loaded.model.config
kind = "encoder-decoder" if config.is_encoder_decoder else "encoder-only (BERT family)"
st.markdown(
    f"The model in the sidebar, drawn as figure 1 of *Attention Is All You Need*: an {kind} Transformer. Each part "
    "below opens the page that shows it on the sidebar's sentence, with the model's own numbers."
)
chart(figure_one(config, escape_tokens([loaded.title])[0]), "overview_figure")

links = [
    ("forward.py", "Embedding, positions, Add & Norm, feed-forward: one token step by step", ":material/route:"),
    ("positional.py", "Positional encoding", ":material/waves:"),
    ("attention.py", "Self-attention (and masked and cross-attention): the heatmap", ":material/grid_on:"),
    ("qkv.py", "Inside one head: Q, K, V, softmax, W^O", ":material/calculate:"),
    ("model_view.py", "Every layer and head at once", ":material/apps:"),
]
if config.is_encoder_decoder:
    links += [
        ("decoding.py", "Decoder, one output token at a time", ":material/translate:"),
        ("output.py", "Linear, softmax, sampling and the loss", ":material/functions:"),
    ]
columns = st.columns(2)
for i, (page, label, icon) in enumerate(links):
    columns[i % 2].page_link(f"explorer/pages/{page}", label=label, icon=icon)
