"""A page's frame: its title with the lesson's Previous / Next and then-and-now line, its introduction, its footer,
presenter mode, and predict-then-reveal."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson import then_and_now


def presenting() -> bool:
    """Presenter mode: large text for a projector (the sidebar's toggle, or ?present=1)."""
    return bool(st.session_state.get(state.PRESENT))


def this_page() -> navigation.Page | None:
    """The lesson table's entry for the page drawn on this run (the Overview is the root address)."""
    return navigation.BY_STEM.get(st.session_state.get(state.PAGE) or navigation.OVERVIEW.stem)


def _step_links(page: navigation.Page, left, right) -> None:
    """Previous and Next along the lesson path (the Overview's Next is Start), in two given containers."""
    before, after = navigation.neighbours(page.stem)
    if before is not None:
        short = "Overview" if before.step == 0 else f"step {before.step}"
        label = f"Previous: {short}" if presenting() else f"Previous: {before.label}"
        left.page_link(before.script, label=label, icon=":material/arrow_back:", help=before.label)
    if after is not None:
        word = "Start" if page.step == 0 else "Next"
        # beside the title in presenter mode: the step's number only, its title in the tooltip
        label = f"{word}: step {after.step}" if presenting() else f"{word}: {after.label}"
        right.page_link(after.script, label=label, icon=":material/arrow_forward:", help=after.label)


def page_header(title: str | None = None) -> None:
    """The page's title; a lesson step says "Step i of N: <title>" with Previous / Next above it (page_footer
    repeats them at the bottom), or, in presenter mode, beside it on one line. `title`: an Explore page's own."""
    page = this_page()
    if page is None or page.step is None:
        st.header(title or (page.title if page else ""))
        return
    heading = f"Step {page.step} of {navigation.N_STEPS}: {page.title}" if page.step else page.title
    # the links, the title and its line close together, without the page's gap between them: the step's figure
    # still fits on a 900 px screen under them
    box = st.container(gap=None)
    if presenting():  # one line: the figure has the rest of the screen
        left, middle, right = box.columns([1, 3, 1], vertical_alignment="center")
        _step_links(page, left, right)
        middle.header(heading)
    else:
        _step_links(page, *box.columns(2))
        box.header(heading)
    thread = then_and_now_line()
    if thread:  # the lesson's thread, in view on every step before anything is opened
        box.caption(markdown_literal(thread))
    if presenting() and page.stem != "tokens":  # the sidebar is folded: the class sees the sentence here (step 1
        # shows it whole)
        box.markdown("**The sentence:** " + markdown_literal(in_view(st.session_state[state.TEXT])))


SENTENCE_CHARS = 160  # a presenter's line: a longer text keeps its start and its end (where a decoder answers)


def in_view(text: str, chars: int = SENTENCE_CHARS) -> str:
    """The sentence on one line (line breaks and tabs as spaces, as the tokenizer reads them); past `chars`
    characters its start and its end with an ellipsis between."""
    words = " ".join(text.split())
    if len(words) <= chars:
        return words
    half = chars // 2
    return f"{words[:half].rstrip()} \u2026 {words[-half:].lstrip()}"


def then_and_now_line() -> str:
    """What the 2017 paper did at this lesson step and what the sidebar's model does ("the same" where it does
    what the paper did); "" on a page that is no lesson step."""
    page = this_page()
    if page is None or page.step is None:
        return ""
    return then_and_now.line(cached.model(st.session_state[state.MODEL]), page.stem)


# presenter mode fits a layer x head grid of up to this many layers on the first screen; a deeper one (SmolLM2's 30)
# keeps its own height and scrolls, since squeezed into one screen each cell would be a few pixels
PRESENT_LAYERS = 6


INTRO_BOX = state.INTRO_BOX


def intro(text: str) -> None:
    """A step's opening paragraph (what the 2017 paper did here is under the title: page_header); in presenter mode
    it is folded, with what the heads can show (about_heads), so the figure fits on the first screen (the teacher
    tells it)."""
    if presenting():
        box = st.session_state[INTRO_BOX] = st.expander("What this step shows", icon=":material/info:")
        box.markdown(text)
    else:
        st.markdown(text)


def page_footer() -> None:
    """Previous / Next again under a lesson step, so a class that scrolled down goes on from there."""
    page = this_page()
    if page is not None and page.step is not None:
        st.divider()
        _step_links(page, *st.columns(2))


def stop() -> None:
    """End the page here (after a message saying why), keeping the lesson's Previous / Next under it."""
    page_footer()
    st.stop()


def predict(
    question: str, options: list[str], context: tuple, key: str, reveal: str = "Reveal the model's answer"
) -> int | None:
    """Predict, then reveal: the class picks one of `options` and presses Reveal; returns the guess's index once
    revealed (None before). `context` names the question (the model, sentence, head, token): a new one asks again."""
    asked = hash(context)
    revealed = f"{key}_revealed"
    st.markdown("**Predict first.** " + markdown_literal(question))
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    guess = left.selectbox(
        "Your class's answer",
        range(len(options)),
        index=None,
        format_func=options.__getitem__,
        placeholder="pick an answer...",
        key=f"{key}_guess_{asked}",
    )
    if st.session_state.get(revealed) == asked:
        return guess if guess is not None else -1
    right.button(
        reveal,
        key=f"{key}_reveal",
        disabled=guess is None,
        on_click=_reveal,
        args=(revealed, asked),
        type="primary",
    )
    if guess is None and not presenting():
        st.caption("Pick an answer, then reveal it.")
    return None


def _reveal(key: str, asked: int) -> None:
    st.session_state[key] = asked


def answer_box(text: str, guess: int, right: bool, box=st) -> None:
    """A revealed answer in the box its verdict earns: success (green) only where the class was right, a warning where
    it was not (a wrong guess is no success), plain info where it revealed without a guess (`guess` -1). `box`: the
    container to write in (a column)."""
    if guess < 0:
        box.info(text)
    elif right:
        box.success(text)
    else:
        box.warning(text)
