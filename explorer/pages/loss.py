"""Lesson step: the cross-entropy (label-smoothed, section 5.4, where the model trains so) against the right answer,
and its floor."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.pages import _output
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, token_legend

page_header()
loaded = cached.model(st.session_state[state.MODEL])
intro(model_words.loss_intro(*_output.recipe_of(loaded), scored=loaded.family.next_token_head, family=loaded.family))
scored = _output.scored(box="later")  # the loss and its figure first, the box to type another target under them
_output.loss(scored, number=1)
_output.wrong_answer(scored)  # under the figure: its question starts from the mean loss drawn there
if scored.loaded.family.has_source:  # a decoder-only model's target is its own text
    _output.target_box()
token_legend()  # the marks its token labels use
page_footer()
