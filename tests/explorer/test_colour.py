"""Colour for everyone (issue 42): the categorical palette is Okabe & Ito's, which deuteranopes and protanopes tell
apart; the sequential scale is perceptually uniform; every signed map runs one diverging scale in one direction
(negative blue, positive red); and no figure module writes a colour scale of its own."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from attention_explorer.explorer.app import downloads
from attention_explorer.explorer.figures import forward, head_view, positional, style, training, walkthrough

FIGURES = Path(__file__).resolve().parents[2] / "explorer" / "figures"

# Machado, Oliveira & Fernandes 2009: full deuteranopia and protanopia as 3 x 3 matrices on linear RGB
DEUTERANOPIA = np.array(
    [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.01182, 0.04294, 0.968881]]
)
PROTANOPIA = np.array(
    [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
)
SEEN = 15.0  # CIE76 distance two colours keep under the simulation: plainly different (2.3 is just noticeable)
# the head colours used before: Plotly's and matplotlib's defaults (tab10's first eight)
TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _rgb(colour: str) -> np.ndarray:
    if colour.startswith("rgb"):
        return np.array([float(v) for v in colour[colour.index("(") + 1 : -1].split(",")]) / 255
    colour = colour.lstrip("#")
    return np.array([int(colour[i : i + 2], 16) for i in (0, 2, 4)]) / 255


NORMAL = np.eye(3)


def _lab(colour: str, vision: np.ndarray = NORMAL) -> np.ndarray:
    """CIELAB (D65) of an sRGB colour as seen through `vision` (a matrix on linear RGB)."""
    c = _rgb(colour)
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    linear = np.clip(vision @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest(palette, vision) -> float:
    return min(float(np.linalg.norm(_lab(a, vision) - _lab(b, vision))) for a, b in itertools.combinations(palette, 2))


HEADS_APART = 13.5  # the head palette's nearest two under a simulated deficiency (vermillion, olive): plainly apart
ON_WHITE = 3.0  # WCAG 2.1's contrast for graphics: a line that reads on a white page


def _luminance(colour: str) -> float:
    c = _rgb(colour)
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def contrast_on_white(colour: str) -> float:
    """WCAG 2.1's contrast ratio of a colour against white (1 to 21)."""
    return 1.05 / (_luminance(colour) + 0.05)


@pytest.mark.parametrize("vision", [DEUTERANOPIA, PROTANOPIA], ids=["deuteranopia", "protanopia"])
def test_head_colours_stay_apart_for_colour_blind_readers(vision):
    assert _closest(style.CATEGORICAL, vision) >= HEADS_APART
    assert _closest(TAB10, vision) < 8  # the test can fail: the palette used before that does
    assert _closest(style.CATEGORICAL, NORMAL) >= 30  # and apart for everyone else
    # every figure that colours heads, layers or dimensions draws from it
    assert head_view.PALETTE == training.HEAD_COLOURS == style.CATEGORICAL
    assert downloads.SCREEN.layout.colorway == style.CATEGORICAL
    assert style.styled(go.Figure()).layout.colorway == style.CATEGORICAL


def test_every_head_colour_reads_on_white_and_nine_heads_have_nine_colours():
    assert len(set(style.CATEGORICAL)) == len(style.CATEGORICAL) >= 9  # SmolLM2's nine heads: none alike
    assert min(contrast_on_white(c) for c in style.CATEGORICAL) >= ON_WHITE
    # the palette used before failed both: Okabe & Ito's yellow (1.3) and sky blue (2.3), and its eight colours
    assert contrast_on_white("#F0E442") < ON_WHITE and contrast_on_white("#56B4E9") < ON_WHITE
    # no two of the first nine heads are both light blue, as heads 1, 6 and 9 were (sky blue twice and blue)
    hues = [_lab(c)[1:] for c in style.CATEGORICAL[:9]]
    blue = [i for i, (a, b) in enumerate(hues) if b < -30 and a < 20]
    assert len(blue) <= 1, [style.CATEGORICAL[i] for i in blue]


def test_a_tenth_head_is_told_from_the_first_by_its_dash():
    seen = {(style.head_colour(h), style.head_dash(h)) for h in range(24)}
    n = len(style.CATEGORICAL)
    assert len(seen) == 24 and style.head_colour(n) == style.head_colour(0) and style.head_dash(n) != "solid"


LINES_APART = 50.0  # two reference lines over the same bars: apart in lightness as well as hue, for every reader


def test_the_loss_charts_mean_and_floor_are_not_red_beside_green():
    from attention_explorer.explorer.figures.output import loss_bars

    drawn = loss_bars(["a", "b", "c"], np.array([1.0, 2.0, 0.5]), np.array([0.9, 1.8, 0.4]), 0.3)
    shapes, notes = drawn.layout.shapes, drawn.layout.annotations
    colours = {a.text.split()[0]: s.line.color for s, a in zip(shapes, notes, strict=True)}
    mean, floor = colours["mean"], colours["floor"]
    assert mean == style.REFERENCE and floor in style.CATEGORICAL
    for vision in (DEUTERANOPIA, PROTANOPIA):
        assert np.linalg.norm(_lab(mean, vision) - _lab(floor, vision)) >= LINES_APART
        # the pair drawn before, red beside green, came closer for a red-green colour-blind reader
        assert np.linalg.norm(_lab("#d62728", vision) - _lab(floor, vision)) < LINES_APART


def test_the_sequential_scale_is_perceptually_uniform():
    lightness = [_lab(colour)[0] for _, colour in style.SEQUENTIAL]
    steps = np.diff(lightness)
    assert (steps < 0).all()  # pale at 0 (most of an attention map), darker with the weight
    assert abs(steps).max() / abs(steps).min() < 1.25  # even steps of lightness: Plotly's Blues comes to 2.3
    assert downloads.SCREEN.layout.colorscale.sequential == tuple(tuple(s) for s in style.SEQUENTIAL)


def test_no_figure_writes_a_colour_scale_of_its_own():
    written = re.compile(r"""colorscale["']?\s*[=:]\s*["'\[(]|RdBu|Viridis|Blues|Cividis|qualitative""")
    for path in sorted(FIGURES.glob("*.py")):
        if path.name == "style.py":
            continue
        found = [line for line in path.read_text().splitlines() if written.search(line)]
        assert not found, (path.name, found)


def _ends(trace) -> tuple[np.ndarray, np.ndarray]:
    """(the colour at the scale's low end, at its high end) of a heatmap as drawn."""
    scale = trace.colorscale
    return _rgb(scale[0][1]), _rgb(scale[-1][1])


def test_signed_maps_run_one_diverging_scale_negative_blue_positive_red():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(3, 16)).astype(np.float32)
    table = rng.normal(size=(12, 16))
    drawn = {
        "forward": forward.named_strips(list(rows), ["a", "b", "c"], "t"),
        "walkthrough strip": walkthrough.vector_strip(rows, ["a", "b", "c"], "q"),
        "walkthrough matrices": walkthrough.projection_matrices([rows.T, rows.T, rows.T], ["Q", "K", "V"], "W"),
        "positional": positional.table_heatmap(table, "PE"),
    }
    for name, figure in drawn.items():
        for trace in (t for t in figure.data if t.type == "heatmap"):
            assert trace.colorscale == tuple(tuple(s) for s in style.DIVERGING), name
            assert trace.zmid == 0 and trace.zmin == -trace.zmax, name
            low, high = _ends(trace)
            assert low[2] > low[0] and high[0] > high[2], name  # negative blue, positive red
    assert (style.NEGATIVE, style.POSITIVE) == ("blue", "red")
