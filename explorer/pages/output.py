"""Output and loss on one page: final linear -> logits -> softmax per decoder position, sampling, and the loss."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.run import output
from attention_explorer.explorer.views import output as output_view
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import page_header

page_header("Output and loss")
loaded = cached.model(st.session_state[state.MODEL])
epsilon = output.epsilon_for(loaded)
st.markdown(
    "The decoder's last state for each position goes through the final linear layer (one logit per word of the "
    "vocabulary) and a softmax. Training compares that distribution with the right next token, "
    + model_words.training_target(epsilon, loaded.family)
    + "."
)
scored = output_view.scored()
output_view.loss(scored)
output_view.one_position(scored)
output_view.sampling(scored)
token_legend()  # the marks its token labels use
