"""What every drawn figure shares: a hover box that reads as text on any colour."""

from __future__ import annotations

import plotly.graph_objects as go

# Plotly's default box takes the colour under the pointer (pale grey on pale cells): white with dark text instead
HOVER_LABEL = {"bgcolor": "white", "bordercolor": "#444444", "font": {"color": "#111111", "size": 13}}


def styled(figure: go.Figure) -> go.Figure:
    """The figure with the shared hover style (changed in place: figures are built fresh for each run)."""
    return figure.update_layout(hoverlabel=HOVER_LABEL)
