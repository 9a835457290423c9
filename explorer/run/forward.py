"""One token's forward pass, step by step, recomputed from the model's own weights and traced states (no streamlit).

Each step starts from the model's traced state before it (never from our own recomputation of an earlier step),
so every shown result can be checked against the state the model itself produced (`traced`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models import anatomy
from attention_explorer.models.blocks import RMSNorm
from attention_explorer.models.device import model_device
from attention_explorer.models.registry import LoadedModel

STACKS = ("encoder", "decoder")
# each sub-layer by the traced state after it (the layer's own order: models.transformer.run_sublayers), as figure 1
# names it, the attention kind it draws, and its export key
SUBLAYER_NAMES = {
    "after_attn": "self-attention",
    "after_self_attn": "masked self-attention",
    "after_cross_attn": "cross-attention",
    "after_ffn": "feed-forward",
}
_KINDS = {"after_attn": "encoder_self", "after_self_attn": "decoder_self", "after_cross_attn": "cross"}
_EXPORT = {"after_attn": "attention", "after_self_attn": "self_attention", "after_cross_attn": "cross_attention"}


def rounding_bound(config, n_keys: int, traced: np.ndarray) -> float:
    """How far a row recomputed as one vector may land from the model's batched row by float32 rounding alone, on any
    CPU: a sub-layer's chain of sums (n_keys keys, W^O, a norm and the feed-forward's d_model, d_ff) times float32's
    epsilon times the row's largest magnitude (two orders of an n-term sum differ by at most n eps sum|x_i|: Higham,
    Accuracy and Stability of Numerical Algorithms, 2002, section 3.1)."""
    terms = n_keys + 3 * config.d_model + config.d_ff
    return terms * float(np.finfo(np.float32).eps) * float(np.abs(traced).max())


def agreement(result: np.ndarray, traced: np.ndarray, bound: float) -> str:
    """Whether a recomputed value equals the model's own state within `bound` (rounding_bound), with the largest
    difference: said as it is."""
    worst = float(np.abs(np.asarray(result) - np.asarray(traced)).max())
    if worst <= bound:
        return f"equals the model's own state to float32 rounding: max |difference| = {worst:.1e}"
    return f"DIFFERS from the model's own state: max |difference| = {worst:.1e} (over float32 rounding, {bound:.1e})"


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _row(x: np.ndarray, module: torch.nn.Module) -> torch.Tensor:
    """x as a float32 tensor where `module`'s weights are (a copy: a read-only array, a cached trace's, warns in
    torch)."""
    return torch.from_numpy(np.array(x, np.float32)).to(model_device(module))


@dataclass(frozen=True)
class Norm:
    """LayerNorm of one row: gamma * (x - mean) / sqrt(variance + eps) + beta (the variance divides by D); RMSNorm:
    gamma * x / sqrt(mean(x^2) + eps), no mean taken away and no beta."""

    x: np.ndarray
    mean: float  # 0 for RMSNorm (it takes no mean away)
    variance: float  # RMSNorm: mean(x^2)
    eps: float
    normalized: np.ndarray  # (x - mean) / sqrt(variance + eps)
    gamma: np.ndarray
    beta: np.ndarray | None  # None for RMSNorm
    output: np.ndarray
    kind: str = "layer"  # "layer" or "rms"

    @property
    def name(self) -> str:
        return "RMSNorm" if self.kind == "rms" else "LayerNorm"


def layer_norm(x: np.ndarray, module: torch.nn.Module) -> Norm:
    """The module's norm written out with its own gamma (and beta) and eps: LayerNorm, or RMSNorm where the module
    has no bias."""
    row = _row(x, module)
    if isinstance(module, RMSNorm):
        mean_square = row.pow(2).mean()
        normalized = row * torch.rsqrt(mean_square + module.eps)  # as models.blocks.RMSNorm computes it
        gain = module.weight if not module.offset else module.offset + module.weight  # Gemma's (1 + w)
        output = gain * normalized
        return Norm(x, 0.0, float(mean_square), float(module.eps), _np(normalized), _np(gain), None, _np(output), "rms")
    mean = row.mean()
    variance = row.var(unbiased=False)
    normalized = (row - mean) / torch.sqrt(variance + module.eps)
    output = normalized * module.weight + module.bias
    return Norm(
        x,
        float(mean),
        float(variance),
        float(module.eps),
        _np(normalized),
        _np(module.weight),
        _np(module.bias),
        _np(output),
    )


@dataclass(frozen=True)
class Embedding:
    """Token -> id -> embedding row (x scale) + position (+ token type) (-> LayerNorm): what enters layer 1."""

    token: str
    token_id: int
    row: np.ndarray  # the embedding table's row
    scale: float  # sqrt(d_model) in the paper (section 3.4); 1 for the BERT family
    scaled: np.ndarray
    position_kind: str  # "sinusoidal", "learned" or "rotary"
    position: np.ndarray | None  # this position's row of the table; None for rotary (nothing is added)
    token_type: np.ndarray | None  # BERT's segment embedding (type 0: one sentence)
    summed: np.ndarray
    norm: Norm | None  # BERT normalises the sum
    result: np.ndarray
    traced: np.ndarray  # the model's own


@dataclass(frozen=True)
class FeedForwardWalkthrough:
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, eq. (2)."""

    x: np.ndarray
    hidden: np.ndarray  # (F,) x W_1 + b_1 (gated: x W_gate, what the activation reads)
    activation: str  # the config's name: "relu", "gelu", "gelu_new", "silu", ...
    activated: np.ndarray  # (F,) what W_2 reads: act(hidden), times x W_up when gated
    off_share: float  # share of the d_ff units the activation switches off (output exactly 0 for ReLU, < 0 for GELU)
    output: np.ndarray  # (D,)
    up: np.ndarray | None = None  # gated (SwiGLU): (F,) x W_up, scaled unit by unit by act(x W_gate)
    floor: tuple[float, float] = (0.0, 0.0)  # (the activation's lowest value, the input where it takes it)

    @property
    def negative_carry(self) -> float:
        """The share of sum |act(hidden) (x W_up when gated)| that the units with a negative input carry: what W_2
        still reads from them (SiLU and GELU pass a little of a negative input on; ReLU none)."""
        carried = np.abs(self.activated.astype(np.float64))
        total = carried.sum()
        return float(carried[self.hidden < 0].sum() / total) if total > 0 else 0.0


@dataclass(frozen=True)
class Sublayer:
    """One sub-layer with its residual connection and LayerNorm (post-LN: LN(x + f(x)); pre-LN: x + f(LN(x)))."""

    name: str
    x: np.ndarray  # the residual stream entering
    pre_norm: Norm | None  # pre-LN: what the sub-layer reads
    output: np.ndarray  # the sub-layer's output: attention after W_O, or the FFN's
    traced_output: np.ndarray  # the model's own sub-layer output (attention); the FFN's is recomputed only
    ffn: FeedForwardWalkthrough | None
    residual: np.ndarray  # x + output (sandwich norms: x + sandwich.output)
    post_norm: Norm | None
    result: np.ndarray
    traced: np.ndarray  # the model's own state after this sub-layer
    sandwich: Norm | None = None  # sandwich norms (Gemma 3): the norm of the output before it is added


@dataclass(frozen=True)
class Layer:
    index: int
    x: np.ndarray
    sublayers: tuple[Sublayer, ...]


def token_ids(loaded: LoadedModel, trace: Trace, stack: str) -> list[int]:
    """The ids the model read for a stack's tokens."""
    if stack == "encoder":
        encoding = loaded.tokenizer.encode(trace.text, len(trace.source_tokens))
        assert encoding.tokens == trace.source_tokens, "the trace was made from another text"
        return list(encoding.ids)
    vocabulary = loaded.target_vocabulary
    assert trace.target_tokens is not None
    return [vocabulary.token_to_id(t) for t in trace.target_tokens]


def _module(loaded: LoadedModel, stack: str):
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}")
    found = getattr(loaded.model, stack)
    if found is None:
        shape = "decoder-only: it has no encoder" if stack == "encoder" else "encoder-only: it has no decoder"
        raise ValueError(f"model {loaded.key!r} is {shape}")
    return found


def stack_of(kind: str) -> str:
    """The stack whose layers hold an attention kind (encoder_self: encoder; decoder_self, cross: decoder, which in
    a decoder-only model is its only stack)."""
    return "encoder" if kind == "encoder_self" else "decoder"


def sublayer_states(trace: Trace, stack: str) -> tuple[str, ...]:
    """The traced states of one layer's sub-layers, in order (after_attn, after_ffn for an encoder layer)."""
    return tuple(name for name in states(trace, stack) if name != "embeddings")


def sublayer_names(trace: Trace, stack: str) -> tuple[str, ...]:
    """One layer's sub-layers as figure 1 names them, bottom to top."""
    return tuple(SUBLAYER_NAMES[name] for name in sublayer_states(trace, stack))


@dataclass(frozen=True)
class Projections:
    """One head's W^Q_i, W^K_i, W^V_i as (d_model, d_head) matrices and their biases (x W + b, section 3.2.2)."""

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    b_q: np.ndarray
    b_k: np.ndarray
    b_v: np.ndarray


def head_projections(loaded: LoadedModel, kind: str, layer: int, head: int) -> Projections:
    """The model's own projection matrices of one head: the columns of W^Q that head `head` owns, and of W^K, W^V
    those of the key/value head it reads (its own, or the one its group shares). A model without biases: zeros."""
    module = _module(loaded, stack_of(kind)).layers[layer]
    attention = module.cross_attn if kind == "cross" else module.self_attn
    d_head = attention.d_head
    kv_head = head // (attention.n_heads // attention.n_kv_heads)

    def cut(linear: torch.nn.Linear, index: int) -> tuple[np.ndarray, np.ndarray]:
        rows = slice(index * d_head, (index + 1) * d_head)
        bias = np.zeros(d_head, np.float32) if linear.bias is None else _np(linear.bias[rows])
        # nn.Linear stores (out, in) and computes x W^T + b: head i's W is the transpose of its rows
        return _np(linear.weight[rows]).T.copy(), bias

    found = [cut(attention.w_q, head), cut(attention.w_k, kv_head), cut(attention.w_v, kv_head)]
    (w_q, b_q), (w_k, b_k), (w_v, b_v) = found
    return Projections(w_q, w_k, w_v, b_q, b_k, b_v)


def attention_norm(loaded: LoadedModel, kind: str, layer: int) -> torch.nn.Module | None:
    """The norm an attention sub-layer applies to its input before projecting it to q (and, in self-attention, to k
    and v): a pre-norm layer's own (RMSNorm or LayerNorm); None where the layer is post-LN and projects x itself."""
    module = _module(loaded, stack_of(kind)).layers[layer]
    # the sub-layer as models.anatomy describes it: its norm, and whether it reads the normed stream
    sub = described(loaded, stack_of(kind)).sublayer("cross_attn" if kind == "cross" else "self_attn")
    return getattr(module, sub.norm) if sub.reads_normed else None


def described(loaded: LoadedModel, stack: str) -> anatomy.Layer:
    """A stack's layer as models.anatomy describes it: its sub-layers in order, what each reads, where the norm is."""
    found = getattr(loaded.family.block, stack)
    if found is None:
        raise ValueError(f"model {loaded.key!r} has no {stack}")
    return found


def tokens(trace: Trace, stack: str) -> tuple[str, ...]:
    if stack == "decoder":
        assert trace.target_tokens is not None
        return trace.target_tokens
    return trace.source_tokens


def states(trace: Trace, stack: str) -> dict[str, np.ndarray]:
    found = trace.encoder_states if stack == "encoder" else trace.decoder_states
    if found is None:
        shape = "decoder-only: it has no encoder" if stack == "encoder" else "encoder-only: it has no decoder"
        raise ValueError(f"model {trace.model_key!r} is {shape}")
    return found


@torch.inference_mode()
def embedding(loaded: LoadedModel, trace: Trace, stack: str, position: int) -> Embedding:
    """The input of layer 1 for one position, as models.transformer.Embeddings computes it."""
    module = _module(loaded, stack).embeddings
    token_id = token_ids(loaded, trace, stack)[position]
    row = _np(module.token.weight[token_id])
    scaled = row * np.float32(module.scale) if module.scale != 1.0 else row
    summed = torch.from_numpy(scaled.copy()).to(module.token.weight.device)
    token_type = None
    if module.token_type is not None:
        token_type = _np(module.token_type.weight[0])
        summed = summed + module.token_type.weight[0]
    position_row = None if module.position is None else module.position.table[position]
    if position_row is not None:  # rotary positions add nothing here
        summed = summed + position_row
    norm = layer_norm(_np(summed), module.norm) if module.norm is not None else None
    kind = loaded.family.block.positions.kind
    result = norm.output if norm is not None else _np(summed)
    return Embedding(
        tokens(trace, stack)[position],
        token_id,
        row,
        float(module.scale),
        scaled,
        kind,
        None if position_row is None else _np(position_row),
        token_type,
        _np(summed),
        norm,
        result,
        states(trace, stack)["embeddings"][position].copy(),
    )


@torch.inference_mode()
def feed_forward(module, x: np.ndarray) -> FeedForwardWalkthrough:
    """Eq. (2) for one row with the layer's own W_1, b_1, W_2, b_2; gated (SwiGLU): W_2 (act(x W_gate) * x W_up)."""
    row = _row(x, module)
    up = None
    if module.gate is None:
        hidden = affine(row, module.linear1)  # (F,)
        activated = module.activation(hidden)
    else:
        hidden, up = affine(row, module.gate), affine(row, module.linear1)  # (F,) each
        activated = module.activation(hidden) * up
    output = affine(activated, module.linear2)  # (D,)
    name = module.activation_name
    off = float((hidden <= 0).float().mean())
    return FeedForwardWalkthrough(
        x, _np(hidden), name, _np(activated), off, _np(output), None if up is None else _np(up), floor(module)
    )


FLOOR_GRID = torch.linspace(-8.0, 0.0, 80_001)  # steps of 1e-4: where a negative input gives the lowest output


def floor(module) -> tuple[float, float]:
    """(lowest value, where) of the layer's own activation over negative inputs: about -0.28 at -1.28 for SiLU, -0.17
    at -0.75 for GELU (ReLU: 0, at every negative input)."""
    out = module.activation(FLOOR_GRID)
    i = int(out.argmin())
    return float(out[i]), float(FLOOR_GRID[i])


def affine(row: torch.Tensor, linear: torch.nn.Linear) -> torch.Tensor:
    """x W^T (+ b where the layer has a bias), as nn.Linear computes it."""
    out = row @ linear.weight.T
    return out if linear.bias is None else out + linear.bias


def attention_output(trace: Trace, kind: str, layer: int, position: int, w_o) -> np.ndarray:
    """Concat_h(weights_h @ V_h) W_O + b_O for one query row, from the traced weights and values."""
    a = trace.attention(kind)
    heads = np.einsum("hk,hkd->hd", a.weights[layer, :, position], a.v[layer])  # (H, Dh)
    concat = torch.from_numpy(np.ascontiguousarray(heads.reshape(-1))).to(w_o.weight.device)
    with torch.inference_mode():
        return _np(affine(concat, w_o))


def _sublayer(
    name, x, reads, sub: anatomy.Sublayer, norm_module, run, traced, traced_output=None, post_module=None
) -> Sublayer:
    """Residual and norm around `run` (sub-layer input -> (output, ffn steps or None)): the sub-layer reads `reads`
    (normed where the description says so; a parallel block's: the layer's input), its output is added to x (through
    `post_module` first where the layer has sandwich norms)."""
    pre = layer_norm(reads, norm_module) if sub.reads_normed else None
    output, ffn = run(pre.output if pre is not None else reads)
    sandwich = None if post_module is None else layer_norm(output, post_module)
    residual = x + (output if sandwich is None else sandwich.output)
    post = None if sub.reads_normed else layer_norm(residual, norm_module)  # post-LN: the norm after the addition
    result = residual if post is None else post.output
    shown = output if traced_output is None else traced_output
    return Sublayer(name, x, pre, output, shown, ffn, residual, post, result, traced, sandwich)


def layer(loaded: LoadedModel, trace: Trace, stack: str, index: int, position: int) -> Layer:
    """Every sub-layer of one layer for one position, each starting from the model's traced state before it."""
    module = _module(loaded, stack).layers[index]
    found = states(trace, stack)
    x = (found["embeddings"] if index == 0 else found["after_ffn"][index - 1])[position].copy()
    steps, before = [], x
    for sub in described(loaded, stack).sublayers:  # the layer's own order (models.anatomy)
        name, norm = SUBLAYER_NAMES[sub.state], getattr(module, sub.norm)
        after = None if sub.post_norm is None else getattr(module, sub.post_norm)  # sandwich: normed before added
        reads = x if sub.reads_layer_input else before
        traced = found[sub.state][index, position].copy()
        if sub.module == "ffn":

            def run(h, ffn=module.ffn):
                steps_ = feed_forward(ffn, h)
                return steps_.output, steps_

            step = _sublayer(name, before, reads, sub, norm, run, traced, post_module=after)
        else:
            kind = _KINDS[sub.state]
            out = attention_output(trace, kind, index, position, getattr(module, sub.module).w_o)
            model_out = trace.attention(kind).output[index, position].copy()
            step = _sublayer(name, before, reads, sub, norm, lambda _h, out=out: (out, None), traced, model_out, after)
        steps.append(step)
        before = traced
    return Layer(index, x, tuple(steps))


@torch.inference_mode()
def final_norm(loaded: LoadedModel, trace: Trace, stack: str, position: int) -> Norm | None:
    """Pre-LN stacks end with one more norm; post-LN stacks (the paper's) do not."""
    module = _module(loaded, stack).final_norm
    if module is None:
        return None
    return layer_norm(states(trace, stack)["after_ffn"][-1, position], module)


@torch.inference_mode()
def ffn_outputs(loaded: LoadedModel, trace: Trace, stack: str) -> np.ndarray:
    """(L, T, D): every layer's FFN output (before its residual), run by the model's own modules on traced input."""
    module = _module(loaded, stack)
    found = states(trace, stack)
    sub = described(loaded, stack).sublayer("ffn")
    before = found[sublayer_states(trace, stack)[-2]]  # the state the FFN's residual starts from
    outputs = []
    for index, layer_module in enumerate(module.layers):
        norm = getattr(layer_module, sub.norm)
        # what the FFN reads: the stream after the sub-layer before it, or (a parallel block) the layer's input
        reads = (
            (found["embeddings"] if index == 0 else found["after_ffn"][index - 1]) if sub.reads_layer_input else None
        )
        x = _row(before[index] if reads is None else reads, layer_module)[None]  # (1, T, D)
        outputs.append(_np(layer_module.ffn(norm(x) if sub.reads_normed else x)[0]))
    return np.stack(outputs)


def sublayer_vectors(loaded: LoadedModel, trace: Trace) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per stack and layer, every token's vector after each sub-layer and after each Add & Norm (export)."""
    result: dict[str, list[dict[str, np.ndarray]]] = {}
    for stack in trace_stacks(trace):
        found = states(trace, stack)
        ffn = ffn_outputs(loaded, trace, stack)
        layers = []
        for index in range(ffn.shape[0]):
            entry = {}
            for number, name in enumerate(sublayer_states(trace, stack), 1):
                if name == "after_ffn":
                    entry["ffn"] = ffn[index]
                else:
                    entry[_EXPORT[name]] = trace.attention(_KINDS[name]).output[index]
                entry[f"add_norm_{number}"] = found[name][index]
            layers.append(entry)
        result[stack] = layers
    return result


def trace_stacks(trace: Trace) -> tuple[str, ...]:
    """The stacks a trace holds: encoder, decoder or both."""
    held = {"encoder": trace.encoder_states, "decoder": trace.decoder_states}
    return tuple(stack for stack in STACKS if held[stack] is not None)
