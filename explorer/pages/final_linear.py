"""Lesson step: the decoder's last vector (through the final norm of a pre-norm stack) -> final linear layer -> one
logit per word -> softmax; temperature and sampling."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import final_linear_intro
from attention_explorer.explorer.pages import _output
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, sidebar_loaded

page_header()
intro(final_linear_intro(sidebar_loaded().family))
scored = _output.scored(box="none")  # the loss step scores typed targets
number = _output.next_after_text(scored, number=1)  # a decoder-only text: what comes after it
_output.one_position(scored, number=number)
_output.sampling(scored, number=number + 1)
page_footer()
