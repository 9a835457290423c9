"""The effect of every head: each head turned off alone, all in batched forwards; sortable, a click opens it."""

from __future__ import annotations

from attention_explorer.explorer.views.current import sidebar_loaded
from attention_explorer.explorer.views.experiments import effects_view, measured
from attention_explorer.explorer.views.frame import intro, page_header

page_header()
intro(
    "Every head turned off alone, one batch row per head in one batched forward: which heads does the model need on "
    f"this sentence? Measured by {measured(sidebar_loaded())}."
)
effects_view()
