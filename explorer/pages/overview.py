"""Overview, the lesson's map: the sidebar's model drawn as the paper's figure 1, each box numbered with its step and
opening it when clicked; the sentence and its tokens; every step in order."""

from __future__ import annotations

import functools

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import escape_tokens, markdown_literal
from attention_explorer.explorer.figures.overview import figure_one, map_height, open_clicked
from attention_explorer.explorer.lesson.window_words import layers_summary
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace
from attention_explorer.explorer.views.frame import intro, page_footer, page_header
from attention_explorer.explorer.views.offers import offer_real_model, offer_translation, offered
from attention_explorer.explorer.views.unreadable import cannot_read, reading_error

SHOWN_CHARACTERS = 1000  # a pasted page of text is cut here on the map; the steps show what the model reads
TOKEN_SEPARATOR = " · "
SHOWN_TOKENS = 40  # more would push the map below the first screen

page_header()
sidebar = state.sidebar(st.session_state)
model_key, text = sidebar.model, sidebar.text
loaded = cached.model(model_key)
config = loaded.model.config
intro(
    f"The model in the sidebar is {markdown_literal(loaded.family.shape_name)}, drawn below as figure 1 of *Attention "
    "Is All You Need* with its own sizes. The lesson follows the sentence from the bottom up: each box carries the "
    "number of the step that shows it on the sidebar's sentence, with the model's own numbers. Click a box to open "
    "its step."
)
# the lesson on the real model, one click away on the first screen (1600 x 900), above the map: under it the button
# sat at y = 1,017 px. MiniLM stays the default: it is drawn in about a second in 0.3 GB, SmolLM2 in about 8 s in 0.8 GB
offer = not (loaded.family.pretrained and loaded.family.shape == "decoder-only") and offered(navigation.REAL_MODEL)
if offer:
    offer_real_model(
        "Take the lesson on a real language model: SmolLM2-135M predicts the next word of your sentence",
        "overview_real",
    )
if loaded.can_read(text):
    # the first stack's input: an encoder-decoder's tokens need no decoding to be named
    tokens = current_trace(loaded.family.kinds[0]).labels_for(loaded.family.kinds[0])[0]
    words = " ".join(text.split())  # line breaks and tabs read as spaces, as the tokenizer reads them
    cut = f" … ({len(words):,} characters)" if len(words) > SHOWN_CHARACTERS else ""
    st.markdown("**The sentence:** " + markdown_literal(words[:SHOWN_CHARACTERS]) + cut)
    more = f" … and {len(tokens) - SHOWN_TOKENS} more (step 1 lists them all)" if len(tokens) > SHOWN_TOKENS else ""
    st.markdown(
        f"**Its {len(tokens)} tokens**, as the model reads them: "
        + TOKEN_SEPARATOR.join(markdown_literal(token) for token in tokens[:SHOWN_TOKENS])
        + more
    )
elif error := reading_error(loaded, text):  # the map below needs no sentence
    cannot_read(error)

# functools.partial of a module's function: a callback defined here would keep this script's globals alive
map_px = map_height(loaded.family.shape, offer)  # the whole map on the first screen, the button above it
figure = figure_one(config, escape_tokens([loaded.title])[0])
figure.update_layout(height=min(figure.layout.height, map_px))
chart(
    figure,
    "overview_figure",
    on_click=functools.partial(open_clicked, st.session_state, state.DRILL_TO),
    present_height=map_px,
)

# a model with local layers (models.anatomy.Span): which layers see a window of keys and which every key
if spans := layers_summary([span.window for span in loaded.family.block.spans]):
    st.caption(spans)

missing = navigation.lacking(loaded.family)
if missing:
    st.info(
        markdown_literal(
            f"{loaded.title} is {loaded.family.shape_name}: it has no decoder, so these steps have nothing to show "
            "on it: " + "; ".join(page.label for page in missing) + ". The toy translation model has a decoder."
        )
    )
    offer_translation("Use the toy translation model", "overview_translate")

st.subheader("The steps")
for page in navigation.STEPS:
    st.page_link(
        page.script,
        label=page.label,
        icon=f":material/{page.icon}:",
        help="Needs a decoder: the page offers the toy translation model." if page in missing else None,
    )
page_footer()
