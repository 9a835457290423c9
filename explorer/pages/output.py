"""Output and loss on one page: final linear -> logits -> softmax per decoder position, sampling, and the loss."""

from __future__ import annotations

import streamlit as st

from explorer.pages import _output
from explorer.pages._shared import page_header

page_header("Output and loss")
st.markdown(
    "The decoder's last state for each position goes through the final linear layer (one logit per word of the "
    "vocabulary) and a softmax. Training compares that distribution with the right next token, label-smoothed "
    "(section 5.4), by cross-entropy: the loss."
)
scored = _output.scored()
_output.loss(scored)
_output.one_step(scored)
_output.sampling(scored)
