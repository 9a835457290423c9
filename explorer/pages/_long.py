"""Long computations ask first: a page opens with everything cheap drawn, and a computation estimated past
cost.ASK_AFTER_SECONDS (another full run of a long text, every head turned off) waits for a click, said plainly with
about how long it takes at this length. Shorter ones start at once, as they always have."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.run import cost


def ask_first(what: str, seconds: float, label: str, key: str, container=None) -> bool:
    """Whether the work may run in this rerun: at once when estimated under the threshold, or when its button was
    just pressed; otherwise `what` it is and its estimate are said, beside the button (keyed `key`)."""
    if not cost.asks_first(seconds):
        return True
    place = container if container is not None else st.container()
    place.info(
        f"{what} At this length that takes {cost.about(seconds)} (an estimate from the number of tokens and the "
        "model's size; a busy server takes longer), so it starts only when you ask.",
        icon=":material/hourglass_top:",
    )
    return place.button(label, key=key, icon=":material/play_arrow:")
