"""Activation patching: copy one activation of a clean run into a corrupted run, and see how much of the answer comes
back; the residual stream by position, every head, then one head's positions and its maps in both runs."""

from __future__ import annotations

from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header
from attention_explorer.explorer.views.patching import patching_view

page_header()
intro(
    "Turning a head off says what the model needs; patching says where an answer is carried. Run a clean text and a "
    "corrupted one that differs in one detail, copy one activation of the clean run into the corrupted run, and "
    "measure how much of the right answer comes back."
)
patching_view("patching")
token_legend()  # the marks its token labels use
page_footer()
