"""Train it yourself: a toy encoder-decoder trained from scratch here, with its loss and its alignment live."""

from __future__ import annotations

import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, gpu, state, waiting
from attention_explorer.explorer.experiments import training
from attention_explorer.explorer.experiments.training import Run, Snapshot
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.style import styled
from attention_explorer.explorer.figures.training import head_scores, loss_curve
from attention_explorer.explorer.lesson.model_words import loss_name, recipe_summary
from attention_explorer.explorer.lesson.wording import (
    learning_rate_formula,
    optimiser_and_dropout,
    recipe_departures,
    run_length,
)
from attention_explorer.explorer.run import admission, device_books
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.frame import intro, page_footer, page_header, presenting
from attention_explorer.explorer.views.offers import not_the_sidebar_model
from attention_explorer.models import tasks, train
from attention_explorer.models.tokenize import TokenizeError

DEFAULT_STEPS = 600  # the Steps box's starting value: a run short enough to watch (RECIPES train far longer)
REFRESH_SECONDS = 1.0  # train this long between screen updates: redrawing more often costs the browser's CPU

page_header("Train it yourself")
intro(
    "Train a small model from random weights on a toy task, with the paper's optimiser (section 5: Adam with "
    "warm-up) and each task's own label smoothing and dropout, listed under the task. For the encoder-decoder tasks, "
    "watch the loss fall and, in the snapshots, the "
    "cross-attention of the last decoder layer: with enough steps it may line up into the task's alignment (for "
    "*reverse* the anti-diagonal, for *translate* the adjectives crossing behind their noun). For *induction*, a "
    "two-layer decoder-only model learns to predict the repeat of a random word sequence: watch each head's "
    "induction and previous-token scores beside the loss, which drops suddenly when the induction head forms. When "
    "it stops, your model joins the sidebar's model list."
)
not_the_sidebar_model()  # a pretrained model in the sidebar was trained elsewhere: this page trains a toy


def publish(run: Run) -> None:
    st.session_state.setdefault(state.TRAINED, {})[run.key] = run.publish()


def start() -> None:
    try:
        run = Run(
            st.session_state[state.TRAIN_TASK],
            int(st.session_state[state.TRAIN_STEPS]),
            int(st.session_state[state.TRAIN_EVERY]),
            st.session_state[state.TRAIN_PROBE],
            int(st.session_state[state.TRAIN_SEED]),
            gpu.device(),  # the server's device: the toy model trains where every model runs
        )
    except (TokenizeError, ValueError) as e:
        st.session_state[state.TRAIN_ERROR] = str(e)
        return
    st.session_state[state.TRAIN_ERROR] = ""
    run.running = True
    st.session_state[state.TRAIN_RUN] = run


def stop() -> None:
    run = st.session_state.get(state.TRAIN_RUN)
    if run is not None and run.running:
        run.running = False
        publish(run)


def explore() -> None:
    run = st.session_state[state.TRAIN_RUN]
    loaded = st.session_state[state.TRAINED][run.key]
    state.keep(st.session_state, state.MODEL, run.key)
    state.keep(st.session_state, state.TEXT, run.probe)
    state.keep(st.session_state, state.MAX_TOKENS, min(int(st.session_state[state.MAX_TOKENS]), loaded.max_tokens))


def default_steps(task_name: str) -> int:
    """The Steps box's start: a short run for the encoder-decoders, the whole recipe for induction (its head forms
    late in the run, and the run is short)."""
    return train.RECIPES[task_name].steps if tasks.get(task_name).decoder_only else DEFAULT_STEPS


def new_task() -> None:
    st.session_state[state.TRAIN_PROBE] = tasks.get(st.session_state[state.TRAIN_TASK]).example
    st.session_state[state.TRAIN_STEPS] = default_steps(st.session_state[state.TRAIN_TASK])


run: Run | None = st.session_state.get(state.TRAIN_RUN)
running = run is not None and run.running
task_col, steps_col, every_col, seed_col = st.columns(4)
if state.TRAIN_TASK not in st.session_state:  # the sidebar's toy model's task first (e.g. induction)
    sidebar_task = cached.model(st.session_state[state.MODEL]).family.task
    st.session_state[state.TRAIN_TASK] = sidebar_task if sidebar_task in tasks.TASKS else next(iter(tasks.TASKS))
task_col.selectbox("Task", list(tasks.TASKS), key=state.TRAIN_TASK, on_change=new_task, disabled=running)
st.session_state.setdefault(state.TRAIN_PROBE, tasks.get(st.session_state[state.TRAIN_TASK]).example)
st.session_state.setdefault(state.TRAIN_STEPS, default_steps(st.session_state[state.TRAIN_TASK]))
steps_col.number_input("Steps", 10, 20000, step=50, key=state.TRAIN_STEPS, disabled=running)
every_col.number_input("Snapshot every", 5, 5000, 50, step=5, key=state.TRAIN_EVERY, disabled=running)
seed_col.number_input("Seed", 0, 2**31 - 1, 0, key=state.TRAIN_SEED, disabled=running)
st.text_input("Sentence to watch", key=state.TRAIN_PROBE, max_chars=500, disabled=running)
task_name = st.session_state[state.TRAIN_TASK]
decoder_only = tasks.get(task_name).decoder_only
st.caption(tasks.get(task_name).description + " " + recipe_summary(task_name))
st.caption(run_length(task_name, int(st.session_state[state.TRAIN_STEPS]), default_steps(task_name)))
st.caption(
    "Where this recipe departs from the paper's (section 5): "
    + "; ".join(recipe_departures(task_name, int(st.session_state[state.TRAIN_STEPS])))
    + ". The learning rate follows eq. 3, drawn beneath the loss:"
)
st.latex(learning_rate_formula(task_name))
st.caption(optimiser_and_dropout(*training.adam_settings(), training.dropout(task_name)))

buttons = st.columns([1, 1, 6])
buttons[0].button("Train", type="primary", on_click=start, disabled=running, key="train_start")
buttons[1].button("Stop", on_click=stop, disabled=not running, key="train_stop")
if st.session_state.get(state.TRAIN_ERROR):
    st.error(st.session_state[state.TRAIN_ERROR])


def show_snapshot(snapshot: Snapshot, key: str) -> None:
    if snapshot.trace.decoder_only:
        show_heads(snapshot, key)
        return
    st.markdown(f"**Step {snapshot.step}**: cross-attention of the last decoder layer, mean over heads")
    chart(head_heatmap(snapshot.alignment, snapshot.trace.target_tokens, snapshot.trace.source_tokens), key)
    st.text("Output: " + snapshot.output)


def show_heads(snapshot: Snapshot, key: str) -> None:
    """A decoder-only snapshot: the head with the highest induction score and the one with the highest
    previous-token score, side by side, and the next word predicted after each word of the probe."""
    tokens = snapshot.trace.source_tokens
    st.markdown(f"**Step {snapshot.step}**: the two heads an induction circuit needs, on the probe text")
    columns = st.columns(2)
    for which, (column, name) in enumerate(zip(columns, ("induction", "previous-token"), strict=True)):
        layer, head = snapshot.strongest(which)
        score = float(snapshot.scores[which][layer, head])
        title = f"Highest {name} score: layer {layer + 1}, head {head + 1} ({score:.0%})"
        chart(
            head_heatmap(snapshot.head_map(layer, head), tokens, tokens, title, narrow=True), f"{key}_{which}", column
        )
    st.text("Predicts after each word: " + snapshot.predicted)


if run is not None and run.running:
    seconds, needed = run.needs()  # one training run per server at a time: the gate's lane for training
    try:
        # on a GPU its books admit what training adds there (explorer/app/gpu.py; nothing on the CPU)
        with waiting.queued(admission.Cost(seconds, needed, "train"), run.device_bytes()):
            bar = st.progress(run.step / run.steps, text=f"training step {run.step} of {run.steps}")
            live_curve, latest = st.empty(), st.empty()
            shown = 0  # snapshots drawn so far
            while run.running and not run.finished:
                run.advance_for(REFRESH_SECONDS)
                last = run.trainer.history[-1]
                loss = loss_name(run.trainer.recipe.label_smoothing)
                bar.progress(
                    run.step / run.steps, text=f"training step {run.step} of {run.steps}: {loss} {last.loss:.3f}"
                )
                with live_curve.container():
                    smoothed = run.trainer.recipe.label_smoothing > 0
                    st.plotly_chart(
                        styled(loss_curve(*run.curve(), run.schedule(), smoothed), presenting()),
                        key=f"train_curve_{run.step}",
                    )
                    if decoder_only:
                        st.plotly_chart(
                            styled(head_scores(*run.head_scores()), presenting()), key=f"train_heads_{run.step}"
                        )
                if len(run.snapshots) != shown:
                    shown = len(run.snapshots)
                    with latest.container():
                        show_snapshot(run.snapshots[-1], f"train_live_{run.step}")
    except admission.Refused as refused:  # it could not fit even alone: said above the buttons, nothing trained
        run.running = False
        del st.session_state[state.TRAIN_RUN]
        what = "This training run"
        gpu_refused = isinstance(refused, device_books.DeviceRefused)
        line = gpu.refusal_line(refused, None, what) if gpu_refused else waiting.refusal_line(refused, None, what)
        st.session_state[state.TRAIN_ERROR] = line
        st.rerun()
    run.running = False
    publish(run)
    st.rerun()  # the sidebar lists the new model

if run is not None:
    state_text = "finished" if run.finished else "stopped"
    # drawn again with the run's own step: the live bar last showed the step before Stop's final chunk of steps
    st.progress(run.step / run.steps, text=f"training step {run.step} of {run.steps}")
    st.success(
        f"Training {state_text} at training step {run.step} of {run.steps}. Your model is in the sidebar's model "
        f"list as '{st.session_state[state.TRAINED][run.key].title}'."
    )
    if st.button("Explore it in the other pages", on_click=explore, key="train_explore"):
        st.switch_page(navigation.script("decoding"))  # the decoder's steps show a toy model best
    chart(loss_curve(*run.curve(), run.schedule(), run.trainer.recipe.label_smoothing > 0), "train_curve")
    if run.task.decoder_only:
        chart(head_scores(*run.head_scores()), "train_head_scores")
        st.caption(
            "Each line is one head's score on the probe text at each snapshot: induction, the weight a word of the "
            "repeat puts on the word after its first occurrence; previous token, the weight on the word just before."
        )
    steps = [s.step for s in run.snapshots]
    chosen = st.select_slider("Snapshot at step", steps, value=steps[-1], key="train_snapshot")
    show_snapshot(run.snapshots[steps.index(chosen)], "train_snapshot_figure")
page_footer()
