"""The head picker whose chips wear the heads' own colours (explorer/figures/style.py), as the lines draw them: a
solid chip in the head's colour for the first nine heads; past nine, where the colours come round again with a dash,
a white chip with a dashed (dotted, ...) border and text in that colour. Streamlit draws a multiselect's chips in its
own red; a style sheet keyed by the widget's key (Streamlit's `st-key-<key>` class) colours chip n (its
data-tag-index) as the n-th chosen head. Nothing in the sheet comes from a visitor: the key is the page's own and the
heads are numbers."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import streamlit as st

from attention_explorer.explorer.figures import style

# the n-th chip (from 0) as Streamlit's multiselect draws it: <span data-tag data-tag-index="n">
CHIP = '[data-tag][data-tag-index="{n}"]'
# Plotly's dash names as CSS border styles: a dashed line, a dashed chip
BORDERS = {"solid": "solid", "dash": "dashed", "dot": "dotted", "dashdot": "dashed"}
WIDGET_KEY = re.compile(r"[a-z][a-z0-9_]*")


def _luminance(colour: str) -> float:
    """WCAG 2's relative luminance of '#RRGGBB'."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: str, other: str) -> float:
    """WCAG 2's contrast ratio of two '#RRGGBB' colours (1 to 21)."""
    light, dark = sorted((_luminance(one), _luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def chip_colours(head: int) -> tuple[str, str, str]:
    """(background, text, border style) of head `head`'s chip (from 0): white or near-black text, whichever reads
    better on the head's colour; past nine heads a white chip with the head's dash as its border."""
    colour, dash = style.head_colour(head), style.head_dash(head)
    if dash != "solid":
        return "#FFFFFF", colour, BORDERS[dash]
    text = max(("#FFFFFF", style.TEXT), key=lambda t: contrast(colour, t))
    return colour, text, "solid"


def chip_css(key: str, heads: Sequence[int]) -> str:
    """A style sheet colouring the chips of the multiselect keyed `key`: its n-th chip as `heads`[n] (from 0)."""
    assert WIDGET_KEY.fullmatch(key), key  # a page's own key, never a visitor's text
    rules = []
    for n, head in enumerate(heads):
        background, text, border = chip_colours(int(head))
        chip = f".st-key-{key} {CHIP.format(n=n)}"
        rules.append(
            f"{chip} {{ background-color: {background} !important; color: {text} !important; "
            f"border: 2px {border} {style.head_colour(int(head))} !important; }}\n"
            f"{chip} span, {chip} button {{ color: {text} !important; }}"
        )
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def pick_heads(n_heads: int, key: str, label: Callable[[int], str], title: str = "Heads") -> list[int]:
    """A multiselect of heads 0..n_heads-1 (kept in session state under `key`), its chips in the heads' colours."""
    heads = st.multiselect(title, list(range(n_heads)), format_func=label, key=key)
    st.html(chip_css(key, heads))  # numbers and style's colours only (chip_css asserts its key is the page's)
    return heads
