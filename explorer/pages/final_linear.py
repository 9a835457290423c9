"""Lesson step: the decoder's last vector (through the final norm of a pre-norm stack) -> final linear layer -> one
logit per word -> softmax; temperature and sampling."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import final_linear_intro
from attention_explorer.explorer.pages import _output
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, sidebar_loaded, token_legend

page_header()
intro(final_linear_intro(sidebar_loaded().family))
scored = _output.scored(box="none")  # the loss step scores typed targets
_output.one_position(scored, number=1)  # a decoder-only text opens on its end: what the model answers after it
_output.sampling(scored, number=2)
token_legend()  # the marks its token labels use
page_footer()
