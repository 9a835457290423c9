"""Direct logit attribution: one output logit split into the embedding, each head and each feed-forward."""

from __future__ import annotations

from explorer.pages._readouts import attribution_view
from explorer.pages._shared import intro, page_header

page_header()
intro(
    "Which part of the model wrote the output? The last state is a sum of what the embedding, every head (through "
    "its own slice of W^O) and every feed-forward added to the residual stream; read through the output matrix, "
    "with the LayerNorm's scale frozen at this run's value, the logit of a token splits into one share per part."
)
attribution_view()
