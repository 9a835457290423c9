"""The head view's colours through app.py: each chosen head's chip in the picker wears the head's own colour and
dash (Streamlit draws them in its own red unless the page's style sheet says otherwise), as the lines draw them, and
every chosen head has its legend entry. tests/e2e/test_head_chips.py reads the colours a browser paints."""

from __future__ import annotations

import re

import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures import style
from attention_explorer.explorer.views import head_chips
from tests.app import new_app
from tests.figdata import spec

CHOSEN = [0, 5, 8, 9]  # head 10 is head 1's colour, dashed


def chip_rules(at) -> dict[int, str]:
    """Chip index -> its style rule, from the style sheets the page sent."""
    sheets = " ".join(h.proto.body for h in at.get("html"))
    rule = re.compile(r"\.st-key-" + state.HEAD_HEADS + r' \[data-tag\]\[data-tag-index="(\d+)"\] \{([^}]*)\}')
    return {int(n): body for n, body in rule.findall(sheets)}


def test_each_chosen_heads_chip_and_line_wear_its_colour(minilm):
    at = new_app("head_view")
    at.query_params["model"] = "minilm"
    at.run()
    at.multiselect(key=state.HEAD_HEADS).set_value(CHOSEN).run()
    assert not at.exception
    rules = chip_rules(at)
    assert sorted(rules) == list(range(len(CHOSEN)))  # one rule per chip, none for a head not chosen
    for n, head in enumerate(CHOSEN):
        colour, dash = style.head_colour(head), style.head_dash(head)
        filled = "#FFFFFF" if dash != "solid" else colour
        assert f"background-color: {filled} !important" in rules[n]
        assert f"border: 2px {head_chips.BORDERS[dash]} {colour} !important" in rules[n]
    assert len({style.head_colour(h) for h in CHOSEN[:3]}) == 3 and "dashed" in rules[3]
    # the figure's legend names each chosen head once, in the same colour and dash
    charts = {c.key: spec(c) for c in at.get("plotly_chart")}
    legend = [t for t in charts["head_lines"]["data"] if t.get("showlegend", True) and t.get("name")]
    drawn = [(t["name"], t["line"]["color"], t["line"]["dash"]) for t in legend]
    assert drawn == [(f"head {h + 1}", style.head_colour(h), style.head_dash(h)) for h in CHOSEN]


def test_a_chips_text_reads_on_its_colour_and_the_sheet_takes_no_visitors_text():
    for head in range(2 * len(style.HEADS)):
        background, text, _ = head_chips.chip_colours(head)
        assert head_chips.contrast(background, text) >= 3.0, head  # WCAG's bound for large and bold text
    sheet = head_chips.chip_css(state.HEAD_HEADS, [3, 12])
    assert "<" not in sheet.removeprefix("<style>").removesuffix("</style>")
    with pytest.raises(AssertionError):  # a key that is not a page's own never goes into the style sheet
        head_chips.chip_css("x} body { display: none", [0])
