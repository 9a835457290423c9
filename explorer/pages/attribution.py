"""Direct logit attribution: one output logit split into the embedding, each head and each feed-forward."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import attribution_intro
from attention_explorer.explorer.views.current import sidebar_family
from attention_explorer.explorer.views.frame import intro, page_header
from attention_explorer.explorer.views.readouts import attribution_view

page_header()
intro(attribution_intro(sidebar_family()))
attribution_view()
