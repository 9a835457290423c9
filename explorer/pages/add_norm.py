"""Lesson step: one layer's sub-layers for the focus token, each wrapped in a residual connection and LayerNorm."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import add_norm_intro
from attention_explorer.explorer.views import forward as forward_view
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
intro(add_norm_intro(sidebar_family().block))  # true for this model's block (models.anatomy)
focus = forward_view.focus()
forward_view.layer(focus, number=1)
forward_view.movement(focus, number=2)
token_legend()  # the marks its token labels use
page_footer()
