"""Find heads: pick a query token and a key token, and rank every layer x head by the weight between them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal, position_label
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.run import starting
from attention_explorer.explorer.views.chart import chart, drill_to_attention, open_in_attention
from attention_explorer.explorer.views.current import token_legend
from attention_explorer.explorer.views.pickers import pick_attention, pick_token

st.header("Find heads")
st.markdown(
    "Which heads link two words? Pick a query token (the one attending, e.g. *it*) and a key token (the one "
    "attended to, e.g. *animal*): every head of every layer is ranked by the weight that query puts on that key. "
    "The page opens on the strongest long-range link between two words anywhere in the model."
)

chosen = pick_attention("find", words=False, starting=False)  # the text above says where it opens
attention, queries, keys = chosen.attention, chosen.queries, chosen.keys
start = cached.get_start(state.sidebar(st.session_state), chosen.kind)
left, right = st.columns(2)
query = pick_token(queries, "Query token (attending)", "find_query", left, index=start.query)
key = pick_token(keys, "Key token (attended to)", "find_key", right, index=start.key, name=state.URL_KEY)

# the query's row of every layer, not every layer: a long text's layers are recomputed when read (10 s at 2,048 tokens)
rows = cached.get_query_rows(state.sidebar(st.session_state), chosen.kind, query)  # (L, H, Tk)
picked = rows[:, :, key]  # (L, H)
ranked = starting.rank_heads(rows[:, :, None, :], 0, key)
best_layer, best_head, best_weight = ranked[0]
if st.button(
    f"Open the best, layer {best_layer + 1} head {best_head + 1} ({best_weight:.3f}), in the attention heatmap",
    key="find_open",
    type="primary",
):
    open_in_attention(chosen.kind, best_layer, best_head)

ranks = np.empty(picked.shape, dtype=object)
for rank, (layer, head, _) in enumerate(ranked, start=1):
    ranks[layer, head] = f"rank {rank}"
query_name, key_name = position_label(query, queries[query]), position_label(key, keys[key])
st.subheader(markdown_literal(f"Every head: the weight that query {query_name!r} puts on key {key_name!r}"))
grid, table = st.columns([3, 2])
with grid:
    chart(
        statistic_grid(
            picked,
            ranks,
            "weight",
            zrange=(0.0, 1.0),
            title=f"Weight that query {query_name!r} puts on key {key_name!r}",
        ),
        "find_grid",
        on_click=drill_to_attention(chosen.kind),
    )
    st.caption("Click a cell to open that head in the attention heatmap.")
rows = [{"rank": i, "layer": layer + 1, "head": head + 1, "weight": w} for i, (layer, head, w) in enumerate(ranked, 1)]
table.dataframe(pd.DataFrame(rows), hide_index=True, key="find_table", height=420)
token_legend()  # the marks its token labels use
