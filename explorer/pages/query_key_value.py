"""Lesson step: query, key and value for one head: the retrieval analogy, W^Q, W^K, W^V and their products."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import qkv_intro
from attention_explorer.explorer.lesson.wording import weights_origin
from attention_explorer.explorer.views import qkv as qkv_view
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
intro(qkv_intro(sidebar_family().block, weights_origin(sidebar_family())))  # true for this block
focus = qkv_view.focus()  # past 32 keys, a picker chooses the K and V rows drawn
qkv_view.projections(focus, matrices=True)
token_legend()  # the marks its token labels use
page_footer()
