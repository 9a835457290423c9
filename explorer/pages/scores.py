"""Lesson step: score the query against every key, scale by sqrt(d_k), mask, softmax (eq. 1)."""

from __future__ import annotations

from attention_explorer.explorer.views import qkv as qkv_view
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
intro(
    "The query is compared with every key by a dot product: a large score means the key holds what the query "
    "looks for. The scores are divided by sqrt(d_k), hidden positions are masked, and a softmax turns them into "
    "weights that sum to 1. Same head and query token as the step before."
)
focus = qkv_view.focus()
qkv_view.scores(focus, number=1, ask=True)
token_legend()  # the marks its token labels use
page_footer()
