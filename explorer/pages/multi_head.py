"""Lesson step: the weighted sum of the values (one head's output), every head concatenated, then W^O."""

from __future__ import annotations

from attention_explorer.explorer.views import qkv as qkv_view
from attention_explorer.explorer.views.current import sidebar_family
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
own = (
    "with its own W^Q and the keys and values of its group's shared W^K, W^V (grouped-query attention)"
    if sidebar_family().block.shared_kv
    else "with its own W^Q, W^K, W^V"
)
intro(
    "Each value is multiplied by its weight and the results are summed: that is the head's output z. Every head "
    f"of the layer does the same {own}, in parallel; their outputs are put side by side and one more matrix, W^O, "
    "mixes them back to d_model numbers per token."
)
focus = qkv_view.focus()
qkv_view.heads(focus, number=1)
qkv_view.download(focus)
page_footer()
