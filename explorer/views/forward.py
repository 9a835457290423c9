"""The forward pass in parts: the Forward pass page draws them all, the lesson one per step (the embedding; Add &
Norm and feed-forward). Each result is recomputed from the model's state before it and its own weights."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import streamlit as st

from attention_explorer.explorer import navigation
from attention_explorer.explorer.app import cached, state, waiting
from attention_explorer.explorer.app.callbacks import stack_to_kind
from attention_explorer.explorer.figures.forward import movement_heatmap, named_strips, preview, token_path
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.lesson.wording import activation_latex
from attention_explorer.explorer.run import forward
from attention_explorer.explorer.run import movement as stack_movement
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.explorer.views.chart import chart
from attention_explorer.explorer.views.current import current_trace, focus_start
from attention_explorer.explorer.views.pickers import pick_layer, pick_token
from attention_explorer.models.registry import LoadedModel


@dataclass(frozen=True)
class Focus:
    """The stack, token and layer followed (the lesson's focus: the stack is the focus kind's), and the trace."""

    trace: Trace
    loaded: LoadedModel
    stack: str
    tokens: tuple[str, ...]
    position: int
    layer: int


def focus(layer_picker: bool = True) -> Focus:
    """Pick the stack (from the lesson's attention kind), the token and the layer (the focus keys)."""
    trace = current_trace()
    loaded = cached.model(st.session_state[state.MODEL])
    stacks = forward.trace_stacks(trace)
    first = loaded.family.kinds[0]
    kind = st.session_state.get(state.FOCUS_KIND, first)
    if kind not in loaded.family.kinds:  # another model's kind
        kind = first
    elif state.at_start(st.session_state, state.FOCUS_KIND) and navigation.before_decoder(
        st.session_state.get(state.PAGE)
    ):
        kind = first  # an Explore page's starting cross-attention: the lesson's decoder comes later
    stack = forward.stack_of(kind)
    if len(stacks) > 1:
        st.session_state[state.FORWARD_STACK] = stack  # the focus decides; the radio's change moves the focus
        stack = st.radio(
            "Stack",
            stacks,
            format_func=str.capitalize,
            horizontal=True,
            key=state.FORWARD_STACK,
            on_change=stack_to_kind,
        )
    if kind == "cross" or forward.stack_of(kind) != stack:
        kind = "decoder_self" if stack == "decoder" else "encoder_self"  # the stack's self-attention
    tokens = trace.readable(forward.tokens(trace, stack))  # labels: as every page shows tokens
    n_layers = forward.states(trace, stack)["after_ffn"].shape[0]
    layer0, _, token0 = focus_start(kind)
    left, right = st.columns(2)
    position = pick_token(tokens, "Token", state.FOCUS_TOKEN, left, index=min(token0, len(tokens) - 1))
    layer = pick_layer(n_layers, state.FOCUS_LAYER, right, min(layer0, n_layers - 1)) if layer_picker else 0
    return Focus(trace, loaded, stack, tokens, position, layer)


def norm_text(norm: forward.Norm) -> None:
    if norm.beta is None:
        st.markdown(
            f"RMSNorm (no mean taken away, no beta): mean(x^2) = `{norm.variance:.5f}`, eps = `{norm.eps:g}`; "
            f"gamma = `{preview(norm.gamma)}`"
        )
        return
    st.markdown(
        f"LayerNorm: mean = `{norm.mean:.5f}`, variance = `{norm.variance:.5f}`, eps = `{norm.eps:g}`; "
        f"gamma = `{preview(norm.gamma)}`; beta = `{preview(norm.beta)}`"
    )


def embedding(f: Focus, number: int = 1) -> None:
    """The token's id, its embedding row, the scale, the position added (and BERT's segment row and LayerNorm)."""
    trace, loaded, stack, position = f.trace, f.loaded, f.stack, f.position
    config = loaded.model.config
    with waiting.readout(loaded, trace, stack, None, "This token's embedding"):  # admitted (issue 52)
        e = forward.embedding(loaded, trace, stack, position)
    st.subheader(f"{number}. Token, id, embedding" + ("" if e.position is None else " and position"))
    st.markdown(
        # the token as every page shows it ('␣Ben', not the tokenizer's 'ĠBen')
        f"Token {markdown_literal(repr(f.tokens[position]))} at position {position} has id **{e.token_id}**: row "
        f"{e.token_id} of "
        f"the {stack}'s embedding table ({config.d_model} values)."
    )
    if e.norm is not None:  # the BERT family
        st.latex(r"x = \mathrm{LayerNorm}\big(E[\text{id}] + P_{\text{learned}}[\text{pos}] + T[\text{type } 0]\big)")
        st.caption("BERT family: no sqrt(d_model) scale; a learned position row and the segment (token type 0) row.")
    elif e.position is None:
        st.latex(r"x = E[\text{id}]")
        st.caption(
            "Rotary positions: nothing is added to the embedding. Each layer turns its queries and keys by an angle "
            "that grows with the position instead (see Positional encoding)."
        )
    elif e.scale != 1.0:
        pos = r"PE_{\text{sinusoid}}" if e.position_kind == "sinusoidal" else r"P_{\text{learned}}"
        st.latex(
            rf"x = E[\text{{id}}] \cdot \sqrt{{d_{{model}}}} + {pos}[\text{{pos}}],\quad \sqrt{{{config.d_model}}}"
            rf" = {e.scale:.4f}"
        )
    else:
        st.latex(r"x = E[\text{id}] + P[\text{pos}]")
    rows, names = [e.row], ["embedding row E[id]"]
    if e.scale != 1.0:
        rows.append(e.scaled)
        names.append(f"x sqrt(d_model) = x {e.scale:.3f}")
    if e.token_type is not None:
        rows.append(e.token_type)
        names.append("token type 0 row")
    if e.position is not None:
        rows += [e.position, e.summed]
        names += [f"position {position} ({e.position_kind})", "sum"]
    if e.norm is not None:
        rows.append(e.norm.output)
        names.append("LayerNorm(sum)")
    chart(named_strips(rows, names, "Embedding steps"), "forward_embedding")
    if e.norm is not None:
        norm_text(e.norm)
    st.markdown(f"Input to layer 1: `{preview(e.result)}`")
    bound = forward.rounding_bound(f.loaded.model.config, len(f.tokens), e.traced)
    st.caption("Recomputed input to layer 1 " + forward.agreement(e.result, e.traced, bound) + ".")


def layer(f: Focus, number: int = 2) -> None:
    """One layer's sub-layers for the token, each with its residual connection and LayerNorm."""
    trace, loaded, stack, position, layer_index = f.trace, f.loaded, f.stack, f.position, f.layer
    config = loaded.model.config
    with waiting.readout(loaded, trace, stack, layer_index, "This token's layer, recomputed"):
        found = forward.layer(loaded, trace, stack, layer_index, position)
    bound = partial(forward.rounding_bound, config, len(f.tokens))  # float32 rounding of a row, on any CPU
    heading, equation = st.columns([1, 2], vertical_alignment="center")  # one line: the strips on the first screen
    heading.subheader(f"{number}. {stack.capitalize()} layer {layer_index + 1}")
    block = loaded.family.block  # the layer as models.anatomy describes it
    norm = rf"\mathrm{{{block.norm_name}}}"
    if block.parallel:  # both sub-layers read the same x, each through its own norm; both outputs are added to x
        equation.latex(
            rf"x' = x + \mathrm{{Attn}}({norm}_1(x)) + \mathrm{{FFN}}({norm}_2(x))\quad\text{{(parallel, pre-norm)}}"
        )
        st.caption(f"A parallel block: both sub-layers read the layer's input x, and {block.parallel_reading}.")
    elif block.norm_first and block.sandwich:  # a norm before and after each sub-layer
        equation.latex(rf"x' = x + {norm}(\mathrm{{Sublayer}}({norm}(x)))\quad\text{{(pre-norm, sandwich)}}")
    elif block.norm_first:
        equation.latex(rf"x' = x + \mathrm{{Sublayer}}({norm}(x))\quad\text{{(pre-norm)}}")
    else:
        equation.latex(rf"x' = {norm}(x + \mathrm{{Sublayer}}(x))\quad\text{{(post-LN, as in the paper)}}")
    for i, step in enumerate(found.sublayers, start=1):
        then = "Add" if step.pre_norm is not None else "Add & Norm"
        then = f"its post-norm, then {then}" if step.sandwich is not None else then
        st.markdown(f"**{i}. {step.name.capitalize()}**, then {then}")
        if step.pre_norm is not None:
            norm_text(step.pre_norm)
        if step.ffn is not None and step.ffn.up is not None:
            gated_ffn(step.ffn, config, i)
        elif step.ffn is not None:
            ffn = step.ffn
            act = "max(0, ·)" if ffn.activation == "relu" else "GELU"
            st.latex(
                rf"\mathrm{{FFN}}(x) = {activation_latex(ffn.activation)}(x W_1 + b_1) W_2 + b_2,\quad W_1 \in "
                rf"\mathbb{{R}}^{{{config.d_model} \times {config.d_ff}}}"
            )
            st.markdown(
                f"x W_1 + b_1 = `{preview(ffn.hidden)}`; after {act}: **{ffn.off_share:.1%}** of the {config.d_ff} "
                + (
                    "units are switched off (exactly 0)."
                    if ffn.activation == "relu"
                    else "units had a negative input (GELU leaves them near 0)."
                )
            )
            chart(
                named_strips([ffn.hidden, ffn.activated], ["x W1 + b1", ffn.activation], "Hidden layer (d_ff)"),
                f"forward_ffn_hidden_{i}",
            )
        else:
            st.markdown(
                f"Multi-head attention output (Concat(head_1..head_h) W^O{' + b^O' if config.out_bias else ''}, from "
                "the model's own weights and "
                f"values): `{preview(step.output)}`; "
                f"{forward.agreement(step.output, step.traced_output, bound(step.traced_output))}."
            )
        rows = [step.x, step.output, step.residual]
        names = ["x (entering)", f"{step.name} output", "x + output (residual)"]
        if step.sandwich is not None:  # sandwich norms: the output normed again before it is added
            sandwich_text(step)
            rows = [step.x, step.output, step.sandwich.output, step.residual]
            after = f"{step.sandwich.name}(output)"
            names = ["x (entering)", f"{step.name} output", f"{after} (post-norm)", f"x + {after} (residual)"]
        if step.post_norm is not None:
            rows.append(step.post_norm.output)
            names.append(f"{step.post_norm.name}(x + output)")
        added = "Add & Norm" if step.post_norm is not None else "Add"  # pre-norm: nothing after the addition
        title = f"{step.name.capitalize()} and {added}"
        title = f"{step.name.capitalize()}, its post-norm, then {added}" if step.sandwich is not None else title
        chart(named_strips(rows, names, title), f"forward_sublayer_{i}")
        if step.post_norm is not None:
            norm_text(step.post_norm)
        st.caption(f"Result {forward.agreement(step.result, step.traced, bound(step.traced))}.")
    final = forward.final_norm(loaded, trace, stack, position)
    if final is not None:
        st.markdown(f"**Final {final.name}** (pre-norm stacks end with one):")
        norm_text(final)


def sandwich_text(step: forward.Sublayer) -> None:
    """A sandwich norm in this token's numbers: how big the output is before and after it, then the norm itself."""
    assert step.sandwich is not None
    rms = [float((v.astype(np.float64) ** 2).mean() ** 0.5) for v in (step.output, step.sandwich.output, step.x)]
    st.markdown(
        f"Post-norm (a sandwich norm): the {step.name} output's root mean square is `{rms[0]:.4g}`; its "
        f"{step.sandwich.name} rescales it to `{rms[1]:.4g}` before it is added to x (root mean square `{rms[2]:.4g}`)."
    )
    norm_text(step.sandwich)


def gated_ffn(ffn: forward.FeedForwardWalkthrough, config, i: int) -> None:
    """The gated feed-forward (SwiGLU): the gate's activation scales each unit of the up projection."""
    assert ffn.up is not None
    st.latex(
        rf"\mathrm{{FFN}}(x) = \big({activation_latex(ffn.activation)}(x W_{{gate}}) \odot x W_{{up}}\big) W_{{down}},"
        rf"\quad W_{{gate}}, "
        rf"W_{{up}} \in \mathbb{{R}}^{{{config.d_model} \times {config.d_ff}}}"
    )
    st.markdown(gate_text(ffn, config.d_ff))
    chart(
        named_strips(
            [ffn.hidden, ffn.up, ffn.activated],
            ["x W_gate", "x W_up", "act(x W_gate) * x W_up"],
            "Hidden layer (d_ff)",
        ),
        f"forward_ffn_hidden_{i}",
    )


def gate_text(ffn: forward.FeedForwardWalkthrough, d_ff: int) -> str:
    """What the gate's activation does to a negative gate, in this layer's own numbers: it shrinks it, never to 0 (its
    lowest value is ffn.floor), and the units with one still carry a share of what W_down reads."""
    act = "SiLU(z) = z sigmoid(z)" if ffn.activation in ("silu", "swish") else f"{ffn.activation}(z)"
    lowest, at = ffn.floor
    if lowest == 0:  # a ReLU gate: a negative gate passes nothing
        return (
            f"Gated feed-forward: x W_gate = `{preview(ffn.hidden)}`; x W_up = `{preview(ffn.up)}`. {act} sets a "
            f"negative z to 0: **{ffn.off_share:.1%}** of the {d_ff} units have a negative gate and pass nothing of "
            "x W_up on."
        )
    return (
        f"Gated feed-forward: x W_gate = `{preview(ffn.hidden)}`; x W_up = `{preview(ffn.up)}`. {act} shrinks a "
        f"negative z without zeroing it (its lowest value is {lowest:.2f}, at z = {at:.2f}): "
        f"**{ffn.off_share:.1%}** of the {d_ff} units have a negative gate and pass a small, sign-flipped share of "
        f"x W_up on; together they carry **{ffn.negative_carry:.1%}** of sum |act(x W_gate) * x W_up|, what "
        "W_down reads."
    )


def movement(f: Focus, number: int = 3) -> None:
    """How far each sub-layer moves each token, across every layer."""
    trace, stack, position, tokens = f.trace, f.stack, f.position, f.tokens
    st.subheader(f"{number}. How far each sub-layer moves each token")
    moved = stack_movement.movement(trace, stack)
    chart(
        token_path(
            moved.norms[:, :, position],
            moved.cosine[:, :, position],
            float(moved.input_norms[0, position]),
            moved.names,
            tokens[position],
        ),
        "forward_path",
    )
    st.caption("Cosine 1: the sub-layer left the direction of the layer's input as it was; lower: it turned it.")
    chart(
        movement_heatmap(
            moved.change, moved.names, tokens, "|state after - state before| for every sub-layer and token"
        ),
        "forward_movement",
    )
