"""One head's computation for one query, in parts: the Q/K/V page draws them all, the lesson one per step (query,
key and value; scores, scale, mask and softmax; weighted sum, heads and W^O). Every number is the model's own."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import streamlit as st

from attention_explorer.explorer.app import cached, state
from attention_explorer.explorer.figures.labels import markdown_literal, position_label, position_labels
from attention_explorer.explorer.figures.walkthrough import (
    masked_scores,
    per_key_bars,
    vector_strip,
)
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.lesson.wording import scaling_note
from attention_explorer.explorer.run import forward, positions, walkthrough
from attention_explorer.explorer.views import qkv_matrices
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import Chosen, focus_start, sidebar_family
from attention_explorer.explorer.views.frame import answer_box, predict, presenting
from attention_explorer.explorer.views.pickers import (
    SEARCH,
    SEARCH_HELP,
    kind_name,
    pick_attention,
    pick_head,
    pick_layer,
    pick_token,
)
from attention_explorer.explorer.views.qkv_matrices import key_value_head, sharing_text
from attention_explorer.models.anatomy import describe

SHOWN = 8  # values of a long vector shown inline; all of them are in the download
RAW_PX = 220  # the raw scores' bars at most this tall, as in presenter mode: the scaled ones under them follow


@dataclass(frozen=True)
class Focus:
    """What the parts draw: the chosen attention, the head's steps for the query, and which keys are drawn."""

    chosen: Chosen
    steps: walkthrough.HeadWalkthrough
    shown: np.ndarray | None  # the keys drawn (None: every key)

    @property
    def keys(self) -> tuple[str, ...]:
        return self.chosen.keys

    @property
    def queries(self) -> tuple[str, ...]:
        return self.chosen.queries

    @property
    def view(self) -> tuple[str, ...]:
        """What a download names: the kind, layer, head and query token ('query 3: cat')."""
        s = self.steps
        query = f"query {position_label(s.query, self.queries[s.query])}"
        return (kind_name(s.kind), f"layer {s.layer + 1}", f"head {s.head + 1}", query)


def pick_keys(s: walkthrough.HeadWalkthrough, keys: tuple[str, ...], kind: str) -> np.ndarray | None:
    """Past ALL_KEYS keys: which keys the bars and strips draw (None: every key). Values never change."""
    if len(keys) <= walkthrough.ALL_KEYS:
        return None
    # folded (the charts' titles say how many are drawn), so the step's figure fits on the first screen
    where = st.expander(f"Which of the {len(keys)} keys are drawn")
    left, middle, right = where.columns([2, 2, 3])
    window = left.radio(
        "Keys drawn",
        ["strongest", "window"],
        format_func={"strongest": "the strongest (and the query)", "window": "a window around a key"}.get,
        key="qkv_keys_mode",
        horizontal=True,
    )
    n = middle.slider("How many keys", 8, 40, 16, key="qkv_keys_n")
    if window == "window":
        if st.session_state.get(state.QKV_KEYS_CENTER) not in range(len(keys)):
            st.session_state.pop(state.QKV_KEYS_CENTER, None)  # a shorter sentence
        around = min(s.query, len(keys) - 1) if kind != "cross" else int(np.argmax(s.weights))
        center = right.selectbox(
            "Around key",
            range(len(keys)),
            around,
            format_func=position_labels(keys).__getitem__,
            key=state.QKV_KEYS_CENTER,
            filter_mode=SEARCH,
            help=SEARCH_HELP,
        )
        picked = walkthrough.window_keys(len(keys), center, n)
    else:
        keep = (s.query,) if kind != "cross" else ()
        picked = walkthrough.strongest_keys(s.weights, n, keep=keep, visible=s.mask)
    if not presenting():  # the charts' titles say it too
        where.caption(
            f"{len(keys)} keys: the charts draw {len(picked)} of them; the light line above each bar chart and the "
            "CSV download hold every key."
        )
    return picked


def focus(keys_picker: bool = True) -> Focus:
    """The attention kind, layer, head and query token (the lesson's focus: state.FOCUS), and the head's steps."""
    chosen = pick_attention("qkv", words=False)
    layer0, head0, query0 = focus_start(chosen.kind)  # a content word's strongest link
    c1, c2, c3 = st.columns(3)
    layer = pick_layer(chosen.attention.n_layers, state.FOCUS_LAYER, c1, layer0)
    head = pick_head(chosen.attention.n_heads, state.FOCUS_HEAD, c2, index=head0)
    query = pick_token(chosen.queries, "Query token", state.FOCUS_TOKEN, c3, index=query0)
    config = cached.model(st.session_state[state.MODEL]).model.config
    # the layer read once and kept for its query: a head change waits for nothing, a layer change for that layer only
    rows = cached.get_query_walkthrough(state.sidebar(st.session_state), chosen.kind, layer, query)
    s = walkthrough.head_steps(rows, head)
    s = dataclasses.replace(s, x_query_source=wording.attention_input(config, chosen.kind, layer))  # as it computes
    return Focus(chosen, s, pick_keys(s, chosen.keys, chosen.kind) if keys_picker else None)


def preview(vector: np.ndarray) -> str:
    shown = ", ".join(f"{x:.4f}" for x in vector[:SHOWN])
    return f"[{shown}{', ...' if vector.size > SHOWN else ''}]  ({vector.size} values)"


def projections(f: Focus, matrices: bool = False, number: int = 1) -> None:
    """The input row and its projection to q, k and v; with `matrices` (the lesson's step), the formula and W^Q,
    W^K, W^V themselves first, then the row they multiply."""
    s, head = f.steps, f.steps.head
    loaded = cached.model(st.session_state[state.MODEL])
    config = loaded.model.config
    norm = forward.attention_norm(loaded, s.kind, s.layer)  # pre-norm: q, k, v are projected from Norm(x), not x
    norm_name = loaded.family.block.norm_name if norm is not None else ""
    multiplied = f"{norm_name}(x)" if norm_name else "x"  # the row W^Q multiplies, as the page names it
    # the rows W^Q multiplies are the stream's d_model wide; the heads side by side are n_heads x d_head (s.d_model,
    # the same in the paper; Gemma 3: 640 and 4 x 256)
    formula = projection_formula(config, head, config.d_model, s.d_head, norm_name, s.kind)
    if matrices:
        heading, equation = st.columns([2, 3], vertical_alignment="center")  # one line: the figure on the screen
        heading.subheader(f"{number}. The head's own W^Q, W^K, W^V")
        equation.latex(formula)
        qkv_matrices.draw(loaded, s, f.view)
        number += 1
    st.subheader(f"{number}. The input row")
    st.markdown(f"x = {s.x_query_source}, row {s.query}: `{preview(s.x_query)}`")
    if norm is not None:
        normed = forward.layer_norm(s.x_query, norm).output  # what the model's own norm hands the projections
        st.markdown(f"{multiplied}, what W^Q multiplies: `{preview(normed)}`")
    if note := wording.pre_ln_note(config):
        st.caption(note)
    st.subheader(f"{number + 1}. {'Multiply' if matrices else 'Project'} to q, k, v")
    if not matrices:
        st.latex(formula)
    keys_normed = f", each through the same {norm_name} first" if norm_name and s.kind != "cross" else ""
    st.markdown(f"Keys and values come from {s.x_keys_source}{keys_normed}. q = `{preview(s.q)}`")
    if config.qkv_bias:
        st.caption(
            "This model's projections each have a bias (b^Q, b^K, b^V), which the paper's formulas do not write "
            "(section 3.2.2: Q W^Q_i, no bias): recomputing q as x W^Q alone is off by that bias."
        )
    else:
        st.caption("This model's projections have no bias (no b^Q, b^K, b^V).")
    if len(s.sharing) > 1:
        st.info(sharing_text(s.sharing) + ".")
    if s.q_unrotated is not None:
        st.markdown(
            f"Rotary positions: q is {multiplied} W^Q turned by its position ({s.query}); each key is turned by its "
            "own. "
            f"Before turning, q = `{preview(s.q_unrotated)}`: {turned_words(loaded, s.d_head)}, so q . k_j "
            "depends on the two tokens and on how far apart they are."
        )
        chart(
            vector_strip(s.q_unrotated, [f.queries[s.query]], f"{multiplied} W^Q, before rotation"),
            "qkv_q_unrotated",
            view=f.view,
        )
    if s.q_before_norm is not None:  # QK-norm (models.anatomy.Anatomy.qk_norm): each head's q and k normed
        name = sidebar_family().block.norm_name
        st.markdown(
            f"QK-norm: W^Q and W^K write q and k, then each head's q and each key go through an {name} over the "
            f"head's {s.d_head} dimensions (with its own gain) before the scores, so q . k_j cannot grow with the "
            f"size of what W^Q and W^K wrote. Before the norm, q = `{preview(s.q_before_norm)}`."
        )
        before = vector_strip(s.q_before_norm, [f.queries[s.query]], "q before its norm")
        chart(before, "qkv_q_before_norm", view=f.view)
        chart(
            vector_strip(s.k_before_norm, f.keys, "K before its norm (one row per key)", f.shown),
            "qkv_k_before_norm",
            view=f.view,
        )
    chart(vector_strip(s.q, [f.queries[s.query]], "q"), "qkv_q", view=f.view)
    chart(vector_strip(s.k, f.keys, "K (one row per key)", f.shown), "qkv_k", view=f.view)
    chart(vector_strip(s.v, f.keys, "V (one row per key)", f.shown), "qkv_v", view=f.view)


def turned_words(loaded, d_head: int) -> str:
    """What rotary turns of a head's d_head dimensions: every pair, or (partial rotary) the first pairs only."""
    turned = positions.turned_dims(loaded)
    if turned == d_head:
        return "each pair of dimensions keeps its length, only its angle changes"
    return (
        f"only its first {turned} of {d_head} dimensions turn ({turned // 2} pairs, each keeping its length, only "
        f"its angle changes); the other {d_head - turned} pass unturned"
    )


def projection_formula(
    config, head: int, d_model: int, d_head: int, norm_name: str = "", kind: str = "encoder_self"
) -> str:
    """The head's projections as LaTeX: with biases or without, turned by position where the model is rotary; with
    `norm_name` (a pre-norm layer's RMSNorm or LayerNorm) the rows it multiplies are normalised first (in
    cross-attention the query's only: keys and values are the encoder's output as it is)."""
    block = describe(config)
    rotary = block.positions.rotary
    # W^Q is the query head's own; W^K and W^V its key/value head's (grouped-query attention: shared by a group)
    owner = {"Q": head + 1, "K": key_value_head(config, head) + 1, "V": key_value_head(config, head) + 1}

    def term(name: str, x: str) -> str:
        n = owner[name]
        if norm_name and (name == "Q" or kind != "cross"):
            x = rf"\mathrm{{{norm_name}}}({x})"
        plain = rf"{x} W^{name}_{{{n}}}" + (rf" + b^{name}_{{{n}}}" if config.qkv_bias else "")
        if block.qk_norm and name in "QK":  # QK-norm: each head's q and k normed again, before rotary
            plain = rf"\mathrm{{{block.norm_name}}}({plain})"
        return rf"R_{{\text{{pos}}}}({plain})" if rotary and name in "QK" else plain

    shapes = rf"\qquad W^Q, W^K, W^V \in \mathbb{{R}}^{{{d_model} \times {d_head}}}"
    if norm_name or rotary:  # one a line: on one, a pre-norm rotary model's ran past its column
        return (
            rf"\begin{{aligned}} q &= {term('Q', 'x')} \\ k_j &= {term('K', 'x_j')} \\ v_j &= {term('V', 'x_j')}"
            rf"\end{{aligned}}{shapes}"
        )
    return rf"q = {term('Q', 'x')},\; k_j = {term('K', 'x_j')},\; v_j = {term('V', 'x_j')}{shapes}"


def score_formula(s) -> str:
    """The score and its scale as the model computes them: / sqrt(d_k), or / sqrt(s) with the model's own scalar."""
    divisor = s.scale_divisor
    if abs(divisor - s.d_head) <= 1e-3 * s.d_head:  # the paper's scale (d_k = d_head), to float32's rounding
        return r"\text{score}_j = q \cdot k_j \qquad \frac{q \cdot k_j}{\sqrt{d_k}},\ d_k = " + str(s.d_head)
    said = f"{round(divisor)}" if abs(divisor - round(divisor)) < 1e-3 else f"{divisor:.4g}"
    return (
        r"\text{score}_j = q \cdot k_j \qquad \frac{q \cdot k_j}{\sqrt{s}},\ s = "
        + said
        + r"\ \text{(this model's own scale; } d_k = "
        + str(s.d_head)
        + r"\text{)}"
    )


def scores(f: Focus, number: int = 3, ask: bool = False) -> None:
    """Score every key, scale, mask, softmax; with `ask`, the class predicts the strongest key before the weights."""
    s, keys, shown = f.steps, f.keys, f.shown
    formula = score_formula(s)
    if not ask:  # the lesson's step is titled so already
        st.subheader(f"{number}. Score, scale, mask, softmax")
        st.latex(formula)
    else:
        visible = [j for j in range(len(keys)) if s.mask[j]]
        labels = [position_label(j, keys[j]) for j in visible]
        query = position_label(s.query, f.queries[s.query])
        context = (state.sidebar(st.session_state), s.kind, s.layer, s.head, s.query)
        guess = predict(
            f"After the softmax, which key will query {query!r} (layer {s.layer + 1}, head {s.head + 1}) give the "
            "most weight?",
            labels,
            context,
            "scores_predict",
        )
        if guess is None:  # the scores would give the answer away: they come with it
            st.latex(formula)
            return
        best = int(np.argmax(s.weights))
        said = visible[guess] if guess >= 0 else None
        verdict = "right" if said == best else "not the model's choice"
        answer, equation = st.columns([3, 2], vertical_alignment="center")  # one row: the bars on the first screen
        equation.latex(formula)
        answer_box(
            markdown_literal(
                f"The model gives {position_label(best, keys[best])!r} the most weight: {s.weights[best]:.4f}."
                + (
                    f" Your class said {labels[guess]!r} ({s.weights[said]:.4f}): {verdict}."
                    if said is not None
                    else ""
                )
            ),
            guess,
            said == best,
            answer,
        )
    raw = per_key_bars(s.raw_scores, keys, "q . k_j", s.mask, shown=shown)
    raw.update_layout(height=min(raw.layout.height, RAW_PX))  # under the class's answer on the first screen
    chart(raw, "qkv_raw", view=f.view)
    chart(
        per_key_bars(s.scaled_scores, keys, f"q . k_j / sqrt({s.d_head})", s.mask, shown=shown),
        "qkv_scaled",
        view=f.view,
    )
    if not s.mask.all():
        hidden = int((~s.mask).sum())
        st.markdown(
            f"The mask hides {hidden} key(s) (grey; their bars above show the score before masking). Before the "
            "softmax the model replaces each hidden score by the lowest float32 number, -3.4e38 (in effect minus "
            "infinity), so they get weight exactly 0."
        )
        chart(
            masked_scores(s.masked_scores, s.mask, keys, "after the mask: what the softmax sees", shown),
            "qkv_masked",
            view=f.view,
        )
    chart(
        per_key_bars(s.weights, keys, "softmax weights (the model's)", s.mask, shown=shown),
        "qkv_weights",
        view=f.view,
        present_height=300,
    )

    # a toggle, not an expander: a closed expander's contents are still built and sent on every rerun
    if st.toggle("What if: change the softmax temperature (not the model's computation)", key="qkv_what_if_on"):
        temperature = st.slider("Temperature T", 0.1, 5.0, 1.0, 0.1, key="qkv_temperature")
        what_if = walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, temperature)
        st.caption(
            "softmax(scores / T): T < 1 sharpens, T > 1 flattens. T = 1 is the model: it always uses T = 1. "
            + scaling_note(s.d_head, float(s.scaled_scores[s.mask].std()))
        )
        what_if_bars = per_key_bars(
            s.weights, keys, "model (T = 1) vs what-if", s.mask, what_if, f"T = {temperature}", shown=shown
        )
        chart(what_if_bars, "qkv_what_if", view=f.view)


def heads(f: Focus, number: int = 4) -> None:
    """Weight the values and sum (the head's output z), then concatenate every head and multiply by W^O."""
    s, keys, shown = f.steps, f.keys, f.shown
    n_heads = f.chosen.attention.n_heads
    st.subheader(f"{number}. Weight the values and sum: this head's output z")
    chart(
        vector_strip(s.weighted_values, keys, "weight_j x v_j", shown), "qkv_weighted", view=f.view, present_height=300
    )
    chart(vector_strip(s.z, [f"z (head {s.head + 1})"], "z = sum_j weight_j v_j"), "qkv_z", view=f.view)

    st.subheader(f"{number + 1}. Concatenate the heads and multiply by W^O")
    loaded = cached.model(st.session_state[state.MODEL])
    bias = " + b^O" if loaded.model.config.out_bias else ""
    st.latex(
        rf"\text{{MultiHead}} = \text{{Concat}}(z_1, \dots, z_{{{n_heads}}})\, W^O{bias},"
        rf"\quad W^O \in \mathbb{{R}}^{{{s.d_model} \times {loaded.model.config.d_model}}}"
    )
    st.markdown(
        f"This head fills dimensions {s.head * s.d_head} to {(s.head + 1) * s.d_head - 1} of the concatenation."
    )
    chart(vector_strip(s.concat, ["concat"], "Concat of every head's z"), "qkv_concat", view=f.view)
    after = "before the residual" if loaded.family.block.norm_first else "before the residual and LayerNorm"
    chart(vector_strip(s.output, ["output"], f"After W^O ({after})"), "qkv_output", view=f.view)


def download(f: Focus) -> None:
    st.download_button(  # written only when clicked (a partial, not a lambda: it keeps no page globals)
        "Download every value (CSV)",
        functools.partial(walkthrough.to_csv, f.steps),
        file_name="qkv_walkthrough.csv",
        mime="text/csv",
        key="qkv_download",
        on_click="ignore",
    )
