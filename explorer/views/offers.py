"""What a step offers when the sidebar's model cannot show it, or shows something else: one click to the lesson's
real language model or its toy translator, and the Train page's word that it trains a toy."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.app.callbacks import use_model
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.views.frame import stop


def offered(key: str) -> bool:
    """Whether this server offers the model (serve --models lists it, or lists none): the pages offer no other."""
    return key in cached.model_keys()


def needs_decoder(loaded) -> None:
    """On a decoder step with an encoder-only model: say so, offer the translation model in one click, stop."""
    if loaded.family.next_token_head:
        return
    st.info(
        f"{markdown_literal(loaded.title)} is {loaded.family.shape_name}: it has no decoder and no output "
        "distribution, so this step has nothing to show. SmolLM2 (a real language model) and the toy translation "
        "model have both."
        + ("" if offered(navigation.REAL_MODEL) or offered(navigation.TRANSLATE) else " This server offers neither.")
    )
    left, right = st.columns(2)
    with left:
        offer_real_model("Show this step with a real language model (SmolLM2)", "needs_decoder_real")
    with right:
        offer_translation("Show this step with the toy translation model", "needs_decoder_translate")
    stop()


def offer_real_model(label: str, key: str) -> None:
    """One click to the lesson's real language model (SmolLM2-135M) on its example sentence, where it is offered."""
    if offered(navigation.REAL_MODEL):
        st.button(
            label,
            on_click=use_model,
            args=(navigation.REAL_MODEL, navigation.REAL_EXAMPLE),
            icon=":material/chat:",
            key=key,
        )


def offer_translation(label: str, key: str) -> None:
    """One click to the lesson's encoder-decoder (the toy translation model) on its example sentence, where it is
    offered."""
    if not offered(navigation.TRANSLATE):
        return
    st.button(
        label,
        on_click=use_model,
        args=(navigation.TRANSLATE, navigation.TRANSLATE_EXAMPLE),
        icon=":material/translate:",
        key=key,
    )


def not_the_sidebar_model() -> None:
    """The Train page trains a toy: say so when the sidebar holds a pretrained model (a function, so no page global
    keeps the model alive)."""
    loaded = cached.model(st.session_state[state.MODEL])
    if loaded.family.pretrained:
        st.info(
            markdown_literal(
                f"This page trains a small toy model here, not {loaded.title}: that model was pretrained elsewhere on "
                "a large corpus, with its own recipe; what follows describes the toy's."
            )
        )
    elif loaded.family.from_folder:
        st.info(
            markdown_literal(
                f"This page trains a small toy model here, not {loaded.title} (read from a folder); what follows "
                "describes the toy's recipe."
            )
        )
