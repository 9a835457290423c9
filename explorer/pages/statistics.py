"""Head statistics: what each head does on this sentence, as numbers, a layer x head grid and a label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import analysis
from attention_explorer.explorer.views.chart import chart, drill_to_attention, open_in_attention
from attention_explorer.explorer.views.current import sidebar_family
from attention_explorer.explorer.views.pickers import pick_attention, pick_head, pick_layer

REPEAT_HELP = (
    "Random tokens of the model's vocabulary, then the same tokens again: from the second half on, the next token is "
    "always the one after the same token in the first half, which is what an induction head finds."
)
INDUCTION = 0.5  # the label's threshold, as analysis.head_label names a head "induction"

st.header("Head statistics")
about = st.empty()  # the page's introduction, above the pickers; it names the markers of the attention picked
chosen = pick_attention("stats")
# the markers this model's tokenizer puts around the text ([CLS] and [SEP] for BERT; none for GPT-2 or SmolLM2, whose
# first position is then the text's first token): named as they are, never a marker the model lacks
raw_keys = chosen.trace.tokens_for(chosen.kind)[1]
NAMES, DESCRIPTIONS = analysis.marker_names(raw_keys), analysis.marker_descriptions(raw_keys)
ends = "" if NAMES["sep"] == analysis.NO_END else f", {NAMES['sep']}"
about.markdown(
    "For every head on your sentence: how spread out its attention is (entropy), how far it looks (mean "
    "distance), how much of it goes to the previous, next or same position, to the "
    + markdown_literal(f"{NAMES['cls']}{ends}")
    + " or punctuation, and to the token after an earlier copy of the query's own token (induction). "
    "Each head gets a plain label from the first rule that holds (a share of at least 0.5, or an entropy of at "
    "least 75% of the maximum for *broad*). Attention is not explanation: these describe where weight goes, "
    "not why the model decides anything."
)

attention = chosen.attention
words = chosen.groups is not None  # previous / next then mean the previous and next word
stats, labels = cached.get_statistics(state.sidebar(st.session_state), chosen.kind, words)

name = st.selectbox("Statistic", list(analysis.STATISTICS), format_func=NAMES.get, key="stats_statistic")
st.caption(markdown_literal(DESCRIPTIONS[name]))
if name == "next" and chosen.kind == "decoder_self":
    st.caption("Under the causal mask no position can see the next one: this share is 0 for every head.")
if name == "induction":
    repeats = not np.isnan(stats["induction"]).all()
    on_random = not repeats or st.toggle(
        "Measure on a repeated random sequence instead", key="stats_random_repeat", help=REPEAT_HELP
    )
    if not repeats:
        st.info(
            "No token of this sentence occurs twice (or this attention's queries are not its keys), so no head can "
            "show induction on it. Below: every head measured on a repeated random sequence of the model's own "
            "tokens instead."
        )
    if on_random and chosen.kind == sidebar_family().kinds[0]:
        repeat = cached.get_random_repeat(st.session_state[state.MODEL])
        half = (len(repeat.tokens) - 1) // 2
        chart(
            statistic_grid(
                repeat.induction,
                np.where(repeat.induction >= INDUCTION, "induction", "other").astype(object),
                NAMES[name],
                percent=True,
                title=f"Induction on a random sequence of about {half} tokens, then the same again",
            ),
            "stats_repeat_grid",
        )
        st.caption(
            markdown_literal("The sequence: " + " ".join(sidebar_family().spelling.labels(repeat.tokens)))
            + " Each head's score is its mean weight, over the repeat's tokens, on the token after that token's "
            "first occurrence."
        )
        st.stop()
    if on_random:
        st.caption("The random sequence is run through the attention that reads the text; pick it above.")
shown_as = f"weight on {NAMES[name]}" if name in analysis.SHARES else NAMES[name]
grid_title = f"{shown_as[0].upper()}{shown_as[1:]}, every head"  # "Weight on previous token, every head"
chart(
    statistic_grid(stats[name], labels, NAMES[name], percent=name in analysis.SHARES, title=grid_title),
    "stats_grid",
    on_click=drill_to_attention(chosen.kind, words),
)
st.caption("Click a cell of the grid to open that head in the attention heatmap.")


def shown(key: str, values) -> float:
    """A statistic as the table shows it: shares in percent."""
    return float(values) * (100 if key in analysis.SHARES else 1)


rows = [
    {"layer": layer + 1, "head": head + 1, "label": labels[layer, head]}
    | {NAMES[k]: shown(k, v[layer, head]) for k, v in stats.items()}
    for layer in range(attention.n_layers)
    for head in range(attention.n_heads)
]
formats = {  # 3 significant digits, shares as percentages with one decimal: never "0.000000006"
    NAMES[k]: st.column_config.NumberColumn(format="%.1f%%" if k in analysis.SHARES else "%.3g") for k in stats
}
st.dataframe(pd.DataFrame(rows), hide_index=True, column_config=formats, key="stats_table")
st.caption("Click a column header to sort.")

left, right, go_col = st.columns([2, 2, 2], vertical_alignment="bottom")
start = cached.get_start(state.sidebar(st.session_state), chosen.kind)
layer = pick_layer(attention.n_layers, "stats_layer", left, start.layer)
head = pick_head(attention.n_heads, "stats_head", right, index=start.head)
if go_col.button(f"Open layer {layer + 1}, head {head + 1} in the attention heatmap", key="stats_open"):
    open_in_attention(chosen.kind, layer, head, words)
