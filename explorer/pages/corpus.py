"""Heads over many texts: every head's statistics pooled over a corpus, the texts where one head does its thing most
(each opens in the attention heatmap with that head), and its queries and keys over the corpus in one plane."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import corpus_runs, state
from attention_explorer.explorer.figures import corpus as figures
from attention_explorer.explorer.figures.labels import abbreviated, markdown_literal
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import admission, cost
from attention_explorer.explorer.run.corpus_input import CorpusError, texts
from attention_explorer.explorer.run.corpus_stats import STATISTICS
from attention_explorer.explorer.views.chart import chart, drill_to_pickers
from attention_explorer.explorer.views.corpus import NAMES, SHARES, chosen_corpus, meaning, open_text
from attention_explorer.explorer.views.current import sidebar_loaded
from attention_explorer.explorer.views.frame import intro, page_header, stop
from attention_explorer.explorer.views.pickers import pick_layer_head

TOP_TEXTS = 8  # texts in a head's bar chart
OPENED = 5  # of those, texts with a button that opens them

page_header("Heads over many texts")
loaded = sidebar_loaded()
intro(
    "A head's job shows over many texts, not one: a previous-token head looks one token back on every text, an "
    "induction head only where something repeats, and some heads put most of their weight on the first token "
    f"everywhere. Run a corpus through {markdown_literal(loaded.title)} (the sidebar's model): each statistic is "
    "pooled over the query positions of every text, each counting once (which positions, each statistic says "
    "below). Attention is not explanation: "
    "these say where weight goes, not why."
)

corpus = chosen_corpus()
choice = state.sidebar(st.session_state)
try:
    ready = corpus_runs.prepared(choice.model, corpus, choice.max_tokens)
except CorpusError as e:
    st.error(markdown_literal(str(e)), icon=":material/error:")
    stop()
for note in ready.notes():
    st.warning(markdown_literal(f"{note}; the rest runs."), icon=":material/content_cut:")
digest = corpus_runs.keep(corpus)
tokens = sum(len(e) for e in ready.encodings)
st.caption(
    markdown_literal(
        f"From {corpus.source}: {texts(len(ready.encodings))}, {tokens:,} tokens in all, each text cut at "
        f"{choice.max_tokens:,} tokens (the sidebar's Max tokens)."
    )
)
ran = st.session_state.setdefault(state.CORPUS_RAN, {})
if digest not in ran and corpus_runs.kept_stats(choice.model, corpus, choice.max_tokens) is None:
    needs = corpus_runs.estimate(choice.model, ready)
    slot = st.container()  # the estimate, above the button
    asking = st.empty()  # the button goes once pressed: the run's progress bar comes under it
    if not asking.button(
        f"Run the {texts(len(ready.encodings))} through the model", key="corpus_run", icon=":material/play_arrow:"
    ):
        slot.info(
            f"That takes {cost.about(needs.seconds)} on this server and at most about "
            f"{admission.gigabytes(needs.bytes)} of memory at once (an estimate from the texts' lengths and the "
            "model's size; a busy server takes longer).",
            icon=":material/hourglass_top:",
        )
        stop()
    asking.empty()
ran[digest] = corpus
stats = corpus_runs.stats(choice.model, corpus, choice.max_tokens)
st.query_params[state.URL_CORPUS] = digest  # the address names the corpus by its digest, never its texts

st.subheader("Every head, one statistic")
name = st.selectbox("Statistic", STATISTICS, format_func=NAMES.get, key=state.CORPUS_STATISTIC)
first = stats.readable_tokens[0][0] if stats.tokens and stats.tokens[0][0] in loaded.family.specials else ""
st.markdown(meaning(name, stats.causal, first))
values, pooled = stats.statistic(name), stats.count(name)
if pooled == 0:
    st.info(
        "No text of this corpus repeats a token, so no head can show induction on it: add texts in which something "
        "occurs twice.",
        icon=":material/info:",
    )
    stop()
percent = name in SHARES
shown = (lambda v: f"{v:.2%}") if percent else (lambda v: f"{v:.3g}")  # 99.96%, not a rounded 100.0%
labels = np.full(values.shape, f"{pooled:,} query positions pooled", dtype=object)
chart(
    statistic_grid(values, labels, NAMES[name], percent=percent, title=f"{NAMES[name].capitalize()}, every head"),
    "corpus_grid",
    on_click=drill_to_pickers(state.CORPUS_LAYER, state.CORPUS_HEAD),
    view=(NAMES[name], texts(len(stats.texts))),
)
order = np.argsort(-np.nan_to_num(values, nan=-np.inf), axis=None, kind="stable")
best = [np.unravel_index(i, values.shape) for i in order[:3]]
st.caption(
    "Highest: "
    + "; ".join(f"layer {layer + 1}, head {head + 1} ({shown(values[layer, head])})" for layer, head in best)
    + f". Each cell pools {pooled:,} query positions. Click a cell to see that head below."
)
st.download_button(
    "Every head's statistics (CSV)",
    corpus_runs.table_csv(stats),
    f"corpus_{choice.model}_{digest}.csv",
    "text/csv",
    key="corpus_csv",
    on_click="ignore",
    icon=":material/download:",
)

st.subheader("One head over the corpus")
layer, head = pick_layer_head(stats.n_layers, stats.n_heads, "corpus", layer=int(best[0][0]), head=int(best[0][1]))
top = stats.top_texts(name, layer, head, TOP_TEXTS)
chart(
    figures.top_texts(
        [v for _, v in top],
        [f"{i + 1}: {stats.texts[i]}" for i, _ in top],
        NAMES[name],
        title=f"Layer {layer + 1}, head {head + 1}: the texts where its {NAMES[name]} is highest",
    ),
    "corpus_top",
    view=(f"layer {layer + 1}", f"head {head + 1}", NAMES[name]),
)
for i, value in top[:OPENED]:
    text_col, button_col = st.columns([5, 1], vertical_alignment="center")
    where = stats.strongest(name, i, layer, head)
    at = "" if where is None else f" Strongest at position {where}: {stats.readable_tokens[i][where]}."
    text_col.caption(markdown_literal(f"Text {i + 1} ({shown(value)}): {abbreviated(stats.texts[i], 160)}{at}"))
    button_col.button(
        "Open",
        key=f"corpus_open_{i}",
        on_click=open_text,
        args=(stats.texts[i], stats.kind, layer, head),
        help="Make this text the sidebar's sentence and open it in the attention heatmap on this head",
        icon=":material/open_in_new:",
    )

st.subheader("Its queries and keys over the corpus")
st.caption(
    "Each point is one token's query (circle) or key (cross) in this head, over every text. A query scores high "
    "on a key that points the same way; the plane keeps the two directions in which the queries and keys, taken "
    "together, vary most (a principal component analysis of both at once)."
)
colour = st.radio(
    "Colour",
    ["position", "role"],
    format_func={"position": "by position in its text", "role": "queries and keys apart"}.get,
    horizontal=True,
    key=state.CORPUS_COLOUR,
)
slot = st.empty()  # the button goes once the points are drawn
if corpus_runs.kept_points(choice.model, corpus, choice.max_tokens, layer, head) is None and not slot.button(
    f"Draw layer {layer + 1}, head {head + 1}'s queries and keys", key="corpus_points", icon=":material/scatter_plot:"
):
    stop()
slot.empty()
points = corpus_runs.points(choice.model, corpus, choice.max_tokens, layer, head)
n = len(points.position)
readable = list(loaded.family.spelling.labels(points.tokens))
chart(
    figures.projection(
        np.concatenate([points.queries, points.keys]),
        ["query"] * n + ["key"] * n,
        np.concatenate([points.position, points.position]),
        readable + readable,
        np.concatenate([points.text, points.text]),
        colour=colour,
        explained=tuple(float(s) for s in points.explained),
        title=f"Layer {layer + 1}, head {head + 1}: {n:,} queries and {n:,} keys",
    ),
    "corpus_points_chart",
    view=(f"layer {layer + 1}", f"head {head + 1}"),
)
