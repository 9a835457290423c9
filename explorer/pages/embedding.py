"""Lesson step: a token's id picks a row of the embedding table; the model scales it and adds the position."""

from __future__ import annotations

from attention_explorer.explorer.lesson.wording import weights_origin
from attention_explorer.explorer.pages import _forward
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, sidebar_family, token_legend

page_header()
family = sidebar_family()
position = (
    "this model adds no position to it: its layers turn queries and keys by position instead (the next step)"
    if family.positional == "rotary"
    else "the position it adds is the next step's subject"
)
intro(
    "The model cannot read text, only numbers: each token's id picks one row of a table of the model's weights, the "
    f"embedding (d_model numbers per token; {weights_origin(family)}). Below is this token's row, from the model's "
    f"own table, step by step up to the vector that enters layer 1; {position}."
)
focus = _forward.focus(layer_picker=False)
_forward.embedding(focus, number=1)
token_legend()  # the marks its token labels use
page_footer()
