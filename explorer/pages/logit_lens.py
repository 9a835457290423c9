"""The logit lens: every layer's and sub-layer's state read through the final norm and the output matrix."""

from __future__ import annotations

from attention_explorer.explorer.pages._readouts import lens_view
from attention_explorer.explorer.pages._shared import page_header

page_header()
lens_view()
