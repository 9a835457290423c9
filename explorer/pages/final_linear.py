"""Lesson step: the decoder's last vector -> final linear layer -> one logit per word -> softmax; temperature and
sampling."""

from __future__ import annotations

from attention_explorer.explorer.pages import _output
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, token_legend

page_header()
intro(
    "The decoder's last vector at each position is multiplied by one more matrix: one score (logit) per word of "
    "the output vocabulary. A softmax turns the logits into probabilities. Greedy decoding takes the most probable "
    "word, and dividing the logits by a temperature never changes which word that is; sampling draws a word by its "
    "probability instead, and there the temperature (which flattens or sharpens the probabilities), top-k or top-p "
    "can write other outputs."
)
scored = _output.scored(box="none")  # the loss step scores typed targets
number = _output.next_after_text(scored, number=1)  # a decoder-only text: what comes after it
_output.one_position(scored, number=number)
_output.sampling(scored, number=number + 1)
token_legend()  # the marks its token labels use
page_footer()
