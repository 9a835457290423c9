"""Hugging Face GPT-2-family checkpoint -> our decoder-only model: the config, a key map and one pure function.

GPT-2 is the paper's decoder without cross-attention, pre-LN (LayerNorm before each sub-layer, one more at the end),
with learned positions, GELU's tanh approximation and the output matrix tied to the token embedding. Its weights
are Conv1D, stored (in, out) where nn.Linear stores (out, in), and W^Q, W^K, W^V are one fused matrix c_attn.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import checks, descriptor
from attention_explorer.models.families.checks import Checked, ConversionError
from attention_explorer.models.tokenize import ByteLevelTokenizer

MODEL_TYPE = "gpt2"  # config.json's model_type this family reads
REFERENCE_CLASS = "GPT2LMHeadModel"  # transformers' class for the same folder (models.reference)

# buffers some checkpoints carry: the causal mask (attn.bias, attn.masked_bias), rebuilt here from the length
IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")

# ours (under decoder.layers.{i}.) -> theirs (under h.{i}.), for the matrices that need no split
LAYER_KEYS = {
    "norm1": "ln_1",
    "self_attn.w_o": "attn.c_proj",
    "norm3": "ln_2",
    "ffn.linear1": "mlp.c_fc",
    "ffn.linear2": "mlp.c_proj",
}
CONV1D = ("self_attn.w_o", "ffn.linear1", "ffn.linear2")  # stored (in, out): transposed into nn.Linear's (out, in)

# flags of GPT2Config that change the computation in ways this engine does not implement
UNSUPPORTED = {
    "scale_attn_weights": (True, "attention without the 1/sqrt(d_k) scaling"),
    "scale_attn_by_inverse_layer_idx": (False, "attention scaled by 1/layer index"),
    "add_cross_attention": (False, "cross-attention in a decoder-only model"),
}


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Our config from a GPT-2 config.json (decoder-only, pre-LN, learned positions, tied output, no padding)."""
    for flag, (default, what) in UNSUPPORTED.items():
        if hf.get(flag, default) != default:
            raise ConversionError(f"config.json sets {flag}={hf[flag]!r}: {what} is not supported")
    activation = checks.activation(hf, "activation_function", "gelu_new")
    with checks.config_fields("GPT-2"):
        d_model = int(hf["n_embd"])
        inner = hf.get("n_inner")
        return TransformerConfig(
            vocab_size=int(hf["vocab_size"]),
            d_model=d_model,
            n_heads=int(hf["n_head"]),
            d_ff=int(inner) if inner else 4 * d_model,
            n_encoder_layers=0,
            n_decoder_layers=int(hf["n_layer"]),
            max_len=int(hf["n_positions"]),
            positional="learned",
            activation=activation,
            norm_first=True,
            layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
            dropout=0.0,
            scale_embeddings=False,
            tie_output=bool(hf.get("tie_word_embeddings", True)),
            pad_id=None,
            output_bias=False,
        )


def _normalise_key(key: str) -> str:
    """Strip GPT2LMHeadModel's 'transformer.' prefix."""
    return key.removeprefix("transformer.")


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Rename, transpose and split a GPT-2 state dict into ours, checking every key and shape; raises
    ConversionError listing every problem."""
    checked = Checked({_normalise_key(k): v for k, v in checkpoint.items()})
    take = checked.take
    d, f = config.d_model, config.d_ff
    converted: dict[str, Tensor] = {}

    embedding = take("wte.weight", (config.vocab_size, d))
    position = take("wpe.weight", (config.max_len, d))
    if embedding is not None:
        converted["decoder.embeddings.token.weight"] = embedding
        if config.tie_output:
            converted["generator.weight"] = embedding  # GPT-2's lm_head is the token embedding (tied)
            checked.used.add("lm_head.weight")
    if not config.tie_output and (head := take("lm_head.weight", (config.vocab_size, d))) is not None:
        converted["generator.weight"] = head
    if position is not None:
        converted["decoder.embeddings.position.weight"] = position
    conv_shapes = {"self_attn.w_o": (d, d), "ffn.linear1": (d, f), "ffn.linear2": (f, d)}
    for i in range(config.n_decoder_layers):
        ours, prefix = f"decoder.layers.{i}.", f"h.{i}."
        fused = take(f"{prefix}attn.c_attn.weight", (d, 3 * d))  # (D, 3D): x @ W gives [q | k | v]
        fused_bias = take(f"{prefix}attn.c_attn.bias", (3 * d,))
        if fused is not None and fused_bias is not None:
            for part, weight, bias in zip(("w_q", "w_k", "w_v"), fused.split(d, 1), fused_bias.split(d), strict=True):
                converted[f"{ours}self_attn.{part}.weight"] = weight.t().contiguous()  # (D, D) as (out, in)
                converted[f"{ours}self_attn.{part}.bias"] = bias.contiguous()
        for mine, name in LAYER_KEYS.items():
            if mine in CONV1D:
                weight = take(f"{prefix}{name}.weight", conv_shapes[mine])
                bias = take(f"{prefix}{name}.bias", (conv_shapes[mine][1],))
                weight = None if weight is None else weight.t().contiguous()
            else:
                weight, bias = take(f"{prefix}{name}.weight", (d,)), take(f"{prefix}{name}.bias", (d,))
            if weight is not None and bias is not None:
                converted[f"{ours}{mine}.weight"], converted[f"{ours}{mine}.bias"] = weight, bias
    final_weight, final_bias = take("ln_f.weight", (d,)), take("ln_f.bias", (d,))
    if final_weight is not None and final_bias is not None:
        converted["decoder.final_norm.weight"], converted["decoder.final_norm.bias"] = final_weight, final_bias
    checked.finish("GPT-2 decoder", lambda k: k.endswith(IGNORED_SUFFIXES))
    return {k: v.to(torch.float32) for k, v in converted.items()}


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    """The folder's byte-level BPE (tokenizer.json, else vocab.json + merges.txt)."""
    return ByteLevelTokenizer.from_folder(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A GPT-2-family folder's descriptor: pretrained weights read with byte-level BPE, its start and end token those
    config.json names (<|endoftext|>)."""
    marks = descriptor.BYTE_BPE_MARKS
    if tokenizer is not None:
        marks = descriptor.with_roles(marks, tokenizer, hf)
    return descriptor.for_config(config, "GPT-2 family", "pretrained", **marks)
