"""Read numbers back out of a Plotly figure spec, which Plotly 7 sends as base64 typed arrays."""

from __future__ import annotations

import base64
import json
import re

import numpy as np


def array(value) -> np.ndarray:
    """A plain list or a {"dtype", "bdata", "shape"} typed array, as numpy."""
    if isinstance(value, dict) and "bdata" in value:
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            dims = [int(s) for s in str(shape).split(",")] if isinstance(shape, str) else list(shape)
            data = data.reshape(dims)
        return data
    return np.asarray(value)


def spec(chart) -> dict:
    """The figure dict behind an AppTest plotly_chart element."""
    return json.loads(chart.proto.spec)


def plain(markdown: str) -> str:
    """What a markdown_literal message shows: its backslash escapes undone."""
    return re.sub(r"\\(.)", r"\1", markdown)
