"""Read numbers back out of a Plotly figure spec, which Plotly 7 sends as base64 typed arrays."""

from __future__ import annotations

import json
import re

from bench.harness import figure_array as array  # noqa: F401 -- one decoder for tests and benchmarks


def spec(chart) -> dict:
    """The figure dict behind an AppTest plotly_chart element."""
    return json.loads(chart.proto.spec)


def plain(markdown: str) -> str:
    """What a markdown_literal message shows: its backslash escapes undone."""
    return re.sub(r"\\(.)", r"\1", markdown)
