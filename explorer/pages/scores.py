"""Lesson step: score the query against every key, scale by sqrt(d_k), mask, softmax (eq. 1)."""

from __future__ import annotations

from attention_explorer.explorer.pages import _qkv
from attention_explorer.explorer.pages._shared import intro, page_footer, page_header, token_legend

page_header()
intro(
    "The query is compared with every key by a dot product: a large score means the key holds what the query "
    "looks for. The scores are divided by sqrt(d_k), hidden positions are masked, and a softmax turns them into "
    "weights that sum to 1. Same head and query token as the step before."
)
focus = _qkv.focus()
_qkv.scores(focus, number=1, ask=True)
token_legend()  # the marks its token labels use
page_footer()
