"""The head view's colours through app.py: the chosen heads' key under the picker (whose chips Streamlit draws in its
own red) shows each head's colour and dash as the lines draw them, and every chosen head has its legend entry."""

from __future__ import annotations

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures import style
from tests.app import new_app
from tests.figdata import spec


def test_the_chosen_heads_are_keyed_in_their_own_colours(minilm):
    at = new_app("head_view")
    at.query_params["model"] = "minilm"
    at.run()
    at.multiselect(key=state.HEAD_HEADS).set_value([0, 5, 8, 9]).run()
    assert not at.exception
    charts = {c.key: spec(c) for c in at.get("plotly_chart")}
    lines = [t for t in charts["head_swatches"]["data"] if t["mode"] == "lines"]
    drawn = [(t["name"], t["line"]["color"], t["line"]["dash"]) for t in lines]
    assert drawn == [(f"head {h + 1}", style.head_colour(h), style.head_dash(h)) for h in (0, 5, 8, 9)]
    # heads 1, 6 and 9 in three colours (they were blue, sky blue and blue); head 10 is head 1's colour, dashed
    assert len({style.head_colour(h) for h in (0, 5, 8)}) == 3 and drawn[3][2] != "solid"
    # the figure's legend names each chosen head once, in the same colour and dash
    legend = [t for t in charts["head_lines"]["data"] if t.get("showlegend", True) and t.get("name")]
    assert [(t["name"], t["line"]["color"], t["line"]["dash"]) for t in legend] == drawn
