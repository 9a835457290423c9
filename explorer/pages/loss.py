"""Lesson step: the cross-entropy (label-smoothed, section 5.4, where the model trains so) against the right answer,
and its floor."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.views import output as output_view
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
loaded = cached.model(st.session_state[state.MODEL])
intro(
    model_words.loss_intro(*output_view.recipe_of(loaded), scored=loaded.family.next_token_head, family=loaded.family)
)
scored = output_view.scored(box="later")  # the loss and its figure first, the box to type another target under them
output_view.loss(scored, number=1)
output_view.wrong_answer(scored)  # under the figure: its question starts from the mean loss drawn there
if scored.loaded.family.has_source:  # a decoder-only model's target is its own text
    output_view.target_box()
token_legend()  # the marks its token labels use
page_footer()
