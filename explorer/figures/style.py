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


# Presenter mode (a projector at the front of a room): nothing under 16 px, titles 20 px
PRESENT_FONT = {"size": 20, "color": TEXT}
PRESENT_TICK_FONT = {"size": 16, "color": TEXT}


def styled(figure: go.Figure, present: bool = False) -> go.Figure:
    """The figure with the shared hover and text style (changed in place: figures are built fresh for each run); a
    size a figure set itself (a small inset's ticks) is kept, except that `present` raises every text to 16 px or
    more."""
    font, tick_font = (PRESENT_FONT, PRESENT_TICK_FONT) if present else (FONT, TICK_FONT)
    figure.update_layout(hoverlabel=HOVER_LABEL, font=font)

    def at_least(own: dict, default: dict) -> dict:
        merged = {**default, **own}
        if present:
            merged["size"] = max(merged.get("size") or 0, PRESENT_TICK_FONT["size"])
        return merged

    def readable(axis) -> None:
        axis.update(
            tickfont=at_least(axis.tickfont.to_plotly_json(), tick_font),
            title_font=at_least(axis.title.font.to_plotly_json(), font),
            exponentformat=axis.exponentformat or EXPONENTS,
        )

    figure.for_each_xaxis(readable)
    figure.for_each_yaxis(readable)
    for trace in figure.data:  # colour bars too
        if "colorbar" in trace:
            if not trace.colorbar.exponentformat:
                trace.colorbar.exponentformat = EXPONENTS
            if present:
                trace.colorbar.tickfont = at_least(trace.colorbar.tickfont.to_plotly_json(), tick_font)
        if present and "textfont" in trace and trace.textfont.size is not None:
            trace.textfont.size = max(trace.textfont.size, PRESENT_TICK_FONT["size"])
    if present:  # Streamlit's chart theme draws legends at 12 px unless a figure says otherwise
        legend = figure.layout.legend
        legend.font = at_least(legend.font.to_plotly_json(), tick_font)
        legend.title.font = at_least(legend.title.font.to_plotly_json(), tick_font)
        for annotation in figure.layout.annotations:
            annotation.font.size = max(annotation.font.size or 0, PRESENT_TICK_FONT["size"])
        title = figure.layout.title.font
        if title.size is not None:
            title.size = max(title.size, PRESENT_FONT["size"])
    return figure
