"""Lesson step: the label-smoothed cross-entropy against the right answer, and its floor (section 5.4)."""

from __future__ import annotations

import streamlit as st

from explorer.pages import _output
from explorer.pages._shared import page_footer, page_header

page_header()
st.markdown(
    "Training needs one number that says how wrong the model is: the cross-entropy between its probabilities and "
    "the right next word, at every position (teacher forcing: each position reads the right words before it). "
    "The paper smooths the target (label smoothing, eps = 0.1), so even a perfect model keeps a small loss."
)
scored = _output.scored()
_output.wrong_answer(scored)
_output.loss(scored, number=1)
page_footer()
