"""Lesson step: turn heads off. Predict which layer the model needs most (all its heads off at once), see the run
without it, then every head turned off alone."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer.app import experiment_runs, state
from attention_explorer.explorer.app.waiting import ask_first, at_once, reveal_label
from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.figures import experiments as figures
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, sidebar_loaded
from attention_explorer.explorer.views.experiments import (
    ABLATION_PAGE,
    address,
    describe_effects,
    effects_grid,
    effects_may_run,
    label,
    measured,
    open_in_ablation,
    right_means,
    show_outcome,
)
from attention_explorer.explorer.views.frame import (
    PRESENT_LAYERS,
    answer_box,
    intro,
    page_footer,
    page_header,
    predict,
    presenting,
    stop,
)
from attention_explorer.models.ablation import Head

MOST_BARS = 12  # layers drawn as bars (the most hurt); the table under them holds every layer
PRESENT_BARS = 6  # in presenter mode: each bar's label at 20 px keeps its own line on the first screen
SMALL_DROP = 0.05  # below this fall in the right answer's mean probability, no single head is needed much


def layer_name(kind: str, layer: int, kinds: int) -> str:
    return f"layer {layer + 1}" if kinds == 1 else f"layer {layer + 1} ({figures.KIND_TITLES[kind]})"


def open_layer(heads: tuple[Head, ...], kinds: int) -> None:
    """The button's on_click: those heads turned off on the Turn heads off page."""
    st.session_state[state.ABLATION_HEADS] = [address(h, kinds) for h in heads]
    st.session_state[state.DRILL_TO] = ABLATION_PAGE


def head_alone(head: Head, single: ablate.Outcome, layer_off: ablate.Outcome, name: str, kinds: int) -> None:
    """Whether one head matters on its own here, from the run with the head that matters most turned off alone."""
    if single.cosine is None:
        before, after = right_means(single)
        moves = f"moves the right answer's mean probability from {before:.1%} to {after:.1%}"
        if before - after < SMALL_DROP:
            st.info(
                markdown_literal(
                    f"No single head matters much here: the one that matters most, {label(head, kinds)}, alone only "
                    f"{moves}. The model spreads the work over several heads."
                )
            )
        else:
            st.info(markdown_literal(f"One head matters on its own here: {label(head, kinds)} alone {moves}."))
        return
    st.info(
        markdown_literal(
            f"The head that matters most alone, {label(head, kinds)}, leaves the embedding's cosine to the clean "
            f"one at {single.cosine:.4f} (the whole of {name} off: {layer_off.cosine:.4f})."
        )
    )


page_header()
loaded = sidebar_loaded()
intro(
    "The maps so far show where each head looks; they do not say what the model needs. Turn heads off (replace "
    "what they write, just before W^O, by zero) and run the sentence again: if the output gets worse, the model "
    "was using them. A model often spreads a job over a layer's heads, so this step turns off a whole layer's heads "
    f"at once first, then each head alone. Measured by {measured(loaded)}."
)
run = current_trace()
sidebar = state.sidebar(st.session_state)
shapes = ablate.model_shapes(loaded)
kinds = len(shapes)
layers = [(kind, layer) for kind, (n_layers, _) in shapes.items() for layer in range(n_layers)]
if loaded.family.has_source and loaded.task is None:  # no task: the model's own greedy output is what is scored
    question = (
        "Which layer, all its heads turned off at once, moves the model's own greedy output most? Ranked by how far "
        "that output's log-probability falls, summed over its words."
    )
elif loaded.family.has_source:
    question = (
        "Which layer, all its heads turned off at once, costs the right output most? Ranked by how far the right "
        "answer's log-probability falls, summed over its words."
    )
elif loaded.family.next_token_head:
    question = (
        "Which layer, all its heads turned off at once, hurts the next-word predictions most? Ranked by how far the "
        "log-probability of the right next words falls, summed over the rows that count."
    )
else:
    question = (
        "Which layer, all its heads turned off at once, moves the sentence embedding most? Ranked by how far its "
        "cosine to the clean embedding falls."
    )
options = [layer_name(kind, layer, kinds) for kind, layer in layers]
# what the reveal runs at once, said on it: the layers off and the most-needed layer's run, then (unless that asks
# first: the page stops there) every head off alone and the most-needed head's run; work another visit kept counts 0
layers_off = experiment_runs.layer_effects_seconds(sidebar) + experiment_runs.outcome_seconds(
    sidebar, experiment_runs.top_layer(sidebar), "zero"
)
head_off = (
    experiment_runs.outcome_seconds(sidebar, experiment_runs.top_head(sidebar, "zero"), "zero")
    if loaded.family.learned
    else 0.0
)
takes = at_once(layers_off, experiment_runs.effects_left(sidebar, "zero")[2] + head_off)
guess = predict(question, options, (sidebar, "turn_off_layer"), "turn_off_predict", reveal_label(takes))
if guess is None:
    stop()
what = f"Each of the {len(layers)} layers turned off is one more forward over the whole text."
if not ask_first(what, layers_off, "Turn off each layer", "turn_off_layers_run"):
    stop()
found = experiment_runs.get_layer_effects(sidebar)
ranked = found.ranked()
(kind, layer), change = ranked[0]
said, right = "", False
if guess >= 0:
    place = [where for where, _ in ranked].index(layers[guess]) + 1
    right = place == 1
    said = f" Your class picked {options[guess]}: it ranks {place} of {len(layers)}."
top = tuple(Head(kind, layer, h) for h in range(shapes[kind][1]))
outcome = experiment_runs.get_outcome(sidebar, top, "zero")
name = layer_name(kind, layer, kinds)
if not loaded.family.learned:  # random weights: nothing was learned, so no layer or head has a job to lose
    measure = "log-probability" if outcome.cosine is None else "cosine to the clean embedding"
    answer_box(
        markdown_literal(
            f"Turning off {name} moves the {measure} most (by {change:+.3f}). These weights are random: no layer "
            "has learned a job, so this measures only how much each layer's random mixing changes the output." + said
        ),
        guess,
        right,
    )
elif outcome.cosine is None:
    before, after = right_means(outcome)
    answer_box(
        markdown_literal(
            f"The model needs {name} most: with its {len(top)} heads off, the right answer's log-probability falls "
            f"by {-change:.3f} (summed over its rows), and its mean probability from {before:.1%} to {after:.1%}."
            + said
        ),
        guess,
        right,
    )
else:
    answer_box(
        markdown_literal(
            f"The model needs {name} most: with its {len(top)} heads off, the sentence embedding's cosine to the "
            f"clean one falls to {outcome.cosine:.4f}." + said
        ),
        guess,
        right,
    )
column = "change in log p (summed)" if found.measure == "log_probability" else "change in cosine"
drawn = ranked[: PRESENT_BARS if presenting() else MOST_BARS]
chart(
    figures.layer_bars(
        [layer_name(k, i, kinds) for (k, i), _ in drawn],
        [c for _, c in drawn],
        column,
        "Each layer, all its heads off at once",
    ),
    "turn_off_layers_chart",
)
with st.expander(f"Every layer's change ({len(ranked)})" if len(ranked) > len(drawn) else "Every layer's change"):
    st.dataframe(
        [{"layer, all heads off": layer_name(k, i, kinds), column: round(c, 4)} for (k, i), c in ranked],
        hide_index=True,
        key="turn_off_layers",
    )
st.button(
    f"Open {name} off on Turn heads off",
    on_click=open_layer,
    args=(top, kinds),
    icon=":material/block:",
    key="turn_off_open_layer",
)
show_outcome(loaded, run, outcome, "turn_off_outcome")

st.subheader("Each head turned off alone")
if not effects_may_run("zero", "turn_off_heads", head_off):
    stop()
effects = experiment_runs.get_effects(sidebar, "zero")
head, _ = effects.ranked()[0]
if loaded.family.learned:  # random weights: said above
    head_alone(head, experiment_runs.get_outcome(sidebar, (head,), "zero"), outcome, name, kinds)
deep = max(n_layers for n_layers, _ in shapes.values()) > PRESENT_LAYERS  # a deep grid scrolls rather than shrinks
effects_grid(loaded, effects, "turn_off", open_in_ablation(shapes), present_height=None if deep else 330)
describe_effects(effects)
st.page_link(ABLATION_PAGE, label="Turn any heads off yourself", icon=":material/block:")
page_footer()
