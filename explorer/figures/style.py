"""What every drawn figure shares: a hover box that reads as text on any colour."""

from __future__ import annotations

import plotly.graph_objects as go

# Plotly's default box takes the colour under the pointer (pale grey on pale cells): white with dark text instead
HOVER_LABEL = {"bgcolor": "white", "bordercolor": "#444444", "font": {"color": "#111111", "size": 14}}
# Read from the back of a classroom: Streamlit's chart theme draws 11-12 px labels in light grey. Dark text, 15 px for
# titles and 13 px for ticks (the heatmaps name one token a 16 px line: heatmap.TICK_PX)
TEXT = "#262730"
FONT = {"size": 15, "color": TEXT}
TICK_FONT = {"size": 13, "color": TEXT}
EXPONENTS = "e"  # 2e-05, not Plotly's SI prefixes (20µ, 1p), which read as units to a class


def styled(figure: go.Figure) -> go.Figure:
    """The figure with the shared hover and text style (changed in place: figures are built fresh for each run); a
    size a figure set itself (a small inset's ticks) is kept."""
    figure.update_layout(hoverlabel=HOVER_LABEL, font=FONT)

    def readable(axis) -> None:
        axis.update(
            tickfont={**TICK_FONT, **axis.tickfont.to_plotly_json()},
            title_font={**FONT, **axis.title.font.to_plotly_json()},
            exponentformat=axis.exponentformat or EXPONENTS,
        )

    figure.for_each_xaxis(readable)
    figure.for_each_yaxis(readable)
    for trace in figure.data:  # colour bars too
        if "colorbar" in trace and not trace.colorbar.exponentformat:
            trace.colorbar.exponentformat = EXPONENTS
    return figure
