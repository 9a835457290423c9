"""Lesson step 1: how the tokenizer split the sidebar's sentence into tokens, and the id the model reads for each."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal, position_label
from attention_explorer.explorer.figures.tokens import SHOWN, token_boxes
from attention_explorer.explorer.run import forward, tokens_view
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace
from attention_explorer.explorer.views.frame import (
    answer_box,
    intro,
    page_footer,
    page_header,
    predict,
    presenting,
    stop,
)
from attention_explorer.models.families.descriptor import WORDPIECE

SHOWN_CHARACTERS = 1000  # a pasted page of text is cut here (as on the Overview); the boxes show every token read

page_header()
intro(
    "A model cannot read letters. Its tokenizer cuts the text into tokens from a fixed vocabulary and gives each "
    "token its number in that vocabulary, its id: the ids are all the model ever sees of the sentence."
)
loaded = cached.model(st.session_state[state.MODEL])
first_kind = loaded.family.kinds[0]  # the attention that reads the text's tokens (no decoding needed)
result = current_trace(first_kind)
tokens = result.source_tokens  # as the tokenizer spells them ('Ġcapital')
readable = result.readable(tokens)  # as a class reads them ('␣capital')
ids = forward.token_ids(loaded, result, forward.stack_of(first_kind))
rows = tokens_view.rows(result.text, tokens, ids, result.source_offsets, result.source_word_ids)
counts = tokens_view.counts(result.text, tokens, result.source_offsets, result.source_word_ids, result.truncated)

# the lesson's focused token, where it is a source token of this sentence
focus = st.session_state.get(state.FOCUS_TOKEN)
on_source = st.session_state.get(state.FOCUS_KIND) in (None, first_kind)
if not (on_source and isinstance(focus, int) and 0 <= focus < len(tokens)):
    focus = None

where = "in the sidebar"
if presenting():  # the sidebar is folded: the class sees the sentence here
    words = " ".join(result.text.split())  # line breaks and tabs read as spaces, as the tokenizer reads them
    cut = f" … ({len(words):,} characters)" if len(words) > SHOWN_CHARACTERS else ""
    st.markdown("**The sentence:** " + markdown_literal(words[:SHOWN_CHARACTERS]) + cut)
    where = "above"
if counts.truncated:  # the count is then the sidebar's Max tokens: nothing to predict
    st.caption(
        f"The text is longer than the sidebar's Max tokens: the model reads its first {counts.tokens} tokens. With a "
        "shorter text this step asks the class to predict the count first."
    )
else:
    options = tokens_view.count_options(counts, f"{loaded.key}\n{result.text}")
    typed = len(result.text.split())
    guess = predict(
        f"The sentence {where} has {typed} word{'s' * (typed != 1)} (split at spaces). How many tokens will the "
        "model read for it?",
        [str(o) for o in options],
        (state.sidebar(st.session_state), "tokens"),
        "tokens_predict",
        reveal="Reveal the count",
    )
    if guess is None:  # the boxes and the count under them answer the question: they come with the answer
        st.caption("The tokens and their ids appear once the class's answer is revealed.")
        stop()
    else:
        said = ""
        right = guess >= 0 and options[guess] == counts.tokens
        if guess >= 0:
            said = f" Your class said {options[guess]}: {'right' if right else 'not so'}."
        answer_box(markdown_literal(f"The model reads {counts.tokens} tokens.{said} {counts.why}"), guess, right)

st.subheader("The tokens and their ids")
chart(token_boxes(readable, ids, [r.kind for r in rows], focus, raw=tokens), "tokens_boxes")
if len(tokens) > SHOWN:
    st.caption(f"The first {SHOWN} of {len(tokens)} tokens; the other {len(tokens) - SHOWN} are in the table below.")
st.markdown(markdown_literal(counts.summary))
if focus is not None:
    where = "outlined above and highlighted" if focus < SHOWN else "highlighted"
    st.caption(markdown_literal(f"The lesson's focused token, {position_label(focus, readable[focus])}, is {where}."))

family = loaded.family  # the tokenizer's kind, word marks and marker tokens, as the model's family says them
word_piece = family.tokenizer == WORDPIECE
marks = (family.start_token, family.end_token) if loaded.is_encoder_decoder else None  # where the decoder starts, stops
notes = tokens_view.notes(tokens, word_piece, loaded.tokenizer.vocab_size, marks, family.word_start)
st.markdown("\n".join(f"- {markdown_literal(note)}" for note in notes))

table = pd.DataFrame(
    {
        "position": [r.position for r in rows],
        "token": list(readable),
        "id": [r.id for r in rows],
        "kind": [r.kind for r in rows],
        "from the text": [r.text for r in rows],
    }
)
if result.spelling.marks:  # the raw spelling beside the readable one, where they differ
    table.insert(2, tokens_view.SPELT, [r.token for r in rows])
shown = table
if focus is not None:
    shown = table.style.apply(
        lambda row: ["background-color: #fff3b0" if row.name == focus else "" for _ in row], axis=1
    )
st.dataframe(shown, hide_index=True, key="tokens_table")
page_footer()
