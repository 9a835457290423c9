"""Lesson step: each layer's prediction. Read every layer's state through the output matrix (the logit lens), and
split the output's logit into what each part wrote (direct logit attribution)."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import experiment_runs, state
from attention_explorer.explorer.app.waiting import reveal_label
from attention_explorer.explorer.figures import experiments as figures
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson.model_words import lens_intro, question_row, read_ends
from attention_explorer.explorer.run import output
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, sidebar_loaded, token_legend
from attention_explorer.explorer.views.frame import answer_box, intro, page_footer, page_header, predict, stop
from attention_explorer.explorer.views.offers import needs_decoder
from attention_explorer.explorer.views.readouts import lens_chart, rank_chart

page_header()
loaded = sidebar_loaded()
read = current_trace()  # first: a sentence the model cannot read says so on every page
needs_decoder(loaded)
intro(lens_intro(loaded.family))
sidebar = state.sidebar(st.session_state)
answer = experiment_runs.get_read_answer(sidebar)  # a decoder-only text's last row too: the one that answers
position = question_row(answer, loaded.eos_id)
found = experiment_runs.get_lens(sidebar, position)  # the rows around it, where the text is long
readable = loaded.family.spelling.readable  # tokens as every page shows them ('␣Paris')
target = readable(found.targets[position])
at = readable(found.positions[position])
known = output.scored_token(answer.where) == "right" and not answer.own_row(position)
# the model's own top token always ranks first at the output: "not even there" is offered only for a right answer
options = [*found.reads, "not even at the output"] if known else list(found.reads)
if answer.own_row(position):  # the text ends here: what the model answers is all there is to follow
    ends, inside = read_ends(read.truncated)
    question = (
        f"At position {position} ({at}) {ends}: there is no next token {inside}, so follow the model's own top "
        f"prediction, {target}. After which sub-layer does {target} first rank first?"
    )
else:
    written = "the right next token is" if known else "the model's own greedy output (no right answer is known) writes"
    question = f"At position {position} ({at}) {written} {target}. After which sub-layer does it first rank first?"
takes = experiment_runs.attribution_seconds(sidebar, position, answer.targets[position])  # what the reveal runs
guess = predict(question, options, (sidebar, "layer_predictions"), "layer_predictions_predict", reveal_label(takes))
if guess is None:
    stop()
first = next((i for i, r in enumerate(found.target_rank[:, found.index(position)]) if r == 1), len(found.reads))
said = f" Your class said {options[guess]}: {'right' if guess == first else 'not so'}." if guess >= 0 else ""
if first < len(found.reads):
    answer_box(markdown_literal(f"It first ranks first in the row {options[first]}.{said}"), guess, guess == first)
else:
    last_rank = int(found.target_rank[-1, found.index(position)])
    st.warning(
        markdown_literal(
            f"It never ranks first, not even at the output (rank {last_rank} there): the model gets this position "
            f"wrong.{said}"
        ),
    )
rank_chart(found, position, answer, "layer_predictions_rank", present_height=360)
lens_chart(found, answer, "layer_predictions")
token_legend()  # the marks its token labels use
token = answer.targets[position]
split = experiment_runs.get_attribution(sidebar, position, token)
st.subheader("Who wrote it: the logit split into parts")
st.caption(
    f"The logit of {markdown_literal(readable(split.token))} at position {position} is {split.logit:.3f}; the parts "
    f"add up to {split.total:.4f}."
    + (
        ""
        if split.exact_all_layers
        else " Post-LN: only the last layer can be split (the Logit attribution page says why)."
    )
)
chart(figures.part_bars(split.names, split.values), "layer_predictions_bars")
st.page_link(navigation.script("logit_lens"), label="The logit lens at every position", icon=":material/layers:")
st.page_link(
    navigation.script("attribution"), label="Logit attribution, linked to the maps", icon=":material/pie_chart:"
)
page_footer()
