"""Lesson step: the cross-entropy (label-smoothed, section 5.4, where the model trains so) against the right answer,
and its floor."""

from __future__ import annotations

import streamlit as st

from explorer import cached, output, state
from explorer.pages import _output
from explorer.pages._shared import intro, page_footer, page_header

page_header()
smoothing = (
    "The paper smooths the target (label smoothing, eps = 0.1), so even a perfect model keeps a small loss."
    if output.epsilon_for(cached.model(st.session_state[state.MODEL])) > 0
    else "This model trains without label smoothing (the paper's eps = 0.1), so a perfect prediction scores 0."
)
intro(
    "Training needs one number that says how wrong the model is: the cross-entropy between its probabilities and "
    "the right next word, at every position (teacher forcing: each position reads the right words before it). "
    + smoothing
)
scored = _output.scored(box="later")  # the loss and its figure first, the box to type another target under them
_output.loss(scored, number=1)
_output.wrong_answer(scored)  # under the figure: its question starts from the mean loss drawn there
if scored.loaded.family.has_source:  # a decoder-only model's target is its own text
    _output.target_box()
page_footer()
