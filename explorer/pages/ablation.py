"""Turn heads off: pick heads (click the grid), zero, mean or resample ablation; the run with them off beside the clean
one."""

from __future__ import annotations

from attention_explorer.explorer.views.current import sidebar_loaded
from attention_explorer.explorer.views.experiments import ablation_view, measured
from attention_explorer.explorer.views.frame import intro, page_header

page_header()
intro(
    "What a head does is a causal question: what changes when it is turned off. Here the model runs again with the "
    "heads you pick replaced just before W^O, by zero, by their average output over a sample of texts the model "
    "reads, or by their output on another text of that sample; everything else is the model's own forward. Measured "
    f"by {measured(sidebar_loaded())}."
)
ablation_view()
