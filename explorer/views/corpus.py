"""The Corpus page's parts: where its texts come from (the samples, pasted lines, a file, or a shared address's
digest), what each statistic means in words, and the click that opens one text in the attention heatmap with a head
selected."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import corpus_runs, state
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.run import corpus_input
from attention_explorer.explorer.run.corpus_input import Corpus, CorpusError
from attention_explorer.explorer.views.chart import ATTENTION_PAGE, show_in_attention
from attention_explorer.explorer.views.frame import stop

SOURCES = {"samples": "The sample sentences", "paste": "Paste lines", "file": "A .txt or .csv file"}
PASTE_HELP = "One text a line; blank lines are left out."
FILE_HELP = "A .txt file holds one text a line; a .csv file holds its texts in a column named text."
CORPUS_PAGE = navigation.script("corpus")
UPLOAD_MB = corpus_input.MAX_BYTES // 2**20  # the browser refuses a larger file before sending it

# each statistic in words, as the grid names it and as it is computed (explorer/run/corpus.py): A is a head's
# weights on one text, t the query's position, k the key's; pooled over every query position of every text
NAMES = {
    "previous_token": "previous token",
    "first_token": "first token",
    "self": "self",
    "entropy": "entropy",
    "mean_distance": "mean distance",
    "induction": "induction",
}
SHARES = ("previous_token", "first_token", "self", "induction")  # shares of a query's weight: percentages
MEANINGS = {
    "previous_token": "the weight each query puts on the token just before it, A[t, t-1]",
    "first_token": "the weight each query puts on the text's first position, A[t, 0]",
    "self": "the weight each query puts on itself, A[t, t]",
    "entropy": "how spread out each query's weights are, -Σ A[t, k] ln A[t, k] in nats (0: all on one key)",
    "induction": "the weight on the token that followed an earlier copy of the query's own token",
}
# what a causal mask forces on the first query's row (it can see only itself: A[0, 0] = 1), per statistic
FIRST_ROW = {
    "first_token": "1",
    "self": "1",
    "entropy": "0",
    "mean_distance": "0",
}


def pooled(name: str, causal: bool) -> str:
    """Which query positions a statistic averages over (explorer/run/corpus.py), and, under a causal mask, what the
    first one's row adds, since the mask leaves it nothing but itself."""
    if name == "previous_token":
        return "averaged over every query position but the first (it has no token before it) of every text"
    if name == "induction":
        return "averaged over the query positions whose token occurred earlier in its text"
    said = "averaged over every query position of every text"
    if causal:
        said += (
            f", the first included: the causal mask lets it see only itself, so its value there is always "
            f"{FIRST_ROW[name]}, whatever the head"
        )
    return said


def meaning(name: str, causal: bool, first_marker: str) -> str:
    """What a statistic measures, in one sentence, for this model (its first position's token, its mask)."""
    if name == "mean_distance":
        how = "t - k: how far back" if causal else "|t - k|: how far, either way"
        said = f"how far each query looks, Σ A[t, k] ({how}), in tokens"
    else:
        said = MEANINGS[name]
    if name == "first_token" and first_marker:
        said += f" (here the marker {first_marker}, which the tokenizer puts first)"
    return f"**{NAMES[name].capitalize()}**: {markdown_literal(said)}, {markdown_literal(pooled(name, causal))}."


def chosen_corpus() -> Corpus:
    """The corpus the page's input names: the address's digest once (while the server still holds it), else the
    samples, the pasted lines or the file; bad input says why in one line and the page stops there."""
    asked = state.url_value(st.session_state, state.URL_CORPUS, state.CORPUS_SOURCE)
    if asked is not None:
        found = corpus_runs.corpora().get(asked)
        if found is None:
            st.warning(
                "The address names a corpus this server no longer holds (it keeps the last "
                f"{corpus_runs.CORPORA_KEPT}); the address never holds the texts. Paste them again or upload the file.",
                icon=":material/link_off:",
            )
        else:
            st.session_state.setdefault(state.CORPUS_RAN, {})[asked] = found
            st.session_state[state.CORPUS_SOURCE] = "shared"
    options = [*SOURCES, *(("shared",) if st.session_state.get(state.CORPUS_SOURCE) == "shared" else ())]
    source = st.radio(
        "Texts",
        options,
        format_func=lambda s: SOURCES.get(s, "The shared address's texts"),
        horizontal=True,
        key=state.CORPUS_SOURCE,
    )
    try:
        if source == "samples":
            return corpus_runs.samples(st.session_state[state.MODEL])
        if source == "shared":
            return next(iter(st.session_state[state.CORPUS_RAN].values())) if asked is None else found
        if source == "paste":
            text = st.text_area(
                "Texts, one a line",
                key=state.CORPUS_PASTE,
                height=160,
                help=PASTE_HELP,
                # one past the limit: a longer paste (the browser and Streamlit's server both cut it there) is
                # refused in words by corpus_input.from_lines, never cut silently mid-line
                max_chars=corpus_input.MAX_BYTES + 1,
            )
            if not text.strip():
                st.info("Paste some texts, one a line, to run them.", icon=":material/edit_note:")
                stop()
            return corpus_input.from_lines(text)
        upload = st.file_uploader(
            "A .txt or .csv file", type=["txt", "csv"], key=state.CORPUS_FILE, help=FILE_HELP, max_upload_size=UPLOAD_MB
        )
        if upload is None:
            st.info(f"Choose a file of at most {UPLOAD_MB} MB.", icon=":material/upload_file:")
            stop()
        return corpus_input.from_bytes(upload.getvalue(), upload.name)
    except CorpusError as e:
        st.error(markdown_literal(str(e)), icon=":material/error:")
        stop()
    raise AssertionError("unreachable")


def open_in_corpus(layer: int, head: int) -> None:
    """A click on a lesson step: the Corpus page opens on this head, over the samples unless a corpus was chosen."""
    state.choose(st.session_state, state.CORPUS_LAYER, layer)
    state.choose(st.session_state, state.CORPUS_HEAD, head)
    st.session_state[state.DRILL_TO] = CORPUS_PAGE


def open_text(text: str, kind: str, layer: int, head: int) -> None:
    """A click on one of a head's top texts: that text becomes the sidebar's sentence and the attention heatmap opens
    on it with this head selected (a typed sentence is put aside: "Back to your sentence")."""
    if text != st.session_state[state.TEXT]:
        state.put_aside(st.session_state, text, state.CORPUS_TEXT)
    show_in_attention(kind, layer, head)
    st.session_state[state.DRILL_TO] = ATTENTION_PAGE
