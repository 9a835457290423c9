"""Lesson step: the label-smoothed cross-entropy against the right answer, and its floor (section 5.4)."""

from __future__ import annotations

from explorer.pages import _output
from explorer.pages._shared import intro, page_footer, page_header

page_header()
intro(
    "Training needs one number that says how wrong the model is: the cross-entropy between its probabilities and "
    "the right next word, at every position (teacher forcing: each position reads the right words before it). "
    "The paper smooths the target (label smoothing, eps = 0.1), so even a perfect model keeps a small loss."
)
scored = _output.scored(box="later")  # the loss and its figure first, the box to type another target under them
_output.wrong_answer(scored)
_output.loss(scored, number=1)
if scored.loaded.family.has_source:  # a decoder-only model's target is its own text
    _output.target_box()
page_footer()
