"""Lesson step: the paper's table 1 (section 4) with this sentence's n and this model's d_model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.complexity import operations
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson.window_words import windowed_operations
from attention_explorer.explorer.run import complexity
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace
from attention_explorer.explorer.views.frame import answer_box, intro, page_footer, page_header, predict, stop

page_header()
loaded = cached.model(st.session_state[state.MODEL])
result = current_trace(loaded.family.kinds[0])
config = loaded.model.config
n, d = len(result.source_tokens), config.d_model
ops_self, ops_recurrent = complexity.self_attention_ops(n, d), complexity.recurrent_ops(n, d)
stack = "the encoder's self-attention reads" if config.is_encoder_decoder else "the model reads"
intro(
    "Section 4 of the paper asks why a layer should be self-attention rather than a recurrent or a convolutional "
    "layer, and compares them on three counts: the work per layer, how much of it must happen one step after "
    f"another, and how many steps lie between two words. Here with this sentence's numbers: {stack} n = {n} tokens, "
    f"each a vector of d = d_model = {d} numbers."
)

options = ["Self-attention", "The recurrent layer", "Both the same"]
answer = {complexity.SELF: 0, complexity.RECURRENT: 1, complexity.SAME: 2}[complexity.fewer(n, d)]
guess = predict(
    f"For this sentence (n = {n} tokens, d = {d}), which does fewer operations per layer: self-attention or a "
    "recurrent layer?",
    options,
    (state.sidebar(st.session_state), "why_attention"),
    "why_predict",
    reveal="Reveal the answer",  # arithmetic on n and d: not something the model answers
)
if guess is None:  # table 1 answers the question: it comes with the answer, as every step's figure does
    stop()
said = f" Your class said {options[guess].lower()}: {'right' if guess == answer else 'not so'}." if guess >= 0 else ""
if answer == 2:
    verdict = "the same number: n = d"
else:
    ratio = max(ops_self, ops_recurrent) / min(ops_self, ops_recurrent)
    winner = "self-attention" if answer == 0 else "the recurrent layer"
    verdict = f"{winner} does {ratio:.3g} times fewer (n/d = {n}/{d})"
answer_box(
    markdown_literal(
        f"Self-attention: n²·d = {n}²·{d} = {ops_self:,} operations. Recurrent: n·d² = {n}·{d}² = "
        f"{ops_recurrent:,}. So {verdict}.{said}"
    ),
    guess,
    guess == answer,
)

# a model with local layers (a sliding window of w keys): n·w·d, not n²·d, for those layers
if windowed := windowed_operations(n, d, [span.window for span in loaded.family.block.spans]):
    st.info(markdown_literal(windowed))

st.subheader("Table 1 for this sentence")
rows = complexity.table(n, d)
table = pd.DataFrame(
    {
        "layer type": [r.layer for r in rows],
        "complexity per layer": [r.complexity for r in rows],
        "operations": [r.operations for r in rows],
        "sequential operations": [r.sequential for r in rows],
        "steps": [r.sequential_steps for r in rows],
        "maximum path length": [r.path for r in rows],
        "path": [r.path_length for r in rows],
    }
)
st.dataframe(
    table,
    hide_index=True,
    key="why_table",
    column_config={
        "operations": st.column_config.NumberColumn(f"operations (n = {n}, d = {d})", format="localized"),
        "steps": st.column_config.NumberColumn(f"steps (n = {n})", format="%d"),
        "path": st.column_config.NumberColumn(f"path (n = {n})", format="%.2f"),
    },
)
st.caption(
    markdown_literal(
        f"The paper writes each entry as O(...): the values are the formulas with constants dropped, so compare them "
        f"across a row's layer types, not as exact counts. k = {complexity.KERNEL} (the convolution's kernel) and "
        f"r = {complexity.NEIGHBOURHOOD} (the restricted self-attention's neighbourhood) are this page's choices: the "
        "paper gives no values. The convolution's path log_k(n) is for dilated convolutions; plain ones need n/k "
        "layers."
    )
)

st.subheader("Operations per layer against the sentence's length")
n_axis, self_curve, recurrent_curve = complexity.curves(d, complexity.axis_end(n, d, config.max_len))
chart(operations(n_axis, self_curve, recurrent_curve, n, d, config.max_len), "why_operations")

if config.max_len <= d:
    reach = (
        f"it reads at most {config.max_len} tokens, fewer than d, so self-attention is the cheaper layer for any "
        "input it can take"
    )
else:
    reach = (
        f"it reads up to {config.max_len} tokens, so only its longest inputs, from {d + 1} tokens on, would cost a "
        "recurrent layer less"
    )
if n < d:
    here = f"This sentence's n = {n} is under d = {d}: self-attention does {d / n:.3g} times fewer operations."
elif n > d:
    here = f"This sentence's n = {n} is over d = {d}: here a recurrent layer would do {n / d:.3g} times fewer."
else:
    here = f"This sentence's n = {n} equals d: both do {ops_self:,}."
st.markdown(
    "\n".join(
        f"- {markdown_literal(line)}"
        for line in (
            f"Parallel over positions: a self-attention layer computes all {n} positions at once, 1 sequential "
            f"operation. A recurrent layer computes position i from position i - 1: {n} steps one after another, "
            "which no number of processors can shorten.",
            f"One step between any two words: in every self-attention layer each token reads every other directly, "
            f"so the first and the last of these {n} tokens are 1 step apart. In a recurrent layer what the first "
            f"word says reaches the last through {n - 1} step{'s' * (n != 2)}, and the longer the path, the harder "
            "a long-range dependency is to learn (the paper's argument).",
            f"Cheaper while n < d: self-attention costs n²·d per layer, a recurrent layer n·d², so the ratio is n/d. "
            f"{here} The paper's point is that sentences, in word pieces, are mostly shorter than d (512 in its base "
            f"model); for this model d = {d} and {reach}.",
            complexity.left_out(config),
        )
    )
)
page_footer()
