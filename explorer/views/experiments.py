"""The experiments' views, shared by their Explore pages and the lesson's steps: turn heads off and the effect of
every head (the read-outs, logit lens and attribution, are in views.readouts)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import experiment_runs, state
from attention_explorer.explorer.app.waiting import ask_first
from attention_explorer.explorer.experiments import ablate, replacements
from attention_explorer.explorer.figures import experiments as figures
from attention_explorer.explorer.figures import style, zoom
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson import model_words
from attention_explorer.explorer.run import output
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, sidebar_loaded
from attention_explorer.explorer.views.frame import stop
from attention_explorer.explorer.views.zoom import head_map, largest_cell
from attention_explorer.models.ablation import AblationError, Head, parse

ABLATION_PAGE = navigation.script("ablation")
SHORT = {"encoder_self": "encoder", "decoder_self": "decoder", "cross": "cross"}


def address(head: Head, kinds: int) -> str:
    """A head as the pages, the address box and the command line write it: L.H from 1, the kind first when the
    model has several."""
    return head.address if kinds == 1 else f"{SHORT[head.kind]}:{head.address}"


def label(head: Head, kinds: int) -> str:
    base = f"layer {head.layer + 1}, head {head.head + 1}"
    return base if kinds == 1 else f"{base} ({figures.KIND_TITLES[head.kind]})"


def every_head(shapes: Mapping[str, tuple[int, int]]) -> list[Head]:
    return [Head(k, i, h) for k, (n_layers, n_heads) in shapes.items() for i in range(n_layers) for h in range(n_heads)]


def _sidebar():
    return state.sidebar(st.session_state)


def _clicked_head(point: Mapping, shapes: Mapping[str, tuple[int, int]]) -> Head | None:
    data = point.get("customdata") if point else None
    if not isinstance(data, list | tuple) or len(data) < 3:
        return None
    layer, head, kind = data[:3]
    kinds = list(shapes)
    if not all(isinstance(v, int) for v in (layer, head, kind)) or not 0 <= kind < len(kinds):
        return None
    return Head(kinds[kind], layer, head)


def _toggle(shapes: Mapping[str, tuple[int, int]]):
    """A grid's on_click: the clicked head is turned off, or on again if it was off."""

    def toggled(point: Mapping) -> None:
        head = _clicked_head(point, shapes)
        if head is None:
            return
        chosen = list(st.session_state.get(state.ABLATION_HEADS, []))
        name = address(head, len(shapes))
        st.session_state[state.ABLATION_HEADS] = [a for a in chosen if a != name] if name in chosen else [*chosen, name]

    return toggled


def open_in_ablation(shapes: Mapping[str, tuple[int, int]]):
    """A grid's on_click: that head alone turned off, on the Turn heads off page."""

    def opened(point: Mapping) -> None:
        head = _clicked_head(point, shapes)
        if head is not None:
            st.session_state[state.ABLATION_HEADS] = [address(head, len(shapes))]
            st.session_state[state.DRILL_TO] = ABLATION_PAGE

    return opened


def pick_method(key: str) -> str:
    """Zero, mean or resample ablation, a radio keyed `{key}_method`, with what the chosen one writes and over which
    texts under it."""
    method = st.radio(
        "Turn off by writing",
        list(ablate.METHODS),
        format_func=ablate.METHODS.get,
        horizontal=True,
        key=f"{key}_method",
    )
    st.caption(markdown_literal(replacements.explain(sidebar_loaded(), method)))
    return method


def convention(text: str) -> None:
    """Which ablation a result used, and over which texts, under it."""
    st.caption(markdown_literal(f"{text[:1].upper()}{text[1:]}."))


def measured(loaded) -> str:
    """What turning heads off is measured by, for this model."""
    if not loaded.family.next_token_head:
        return "the sentence embedding (the mean of the last layer's states), by its cosine to the clean one"
    if loaded.family.has_source and loaded.task is None:  # no task: no right answer to score against
        return "the probability of the model's own greedy output, row by row (no right answer is known)"
    if loaded.family.has_source:
        return "the right answer's probability, row by row of the output"
    return "the probability of the right next tokens of the text (under the figures: which rows count)"


def ablation_view(key: str = "ablation") -> None:
    """Pick heads (click the grid) and an ablation; the run with them off beside the clean one."""
    loaded = sidebar_loaded()
    shapes = ablate.model_shapes(loaded)
    kinds = len(shapes)
    run = current_trace()
    options = [address(h, kinds) for h in every_head(shapes)]
    from_address(options, kinds)
    st.session_state[state.ABLATION_HEADS] = [a for a in st.session_state.get(state.ABLATION_HEADS, []) if a in options]
    method = pick_method(key)
    chosen = st.session_state[state.ABLATION_HEADS]
    if chosen:  # a copied address turns the same heads off
        st.query_params[state.URL_OFF] = ",".join(chosen)
    outcome = None
    problem = ""
    heads: tuple[Head, ...] = ()
    waiting = st.container()  # a long text's run with the heads off asks first, above the grid
    if chosen:
        try:
            heads = tuple(parse(",".join(chosen), shapes))
            what = "The text runs again with these heads off, and every layer's maps are set beside the clean run's."
            seconds = experiment_runs.outcome_seconds(_sidebar(), heads, method)
            if ask_first(what, seconds, "Run with these heads off", f"{key}_outcome_run", waiting):
                outcome = experiment_runs.get_outcome(_sidebar(), heads, method)
        except AblationError as e:
            problem = str(e)
    grids = outcome.moved if outcome is not None else {k: np.zeros(s) for k, s in shapes.items()}
    marked = [(h.kind, h.layer, h.head) for h in heads]
    st.caption(
        "Click a head to turn it off (click again to turn it on). Outlined: off. Each cell's number: how much of "
        "that head's attention moved when the outlined heads were off (0: the same map, 1: all of it elsewhere)."
    )
    chart(
        figures.head_grids(grids, "attention moved", marked=marked, diverging=False, number=".2f"),
        f"{key}_grid",
        on_click=_toggle(shapes),
        view=(f"off {', '.join(chosen)}",) if chosen else (),
        title="Attention moved with the outlined heads off",
    )
    whole_layer(shapes)
    st.multiselect(
        "Heads turned off",
        options,
        key=state.ABLATION_HEADS,
        format_func=lambda a: label(parse(a, shapes)[0], kinds),
        placeholder="click heads in the grid, or pick them here",
    )
    if problem:
        st.warning(markdown_literal(problem), icon=":material/block:")
        stop()
    if not heads:
        st.info("Pick at least one head to turn off: click its cell in the grid, or choose it above.")
        stop()
    if outcome is None:  # asked first, above the grid
        stop()
    show_outcome(loaded, run, outcome, key)


def from_address(options: list[str], kinds: int) -> None:
    """The heads the address turns off (?off=2.1,2.3), once, on the page it opened; a head this model lacks is
    named in a notice."""
    wanted = state.url_value(st.session_state, state.URL_OFF, state.ABLATION_HEADS)
    if wanted is None:
        return
    st.session_state[state.ABLATION_HEADS] = list(dict.fromkeys(a for a in wanted if a in options))
    missing = [a for a in wanted if a not in options]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        example = "cross:2.1" if kinds > 1 else "2.1"
        notice = f"The address turns off heads this model does not have ({shown}); heads are named like {example}."
        st.warning(markdown_literal(notice), icon=":material/link_off:")


def whole_layer(shapes: Mapping[str, tuple[int, int]]) -> None:
    """A picker that turns off every head of one layer of one attention kind at once (it replaces the selection): a
    model often spreads a job over a layer's heads, so no single head breaks it."""
    kinds = len(shapes)
    layers = [(kind, layer) for kind, (n_layers, _) in shapes.items() for layer in range(n_layers)]

    def named(pair: tuple[str, int]) -> str:
        kind, layer = pair
        return f"layer {layer + 1}" if kinds == 1 else f"layer {layer + 1} ({figures.KIND_TITLES[kind]})"

    def chosen() -> None:
        picked = st.session_state.get(state.ABLATION_LAYER)
        if picked is not None:
            kind, layer = picked
            st.session_state[state.ABLATION_HEADS] = [
                address(Head(kind, layer, h), kinds) for h in range(shapes[kind][1])
            ]
            st.session_state[state.ABLATION_LAYER] = None  # a picker, not a state: the selection below says what is off

    st.selectbox(
        "Turn off a whole layer",
        layers,
        index=None,
        format_func=named,
        key=state.ABLATION_LAYER,
        on_change=chosen,
        placeholder="choose a layer: all its heads go off together",
    )


def named_heads(heads: Iterable[Head], shapes: Mapping[str, tuple[int, int]]) -> str:
    """Heads named layer by layer: "layer 2, head 3", "layer 2, heads 1 and 3", "every head of layer 2", with the
    attention kind after each layer when the model has several."""
    by_layer: dict[tuple[str, int], list[int]] = {}
    for head in sorted(heads, key=lambda h: (list(shapes).index(h.kind), h.layer, h.head)):
        by_layer.setdefault((head.kind, head.layer), []).append(head.head + 1)
    parts = []
    for (kind, layer), numbers in by_layer.items():
        if len(numbers) == shapes[kind][1] and len(numbers) > 1:
            text = f"every head of layer {layer + 1}"
        elif len(numbers) == 1:
            text = f"layer {layer + 1}, head {numbers[0]}"
        else:
            text = f"layer {layer + 1}, heads {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"
        parts.append(text if len(shapes) == 1 else f"{text} ({figures.KIND_TITLES[kind]})")
    return "; ".join(parts)


def right_means(outcome: ablate.Outcome) -> tuple[float, float]:
    """The right answer's mean probability over the counted rows: every head on, and with the heads off."""
    assert outcome.before is not None and outcome.after is not None
    counted = np.array(outcome.answer.counted)
    return (
        float(outcome.before.right_probabilities()[counted].mean()),
        float(outcome.after.right_probabilities()[counted].mean()),
    )


def text_end_line(run, outcome: ablate.Outcome) -> str:
    """The model's own answer after a decoder-only text (its last row), with every head on and with the heads off."""
    assert outcome.before is not None and outcome.after is not None and outcome.predicted is not None
    answer = run.readable(outcome.before.targets[-1:])[0]
    before, after = outcome.before.right_probabilities()[-1], outcome.after.right_probabilities()[-1]
    now = run.readable(outcome.predicted[-1:])[0]
    top = "still its top token" if now == answer else f"its top token now: {now}"
    return (
        f"After the text the model answers {answer}: probability {before:.1%} with every head on, {after:.1%} with "
        f"these heads off ({top}). The last row of the charts below is that answer."
    )


def show_outcome(loaded, run, outcome: ablate.Outcome, key: str) -> None:
    """Before and after: the output, the right answer's probability and loss per row, and the maps that moved."""
    st.subheader(f"With {named_heads(outcome.heads, ablate.model_shapes(loaded))} off")
    if outcome.cosine is not None:
        st.metric("Sentence embedding: cosine to the clean one (1 = unchanged)", f"{outcome.cosine:.4f}")
    else:
        assert outcome.before is not None and outcome.after is not None
        counted = np.array(outcome.answer.counted)
        before, after = right_means(outcome)
        token = output.scored_token(outcome.answer.where)  # "right", or "greedy" where no right answer is known
        left, right = st.columns(2)
        left.metric(f"The {token} token's mean probability", f"{after:.1%}", f"{after - before:+.1%} from {before:.1%}")
        loss_before, loss_after = outcome.before.nll[counted].mean(), outcome.after.nll[counted].mean()
        right.metric(
            f"Mean -log p({token} token), nats",
            f"{loss_after:.3f}",
            f"{loss_after - loss_before:+.3f}",
            delta_color="inverse",
        )
        st.caption(markdown_literal(f"Measured against {outcome.answer.where}. " + model_words.minus_log_p(token)))
        if outcome.written is not None:
            assert run.output_tokens is not None
            st.markdown("**Every head on:** " + markdown_literal(" ".join(run.readable(run.output_tokens))))
            st.markdown("**Heads off:** " + markdown_literal(" ".join(run.readable(outcome.written))))
        if outcome.answer.text_end:  # a decoder-only text: what the model answers after it, before and after
            st.markdown(markdown_literal(text_end_line(run, outcome)))
        labels = run.readable(outcome.before.decoder_input)
        last = ""
        if outcome.answer.text_end:  # the last row names the answer it scores: '10: ␣to → ␣Anna'
            labels = (*labels[:-1], f"{labels[-1]} \u2192 {run.readable(outcome.before.targets[-1:])[0]}")
            last = " (the last: the model's own answer)"
        chart(
            figures.before_after(
                labels,
                outcome.before.right_probabilities(),
                outcome.after.right_probabilities(),
                f"p({token} token)",
                f"The {token} token's probability at each row{last}",
            ),
            f"{key}_probability",
        )
        chart(
            figures.before_after(
                labels,
                outcome.before.nll,
                outcome.after.nll,
                f"-log p({token} token), nats",
                f"-log p({token} token) at each row{last}",
                percent=False,
            ),
            f"{key}_loss",
        )
    convention(outcome.convention)
    if outcome.method == "zero":
        st.caption(model_words.ZERO_ABLATION)
    moved_maps(run, outcome, key)


def moved_maps(run, outcome: ablate.Outcome, key: str) -> None:
    """The downstream head whose map moved most (or a chosen one), before and after."""
    ranked = sorted(
        ((float(m[i, h]), Head(kind, i, h)) for kind, m in outcome.moved.items() for i, h in np.ndindex(m.shape)),
        key=lambda x: -x[0],
    )
    if not ranked or ranked[0][0] < 1e-6:
        st.caption(
            "No attention map changed: the heads turned off feed no later attention on this input (a head's "
            "own map never changes when it is turned off; only what it writes does)."
        )
        return
    kinds = len(outcome.moved)
    st.subheader("Maps downstream that changed")
    moved_heads = [h for value, h in ranked if value >= 1e-6][:24]
    head = st.selectbox(
        "Head",
        moved_heads,
        format_func=lambda h: f"{label(h, kinds)}: {outcome.moved[h.kind][h.layer, h.head]:.0%} of its attention moved",
        key=f"{key}_moved",
    )
    queries, keys = run.labels_for(head.kind)
    before = run.attention(head.kind).weights[head.layer, head.head]
    after = outcome.weights[head.kind][head.layer, head.head]
    left, right = st.columns(2)
    pair = {"narrow": True, "overview": zoom.beside(len(queries), len(keys))}  # a long pair: block means
    chart(head_heatmap(before, queries, keys, "Every head on", **pair), f"{key}_map_before", left)
    chart(head_heatmap(after, queries, keys, "Heads off", **pair), f"{key}_map_after", right)
    st.caption(f"Where the attention moved: {style.POSITIVE}, more weight with the heads off; {style.NEGATIVE}, less.")
    moved, title = after - before, "Heads off minus every head on"
    masked = head.kind == "decoder_self"
    head_map(moved, queries, keys, title, f"{key}_moved_map", largest_cell(moved), masked=masked, diverging=True)


def effect_name(effects: ablate.Effects) -> str:
    if effects.measure == "cosine":
        return "cosine change"
    return "change in log p"


def effects_grid(loaded, effects: ablate.Effects, key: str, on_click, present_height: int | None = None) -> None:
    shapes = ablate.model_shapes(loaded)
    grids = {kind: effects.grid(kind, shape) for kind, shape in shapes.items()}
    chart(
        figures.head_grids(grids, effect_name(effects), "Each head turned off alone"),
        f"{key}_grid",
        on_click=on_click,
        present_height=present_height,
    )


def effects_may_run(method: str, key: str, then: float = 0.0) -> bool:
    """Whether every head's effect may be measured in this rerun: at once when short, else once asked (its button
    keyed `key`_run), saying how many heads are left and about how long they take with what the page runs `then`."""
    done, rows, seconds = experiment_runs.effects_left(_sidebar(), method)
    seconds = seconds + then
    what = f"Every one of the {rows} heads turned off alone is one more forward over the whole text" + (
        f"; {done} are measured already, and the rest go on from there." if done else "."
    )
    button = "Go on turning heads off" if done else "Turn off every head"
    return ask_first(what, seconds, button, f"{key}_run")


def effects_view(key: str = "effects") -> None:
    """A layer x head grid: each cell, the change when that head alone is off; a sortable table; a click opens it."""
    loaded = sidebar_loaded()
    current_trace()
    shapes = ablate.model_shapes(loaded)
    method = pick_method(key)
    if not effects_may_run(method, key):
        return
    effects = experiment_runs.get_effects(_sidebar(), method)
    describe_effects(effects, method)
    st.caption("Click a head to turn it off on the Turn heads off page and see what changed.")
    effects_grid(loaded, effects, key, open_in_ablation(shapes))
    kinds = len(shapes)
    rows = [
        {"head": label(h, kinds), "address": address(h, kinds), effect_name(effects): round(change, 4)}
        for h, change in effects.ranked()
    ]
    st.dataframe(rows, hide_index=True, width="stretch", height=min(400, 36 * len(rows) + 40))


def describe_effects(effects: ablate.Effects, method: str = "zero") -> None:
    if effects.measure == "cosine":
        st.markdown(
            "Each cell: the cosine between the sentence embedding with that head off and the clean one, minus 1 "
            "(0: unchanged; more negative: the embedding moved further)."
        )
    else:
        st.markdown(
            f"Each cell: how the log-probability of {effects.where} changed when that head alone was off "
            f"(summed over its rows; with every head on it is {effects.clean:.3f}). Negative ({style.NEGATIVE}): the "
            "head helped; near 0: the model did not need it here."
        )
        st.caption(markdown_literal(f"Measured against {effects.where}."))
    if effects.convention:
        convention(effects.convention)
    if method == "zero":
        st.caption(model_words.ZERO_ABLATION)
