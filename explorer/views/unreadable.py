"""A sentence the sidebar's model cannot read (a toy's whole-word vocabulary): which of its words the model knows and
which it does not, the model's own example in one click, and, while that example stands in for the sentence, the
sentence back in one click."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.app.callbacks import back_to_sentence, keep_example, use_own_example
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.models.tasks import UnknownWordError
from attention_explorer.models.tokenize import TokenizeError

SHOWN_WORDS = 24  # of each kind: a long paste lists this many, then counts the rest
SHOWN_CHARACTERS = 80  # of the sentence put aside


def word_list(words: Sequence[str]) -> str:
    """The words quoted as Python writes them (an invisible or control character shows as its escape), literal in
    markdown; past SHOWN_WORDS counted."""
    shown = ", ".join(repr(word) for word in words[:SHOWN_WORDS])
    more = f" and {len(words) - SHOWN_WORDS} more" if len(words) > SHOWN_WORDS else ""
    return markdown_literal(shown + more)


def words_known(error: UnknownWordError, unknown: bool = True) -> str:
    """Markdown: which of the typed words (each once) the model knows, and, when `unknown`, which it does not."""
    known, missing = error.known, tuple(error.suggestions)
    total = len(known) + len(missing)
    knows = f"It knows {len(known)} of the {total} words typed: {word_list(known)}." if known else ""
    knows = knows or f"It knows none of the {total} words typed."
    return f"{knows} It does not know {word_list(missing)}." if unknown else knows


def reading_error(loaded, text: str) -> TokenizeError | None:
    """What the model's tokenizer says of the text (None: it reads it)."""
    try:
        loaded.tokenizer.encode(text, loaded.max_tokens)
    except TokenizeError as e:
        return e
    return None


def cannot_read(error: TokenizeError) -> None:
    """Why the sidebar's model cannot read the sentence; for unknown words, which ones, what it reads instead, and
    its example in one click."""
    st.info(markdown_literal(str(error)))
    if not isinstance(error, UnknownWordError):
        return
    loaded = cached.model(st.session_state[state.MODEL])
    words = loaded.tokenizer.known
    st.markdown(words_known(error, unknown=False))  # the message above names the others
    st.caption(
        f"{markdown_literal(loaded.title)} reads only the {len(words)} words of its own vocabulary (listed below), "
        "lower-cased, and splits each punctuation mark off as a word: change the others, or use its example."
    )
    st.button(
        f"Use this model's example: {markdown_literal(loaded.example)}",
        on_click=use_own_example,
        icon=":material/lightbulb:",
        type="primary",
        key="unreadable_example",
    )
    with st.expander(f"The {len(words)} words this model knows"):
        st.text(", ".join(words))


def put_aside_notice() -> None:
    """While the model's example stands in for a typed sentence it could not read: say so, and offer the sentence
    back in one click."""
    typed = state.aside(st.session_state)
    if typed is None:
        return
    loaded = cached.model(st.session_state[state.MODEL])
    error = reading_error(loaded, typed)
    why = markdown_literal(f"{loaded.title} cannot read your sentence, so it shows its own example.")
    if error is None and state.aside_stands_in(st.session_state) == state.CORPUS_TEXT:
        why = "The sentence box holds a text opened from the Corpus page; the sentence you had is kept."
    elif error is None:
        why = "The sentence box holds one of this model's examples; your sentence is kept."
    elif isinstance(error, UnknownWordError):
        why += " " + words_known(error)
    cut = "…" if len(typed) > SHOWN_CHARACTERS else ""
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.info(why, icon=":material/swap_horiz:")
    left.caption("Your sentence: " + markdown_literal(repr(typed[:SHOWN_CHARACTERS]) + cut))
    right.button("Back to your sentence", on_click=back_to_sentence, icon=":material/undo:", key="aside_back")
    # the teacher goes on with the example: this notice leaves every page (the sentence with it)
    right.button("Keep the example", on_click=keep_example, icon=":material/close:", type="tertiary", key="aside_keep")
