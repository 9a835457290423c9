"""The head picker's chips as a browser paints them (issue 50: they were Streamlit's red): each chosen head's chip
in its own colour from explorer/figures/style.py, and past nine heads a white chip with the head's dashed border."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import state
from attention_explorer.explorer.figures import style
from attention_explorer.explorer.views import head_chips
from bench import harness
from tests.e2e.conftest import screenshot

pytestmark = pytest.mark.slow

# each chip's label, background, border style and border colour as painted
CHIPS = f"""() => [...document.querySelectorAll('.st-key-{state.HEAD_HEADS} [data-tag]')].map(t => {{
    const s = getComputedStyle(t);
    return [t.getAttribute('aria-label'), s.backgroundColor, s.borderTopStyle, s.borderTopColor];
}})"""


def rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))


def painted(heads: list[int]) -> list[list[str]]:
    """What CHIPS reads for these heads chosen in this order."""
    out = []
    for head in heads:
        background, _, border = head_chips.chip_colours(head)
        out.append([f"head {head + 1}", rgb(background), border, rgb(style.head_colour(head))])
    return out


def test_each_chip_is_painted_in_its_heads_colour(server, browser):
    page = harness.new_page(browser, 1600, 900)
    try:
        harness.open_app(page, f"{server}/head_view?model=minilm")
        picker = page.locator(f".st-key-{state.HEAD_HEADS}")
        chosen = [int(page.evaluate(CHIPS)[0][0].split()[1]) - 1]  # the sentence's starting head
        for head in (5, 9):  # head 6 (olive) and head 10 (head 1's blue, dashed)
            if head in chosen:
                continue
            picker.locator("input").click()
            page.get_by_role("option", name=f"head {head + 1}", exact=True).click()
            page.keyboard.press("Escape")
            chosen.append(head)
            # the chip appears at once; its colour comes with the run the choice starts: wait for the paint
            page.wait_for_function(f"want => JSON.stringify(({CHIPS})()) === JSON.stringify(want)", arg=painted(chosen))
        assert page.evaluate(CHIPS) == painted(chosen)
        assert all(chip[1] != "rgb(255, 75, 75)" for chip in page.evaluate(CHIPS))  # not Streamlit's red
        screenshot(page, "head_chips")
    finally:
        page.context.close()
