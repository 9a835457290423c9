"""Direct logit attribution (no streamlit): one output logit split into what each part of the model wrote into the
residual stream, read through the output layer with every LayerNorm's scale frozen at the value the run used.

Pre-LN (GPT-2, the induction model): the last state is the sum of the embedding and every sub-layer's output, and
the final LayerNorm with its scale frozen is affine, so the logit splits exactly into the embedding, each head (its
output through its own slice of W_O), each attention's W_O bias, each feed-forward, and a constant (the final norm's
shift and the output bias). A parallel block (x + Attn(Norm1(x)) + FFN(Norm2(x))) is pre-LN too: its
feed-forward reads the layer's input, as models.anatomy says, and the split is the same.

A logit difference, logit(X) - logit(Y) (how much more the model favours X than Y, what a study of one behaviour
usually measures), splits the same way through the difference of the two tokens' output rows.

Post-LN (the paper's): every sub-layer ends in LayerNorm(x + Sublayer(x)), so a part written in layer 1 reaches the
output only re-centred and divided by every later LayerNorm's spread, and every later sub-layer reads it too. We
split the last layer only: its input (everything before, as one part), its heads, biases and feed-forward, through
its own LayerNorms with their scales frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor

from attention_explorer.explorer.experiments.lens import run_on
from attention_explorer.explorer.run import logits as final_linear
from attention_explorer.explorer.run.answers import Answer
from attention_explorer.models.attention import MultiHeadAttention
from attention_explorer.models.blocks import RMSNorm
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.transformer import run_sublayers

KIND_OF = {"self_attn": "decoder_self", "cross_attn": "cross"}
SUBLAYER_NAMES = {"self_attn": "masked self-attention", "cross_attn": "cross-attention", "ffn": "feed-forward"}


@dataclass(frozen=True)
class Attribution:
    """One logit (position, token) split into parts, or with `against` the logit difference logit(token) -
    logit(against) (every part read through the difference of the two tokens' output rows, the same frozen norms);
    the parts sum to the model's own logit, or logit difference."""

    position: int
    token: str
    token_id: int
    logit: float  # the model's own logit, or logit difference with `against`
    names: tuple[str, ...]  # one per part: "embedding", "L2.H3 masked self-attention", "layer 2 feed-forward", ...
    values: np.ndarray  # (P,) each part's share of the logit
    heads: dict[str, np.ndarray]  # per attention kind, (L, H) each head's share; NaN for layers not separated
    first_layer: int  # the first layer whose parts are separated (0 for pre-LN; the last layer for post-LN)
    exact_all_layers: bool  # pre-LN: every layer separated
    against: str | None = None  # the second token of a logit difference; None: one logit
    against_id: int | None = None

    @property
    def total(self) -> float:
        return float(self.values.sum())

    def split(self, readable: Callable[[str], str]) -> str:
        """What the parts share, as a sentence says it: "the logit of X" or "the logit difference X - Y", each token
        as `readable` writes it (the pages' Spelling.readable: '␣Anna', not 'ĠAnna')."""
        if self.against is None:
            return f"the logit of {readable(self.token)}"
        return f"the logit difference {readable(self.token)} \u2212 {readable(self.against)}"


def _head_parts(attention: MultiHeadAttention, heads: Tensor) -> Tensor:
    """(H, D) what each head writes at one position: its output (Dh) through its own columns of W_O."""
    h, dh = attention.n_heads, attention.d_head
    w = attention.w_o.weight.double().view(-1, h, dh)  # (D, H, Dh)
    return torch.einsum("hd,ehd->he", heads.double(), w)  # (H, D)


def _freeze(norm: torch.nn.Module, total: Tensor, parts: Tensor, constant: Tensor) -> tuple[Tensor, Tensor]:
    """A LayerNorm with its scale frozen at the one `total` (its real input) gives: each part is centred, divided
    by that spread and multiplied by the gain; the constant gets the shift. Sum of parts + constant = LayerNorm(sum).
    An RMSNorm (no bias) divides by the root mean square instead and takes no mean away."""
    total = total.double()
    gain = norm.weight.double()
    if isinstance(norm, RMSNorm):
        rms = torch.sqrt(total.pow(2).mean() + norm.eps)
        return gain * parts / rms, gain * constant / rms
    spread = torch.sqrt(total.var(unbiased=False) + norm.eps)

    def affine(x: Tensor) -> Tensor:
        return gain * (x - x.mean(-1, keepdim=True)) / spread

    return affine(parts), affine(constant) + norm.bias.double()


@torch.inference_mode()
def one_row(loaded: LoadedModel, entering: Callable[[int], np.ndarray], position: int) -> SimpleNamespace:
    """What `attribute` reads of a decoder-only model's forward, for row `position` only, from the state that entered
    each layer (a trace's kept residual stream, (T, D) a layer): each layer run again for that one row, its queries at
    that row and its keys and values from every row up to it (later rows are masked), by the modules' own operations.
    A forward over 2,048 tokens costs seconds and gigabytes of attention; this, one row per layer. Fields as the
    forward's, with one row: decoder.embeddings and each state (1, 1, D), each attention's heads (1, H, 1, Dh), logits
    (1, 1, V)."""
    model, described = loaded.model, loaded.family.block.decoder
    assert model.decoder is not None and model.encoder is None and model.generator is not None and described
    layers = []
    for index, layer in enumerate(model.decoder.layers):
        # (1, p + 1, D): rows up to p, where the model is
        before = torch.from_numpy(np.array(entering(index)[: position + 1]))[None].to(loaded.device)
        heads: dict[str, Tensor] = {}

        def attend(name: str, attention: MultiHeadAttention, h: Tensor, before=before, layer=layer, heads=heads):
            sub = described.sublayer(name)  # its norm, and whether it reads the normed stream (models.anatomy)
            keys = getattr(layer, sub.norm)(before) if sub.reads_normed else before
            k, v, _ = attention.keys_values(keys)  # (1, H, p + 1, Dh)
            q, _ = attention.queries(h, position)  # (1, H, 1, Dh), turned by its own position where rotary
            # row p sees every row up to it (a local layer's last w of them: the layer's own window and scale)
            heads[name], _, _, _ = attention.attend(q, k, v, None, position)
            return attention.combine_heads(heads[name]), None

        states, _ = run_sublayers(layer, before[:, position:], attend)
        layers.append(SimpleNamespace(**states, **{name: SimpleNamespace(heads=h) for name, h in heads.items()}))
    x = layers[-1].after_ffn
    if model.decoder.final_norm is not None:
        x = model.decoder.final_norm(x)
    embeddings = torch.from_numpy(np.array(entering(0)[position : position + 1]))[None].to(loaded.device)
    return SimpleNamespace(decoder=SimpleNamespace(embeddings=embeddings, layers=layers), logits=model.generator(x))


@torch.inference_mode()
def attribute(
    loaded: LoadedModel,
    answer: Answer,
    position: int,
    token_id: int,
    entering: Callable[[int], np.ndarray] | None = None,
    against: int | None = None,
) -> Attribution:
    """Split the logit of `token_id` at decoder row `position` into the parts that wrote it; with `against`, the
    logit difference logit(token_id) - logit(against), each part's share read through the difference of the two
    output rows (so each part's value is its share of token_id's logit minus its share of against's). `entering`: for
    a decoder-only model, the state entering each layer as a run kept it (layer -> (T, D)): then only that row is run
    again (one_row), not the whole forward."""
    if answer.decoder_input is None:
        raise ValueError(f"{loaded.title} has no output matrix: {loaded.family.shape_name}, it writes no tokens")
    if not 0 <= position < len(answer.decoder_input):
        raise ValueError(f"position {position} is outside the {len(answer.decoder_input)} decoder rows")
    model = loaded.model
    if entering is None:  # the whole forward, and its row's logits alone (no (T, V) matrix)
        out, row = run_on(loaded, answer, logits=False), position
        assert out.decoder is not None
        read = final_linear.output_row(model, out.decoder.output[0], position)  # (V,)
    else:
        out, row = one_row(loaded, entering, position), 0
        read = out.logits[0, 0]  # (V,)
    assert out.decoder is not None and model.decoder is not None
    layers, block = model.decoder.layers, loaded.family.block
    assert block.decoder is not None
    pre_ln = block.norm_first
    first = 0 if pre_ln else len(layers) - 1
    d = model.config.d_model
    names: list[str] = []
    rows: list[Tensor] = []
    kinds = [KIND_OF[s.module] for s in block.decoder.sublayers if s.module in KIND_OF]
    heads = {kind: np.full((len(layers), model.config.n_heads), np.nan) for kind in kinds}
    head_rows: list[tuple[str, int, int, int]] = []  # (kind, layer, head, part)
    constant = torch.zeros(d, dtype=torch.float64, device=loaded.device)
    if pre_ln:
        names.append("embedding")
        rows.append(out.decoder.embeddings[0, row].double())
        x = out.decoder.embeddings
    else:
        x = out.decoder.layers[first - 1].after_ffn if first > 0 else out.decoder.embeddings
        names.append("layers below (not separable)" if first > 0 else "embedding")
        rows.append(x[0, row].double())
    for index in range(first, len(layers)):
        layer, internals, entered = layers[index], out.decoder.layers[index], x
        for sub in block.decoder.sublayers:  # in order, each reading what models.anatomy says it reads
            norm = getattr(layer, sub.norm)
            state = getattr(internals, sub.state)
            if sub.module == "ffn":
                reads = entered if sub.reads_layer_input else x  # a parallel block's FFN reads the layer's input
                written = layer.ffn(norm(reads) if sub.reads_normed else reads)[0, row].double()  # (D,)
                names.append(f"layer {index + 1} feed-forward")
                rows.append(written)
            else:
                attention = getattr(layer, sub.module)
                captured = getattr(internals, sub.module)
                for h, part in enumerate(_head_parts(attention, captured.heads[0, :, row])):
                    head_rows.append((KIND_OF[sub.module], index, h, len(rows)))
                    names.append(f"L{index + 1}.H{h + 1} {SUBLAYER_NAMES[sub.module]}")
                    rows.append(part)
                if attention.w_o.bias is not None:
                    names.append(f"layer {index + 1} {SUBLAYER_NAMES[sub.module]} bias (W_O's)")
                    rows.append(attention.w_o.bias.double())
            if not pre_ln:  # LayerNorm(x + Sublayer(x)), its scale frozen at this run's
                stacked = torch.stack(rows)
                parts, constant = _freeze(norm, stacked.sum(0) + constant, stacked, constant)  # its input: x + out
                rows = list(parts)
            x = state
    if pre_ln and model.decoder.final_norm is not None:
        parts, constant = _freeze(model.decoder.final_norm, x[0, row], torch.stack(rows), constant)
        rows = list(parts)
    unembed = model.generator.weight[token_id].double()  # (D,)
    if against is not None:  # a difference of logits is linear in the last state: read through the rows' difference
        unembed = unembed - model.generator.weight[against].double()
    values = (torch.stack(rows) @ unembed).cpu().numpy()
    bias = 0.0 if model.generator.bias is None else float(model.generator.bias[token_id])
    if against is not None and model.generator.bias is not None:
        bias -= float(model.generator.bias[against])
    # what the constant holds: the LayerNorm's shift (an RMSNorm has none) and the output bias, where the model has them
    has_bias = model.generator.bias is not None
    held = [name for name, has in (("LayerNorm shift", block.norm == "layer"), ("output bias", has_bias)) if has]
    names.append(f"constant ({', '.join(held)})" if held else "constant (0: no norm shift, no output bias)")
    values = np.append(values, float(constant @ unembed) + bias)
    for kind, index, h, part in head_rows:
        heads[kind][index, h] = values[part]
    logit = float(read[token_id])
    if against is not None:  # the model's own difference, of its float32 logits, read in double
        logit = float(read[token_id].double() - read[against].double())
    vocabulary = loaded.target_vocabulary
    return Attribution(
        position,
        vocabulary.id_to_token(token_id),
        token_id,
        logit,
        tuple(names),
        values,
        heads,
        first,
        pre_ln,
        None if against is None else vocabulary.id_to_token(against),
        against,
    )
