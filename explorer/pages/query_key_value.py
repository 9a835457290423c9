"""Lesson step: query, key and value for one head: the retrieval analogy, W^Q, W^K, W^V and their products."""

from __future__ import annotations

from attention_explorer.explorer.lesson.wording import weights_origin
from attention_explorer.explorer.views import qkv as qkv_view
from attention_explorer.explorer.views.current import sidebar_family, token_legend
from attention_explorer.explorer.views.frame import intro, page_footer, page_header

page_header()
intro(
    "Attention works like a soft look-up. Each token asks a **query** (what am I looking for?), offers a **key** "
    "(what do I contain?) and carries a **value** (what I pass on if chosen). All three are the token's vector "
    "multiplied by a matrix of the model's weights, one set per head "
    f"({weights_origin(sidebar_family())}). The next step scores every key against the query; this "
    "one makes q, k and v."
)
focus = qkv_view.focus()  # past 32 keys, a picker chooses the K and V rows drawn
qkv_view.projections(focus, matrices=True)
token_legend()  # the marks its token labels use
page_footer()
