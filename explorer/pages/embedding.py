"""Lesson step: a token's id picks a row of the embedding table; the model scales it and adds the position."""

from __future__ import annotations

from attention_explorer.explorer.lesson.wording import weights_origin
from attention_explorer.explorer.views import forward as forward_view
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
family = sidebar_family()
position = (
    "this model adds no position to it: its layers turn queries and keys by position instead (the next step)"
    if family.block.positions.rotary
    else "the position it adds is the next step's subject"
)
intro(
    "The model cannot read text, only numbers: each token's id picks one row of a table of the model's weights, the "
    f"embedding (d_model numbers per token; {weights_origin(family)}). Below is this token's row, from the model's "
    f"own table, step by step up to the vector that enters layer 1; {position}."
)
focus = forward_view.focus(layer_picker=False)
forward_view.embedding(focus, number=1)
token_legend()  # the marks its token labels use
page_footer()
