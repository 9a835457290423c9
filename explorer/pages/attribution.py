"""Direct logit attribution: one output logit split into the embedding, each head and each feed-forward."""

from __future__ import annotations

from attention_explorer.explorer.lesson.model_words import attribution_intro
from attention_explorer.explorer.pages._readouts import attribution_view
from attention_explorer.explorer.pages._shared import intro, page_header, sidebar_family

page_header()
intro(attribution_intro(sidebar_family()))
attribution_view()
