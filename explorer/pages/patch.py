"""Lesson step: activation patching. The clean text, a corrupted copy and the answers; predict where the head that
carries the answer sits, then patch the residual stream, every head, and one head's positions, with its map in both
runs."""

from __future__ import annotations

from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header
from attention_explorer.explorer.views.patching import patching_view

page_header()
intro(
    "Turning heads off showed which heads the model needs. Patching asks where the answer travels: run the text and "
    "a corrupted copy with one token changed (below: which one, and the two answers it should swap), then copy one "
    "activation at a time from the clean run into the corrupted one (denoising). Where a copy brings the right answer "
    "back, that activation is enough to carry what the change took away."
)
patching_view("patch", lesson=True)
token_legend()  # the marks its token labels use
page_footer()
