"""Click targets: Streamlit reports clicks on points of traces that Plotly can select (scatter), not on heatmap
cells, so a clickable grid lays one transparent marker on each cell's centre and carries what the cell names in
`customdata`. The layout's hoverdistance -1 makes a click anywhere pick the nearest centre, i.e. the cell clicked."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

CLICKS = "click targets"  # the overlay's `meta`: downloads leave it out, tests find it by this


def _rows(customdata: Sequence) -> np.ndarray:
    """One row per target as an object array: Plotly checks a nested list element by element (most of a small
    clickable figure's build time), an array once; it is sent as the same nested list."""
    rows = np.empty((len(customdata), len(customdata[0]) if len(customdata) else 0), dtype=object)
    for i, row in enumerate(customdata):
        rows[i] = list(row)
    return rows


def targets(x: Sequence, y: Sequence, customdata: Sequence, hovertemplate: str | None = None) -> go.Scatter:
    """One invisible, selectable marker per cell; with a hovertemplate the markers also carry the cell's hover
    (Plotly shows only the nearest trace's label, and the markers are nearest)."""
    hover = {"hovertemplate": hovertemplate} if hovertemplate else {"hoverinfo": "none"}
    return go.Scatter(
        x=list(x),
        y=list(y),
        customdata=_rows(customdata),
        mode="markers",
        marker={"size": 6, "opacity": 0},
        # a selected cell keeps the same look: no dimming of the others
        selected={"marker": {"opacity": 0}},
        unselected={"marker": {"opacity": 0}},
        showlegend=False,
        meta=CLICKS,
        **hover,
    )


CLICK_LAYOUT = {"hoverdistance": -1}  # merged into a clickable figure's layout


# Rows of a map too large for a marker a cell (a 512 x 512 heatmap would send 262,144). Plotly's hovermode "y" looks
# twice: first for the point nearest the pointer (here: the heatmap cell under it), then again in every trace at
# that point's own row number; a click selects the first point of the second look. One marker a row, on a hidden
# axis shifted ROW_SHIFT rows past the map, is out of reach of the first look (so the label stays the heatmap's
# own: the exact query, key and weight under the pointer) and exactly on the row number in the second (distance 0:
# listed first), so a click anywhere on a row selects that row's marker.
ROW_SHIFT = 2  # in map heights: the markers sit this many heights past the drawn rows, far beyond hoverdistance


def row_targets(customdata: Sequence) -> tuple[go.Scatter, dict]:
    """One invisible, selectable marker per row of a heatmap (customdata per row, top row first) and the layout
    that makes a click anywhere on a row select its marker."""
    n = len(customdata)
    shift = ROW_SHIFT * n
    # its own hidden axes: the map's ranges are not padded for markers it never shows; no label of its own (the
    # heatmap's is the one shown)
    scatter = targets([0] * n, range(n), customdata).update(xaxis="x2", yaxis="y2")
    layout = {
        "hovermode": "y",
        "hoverdistance": 20,  # finite (Plotly's default): -1 would let the first look reach the markers
        # reversed like the map's rows; the map's row i is at i + shift on this axis
        "yaxis2": {"overlaying": "y", "range": [shift + n - 0.5, shift - 0.5], "visible": False, "fixedrange": True},
        "xaxis2": {"overlaying": "x", "range": [-1, 1], "visible": False, "fixedrange": True},
    }
    return scatter, layout
