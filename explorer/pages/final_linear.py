"""Lesson step: the decoder's last vector (through the final norm of a pre-norm stack) -> final linear layer -> one
logit per word -> softmax; temperature and sampling."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import final_linear_intro
from attention_explorer.explorer.views import output as output_view
from attention_explorer.explorer.views.current import sidebar_loaded, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
intro(final_linear_intro(sidebar_loaded().family))
scored = output_view.scored(box="none")  # the loss step scores typed targets
output_view.one_position(scored, number=1)  # a decoder-only text opens on its end: what the model answers after it
output_view.sampling(scored, number=2)
token_legend()  # the marks its token labels use
page_footer()
