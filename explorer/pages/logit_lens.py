"""The logit lens: every layer's and sub-layer's state read through the final norm and the output matrix."""

from __future__ import annotations

from attention_explorer.explorer.views.frame import page_header
from attention_explorer.explorer.views.readouts import lens_view

page_header()
lens_view()
