"""Lesson step: turn a head off. Predict which head the model needs most, then see every head's effect and the run
with the most needed one off."""

from __future__ import annotations

import streamlit as st

from explorer import ablate, cached, state
from explorer.figures.labels import markdown_literal
from explorer.pages._experiments import (
    describe_effects,
    effects_grid,
    every_head,
    label,
    measured,
    open_in_ablation,
    right_means,
    show_outcome,
)
from explorer.pages._shared import (
    PRESENT_LAYERS,
    current_trace,
    intro,
    page_footer,
    page_header,
    predict,
    sidebar_loaded,
    stop,
)

SMALL_DROP = 0.05  # below this fall in the right answer's mean probability, no single head is needed much

page_header()
loaded = sidebar_loaded()
intro(
    "The maps so far show where each head looks; they do not say what the model needs. Turn a head off (replace "
    "what it writes, just before W^O, by zero) and run the sentence again: if the output gets worse, the model "
    f"was using that head. Measured by {measured(loaded)}."
)
run = current_trace()
sidebar = state.sidebar(st.session_state)
shapes = ablate.model_shapes(loaded)
heads = every_head(shapes)
if loaded.family.has_source:
    question = "Which head, turned off alone, breaks the output most?"
elif loaded.family.next_token_head:
    question = "Which head, turned off alone, hurts the next-word predictions most?"
else:
    question = "Which head, turned off alone, moves the sentence embedding most?"
guess = predict(question, [label(h, len(shapes)) for h in heads], (*sidebar, "turn_off"), "turn_off_predict")
if guess is None:
    stop()
effects = cached.get_effects(*sidebar, "zero")
ranked = effects.ranked()
top, change = ranked[0]
if guess >= 0:
    place = [h for h, _ in ranked].index(heads[guess]) + 1
    st.markdown(
        markdown_literal(f"Your class picked {label(heads[guess], len(shapes))}: it ranks {place} of {len(heads)}.")
    )
st.success(markdown_literal(f"The model needs {label(top, len(shapes))} most here."))
deep = max(layers for layers, _ in shapes.values()) > PRESENT_LAYERS  # a deep grid scrolls rather than shrinks
effects_grid(loaded, effects, "turn_off", open_in_ablation(shapes), present_height=None if deep else 330)
describe_effects(effects)
outcome = cached.get_outcome(*sidebar, (top,), "zero")
if outcome.cosine is None:
    before, after = right_means(outcome)
    if before - after < SMALL_DROP:
        st.info(
            f"Even this head, turned off alone, moves the right answer's mean probability only from {before:.1%} "
            f"to {after:.1%}: the model does not depend on any one head here. Turn off a whole layer on the Turn "
            "heads off page to see what its heads do together."
        )
show_outcome(loaded, run, outcome, "turn_off_outcome")
st.page_link("explorer/pages/ablation.py", label="Turn any heads off yourself", icon=":material/block:")
page_footer()
