"""What every drawn figure shares: a hover box that reads as text on any colour, and the colours themselves, chosen
once for everyone, colour-blind readers included: a categorical palette for heads and layers, a sequential scale for
weights and a diverging one for signed values. No figure writes a colour scale of its own."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import cmocean as plotly_cmocean
from plotly.colors import diverging as plotly_diverging

# Plotly's default box takes the colour under the pointer (pale grey on pale cells): white with dark text instead
HOVER_LABEL = {"bgcolor": "white", "bordercolor": "#444444", "font": {"color": "#111111", "size": 14}}
# Read from the back of a classroom: Streamlit's chart theme draws 11-12 px labels in light grey. Dark text, 15 px for
# titles and 13 px for ticks (the heatmaps name one token a 16 px line: heatmap.TICK_PX)
TEXT = "#262730"
FONT = {"size": 15, "color": TEXT}
TICK_FONT = {"size": 13, "color": TEXT}
EXPONENTS = "e"  # 2e-05, not Plotly's SI prefixes (20µ, 1p), which read as units to a class


# Categorical (heads, layers, dimensions): nine colours, each dark enough to read as a line on white (WCAG contrast
# 3:1 or more; Okabe & Ito's yellow and sky blue, used before, came to 1.3 and 2.3, and head 8's yellow vanished) and
# apart for readers with any common colour-vision deficiency (CIE76 distance 13.5 or more between any two under
# simulated deuteranopia and protanopia, Machado et al. 2009; matplotlib's tab10 comes within 5-7): Okabe & Ito's
# blue, vermillion, green, reddish purple and black, then olive, violet, brown and wine. Nine, so that a nine-head
# model (SmolLM2) has no two heads alike and no two blues; past nine they come round again with another dash.
HEADS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#999933", "#785EF0", "#8C564B", "#882255")
CATEGORICAL = HEADS
# past nine heads the colours come round again with another dash: head 10 is head 1's blue, dashed
DASHES = ("solid", "dash", "dot", "dashdot")
# a reference line drawn over coloured bars (the loss chart's mean beside its floor in HEADS' green): black, which no
# colour-vision deficiency confuses with green, as it did the red used before
REFERENCE = "#000000"


def head_colour(index: int) -> str:
    """The colour of head (or layer, or dimension) `index`, counted from 0."""
    return CATEGORICAL[index % len(CATEGORICAL)]


def head_dash(index: int) -> str:
    """The dash that tells head `index` from the head nine before it, which has its colour."""
    return DASHES[(index // len(CATEGORICAL)) % len(DASHES)]


def _scale(colours) -> list[list]:
    return [[i / (len(colours) - 1), c] for i, c in enumerate(colours)]


# Sequential (attention weights, probabilities, scores from low to high): cmocean's "dense" (Thyng et al. 2016,
# Oceanography 29(3)), perceptually uniform (lightness falls in even steps from one end to the other, so it reads the
# same under any colour-vision deficiency and in greyscale); its light end, a near-white, is 0, most of an attention
# map (a masked triangle reads as empty, not as a loud colour), and the weight a head puts somewhere stands out dark
SEQUENTIAL = _scale(plotly_cmocean.dense)
# the same scale for points on white (a scatter's colour is a value): without its near-white end, which would vanish
POINTS = _scale(plotly_cmocean.dense[2:])
# Diverging (signed values centred on 0): ColorBrewer's RdBu (Brewer 2003, marked colour-blind safe), one direction
# everywhere: negative blue, positive red (the colour bar's ticks say which)
DIVERGING = _scale(plotly_diverging.RdBu[::-1])
NEGATIVE, POSITIVE = "blue", "red"  # as a sentence names DIVERGING's ends


# What a local layer's window hides (keys more than w back): a mid grey, unlike the causal mask's near-white 0s, and
# a dashed edge where the window starts
OUTSIDE_WINDOW = "#9e9e9e"
# one flat grey: the cells a local layer's window hides, drawn over the weights
OUTSIDE_WINDOW_SCALE = [[0, OUTSIDE_WINDOW], [1, OUTSIDE_WINDOW]]
WINDOW_EDGE = {"color": "#D55E00", "width": 2, "dash": "dash"}


def sequential(zmin: float | None = 0.0, zmax: float | None = 1.0) -> dict:
    """A heatmap's colour settings for values from zmin to zmax (None: the data's own), on SEQUENTIAL."""
    return {"colorscale": SEQUENTIAL, "zmin": zmin, "zmax": zmax}


def diverging(limit: float) -> dict:
    """A heatmap's colour settings for signed values, centred on 0 from -limit to limit, on DIVERGING: negative
    blue, positive red."""
    return {"colorscale": DIVERGING, "zmid": 0, "zmin": -limit, "zmax": limit}


# Presenter mode (a projector at the front of a room): nothing under 16 px, titles 20 px
PRESENT_FONT = {"size": 20, "color": TEXT}
PRESENT_TICK_FONT = {"size": 16, "color": TEXT}


def styled(figure: go.Figure, present: bool = False) -> go.Figure:
    """The figure with the shared hover and text style (changed in place: figures are built fresh for each run); a
    size a figure set itself (a small inset's ticks) is kept, except that `present` raises every text to 16 px or
    more."""
    font, tick_font = (PRESENT_FONT, PRESENT_TICK_FONT) if present else (FONT, TICK_FONT)
    # the colour-blind-safe colours where a figure gives none: over Streamlit's theme on screen, and in every download
    figure.update_layout(hoverlabel=HOVER_LABEL, font=font, colorway=list(CATEGORICAL))

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
        elif present and trace.type == "bar" and trace.text is not None:  # a bar's own number, 16 px too
            trace.textfont.size = PRESENT_TICK_FONT["size"]
    if present:
        # Plotly shrinks a bar's number to fit inside it ("0.816" at 9 px): never below 16 px, shown whole
        figure.update_layout(uniformtext={"minsize": PRESENT_TICK_FONT["size"], "mode": "show"})
        # Streamlit's chart theme draws legends at 12 px unless a figure says otherwise
        legend = figure.layout.legend
        legend.font = at_least(legend.font.to_plotly_json(), tick_font)
        legend.title.font = at_least(legend.title.font.to_plotly_json(), tick_font)
        for annotation in figure.layout.annotations:
            annotation.font.size = max(annotation.font.size or 0, PRESENT_TICK_FONT["size"])
        title = figure.layout.title.font
        if title.size is not None:
            title.size = max(title.size, PRESENT_FONT["size"])
    return figure
