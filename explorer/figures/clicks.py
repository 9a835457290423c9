"""Click targets: Streamlit reports clicks on points of traces that Plotly can select (scatter), not on heatmap
cells, so a clickable grid lays one transparent marker on each cell's centre and carries what the cell names in
`customdata`. The layout's hoverdistance -1 makes a click anywhere pick the nearest centre, i.e. the cell clicked."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

CLICKS = "click targets"  # the overlay's `meta`: downloads leave it out, tests find it by this


def targets(x: Sequence, y: Sequence, customdata: Sequence, hovertemplate: str | None = None) -> go.Scatter:
    """One invisible, selectable marker per cell; with a hovertemplate the markers also carry the cell's hover
    (Plotly shows only the nearest trace's label, and the markers are nearest)."""
    hover = {"hovertemplate": hovertemplate} if hovertemplate else {"hoverinfo": "none"}
    return go.Scatter(
        x=list(x),
        y=list(y),
        customdata=[list(c) for c in customdata],
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
