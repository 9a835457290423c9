"""Hugging Face GPT-NeoX checkpoint (EleutherAI's Pythia suite) -> our decoder-only model: the config, a key map and one
pure function.

GPT-NeoX is GPT-2's pre-LN decoder (LayerNorm with biases, GELU, biases on every projection) with two changes, each a
config choice of the same engine: rotary positions on the first share of each head's dimensions only (rotary_pct,
0.25 in Pythia; nothing added to the embedding), and, by default, the parallel block: attention and the feed-forward
both read the layer's input, x + Attn(Norm1(x)) + FFN(Norm2(x)). W_Q, W_K, W_V are one fused matrix, interleaved per
head; the output matrix (embed_out, lm_head in transformers 5's files) is not tied to the embedding.
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

MODEL_TYPE = "gpt_neox"  # config.json's model_type this family reads
REFERENCE_CLASS = "GPTNeoXForCausalLM"  # transformers' class for the same folder (models.reference)

# ours (under decoder.layers.{i}.) -> theirs (under gpt_neox.layers.{i}.), each with a weight and a bias; nn.Linear
# both sides: no transposes. The fused query_key_value is split apart (convert)
LAYER_KEYS = {
    "norm1": "input_layernorm",
    "self_attn.w_o": "attention.dense",
    "norm3": "post_attention_layernorm",
    "ffn.linear1": "mlp.dense_h_to_4h",
    "ffn.linear2": "mlp.dense_4h_to_h",
}
# buffers older checkpoints carry: the causal mask and rotary's frequencies, rebuilt here from the config
IGNORED_SUFFIXES = (".attention.bias", ".attention.masked_bias", "rotary_emb.inv_freq")
OUTPUT_KEYS = ("embed_out.weight", "lm_head.weight")  # the output matrix: the original files' name, transformers 5's


def _rope(hf: Mapping[str, object]) -> tuple[float, float]:
    """(rope_theta, the share of each head rotary turns) from config.json: rotary_emb_base and rotary_pct (the
    original files), or rope_parameters / rope_scaling (transformers 5 writes rope_theta and partial_rotary_factor
    there); transformers' defaults 10000 and 0.25 when neither says. Only plain RoPE is run."""
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ConversionError("config.json's rope_parameters is not an object")
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in ("default", None):
        raise ConversionError(f"config.json asks for rope_type {kind!r}: only plain rotary positions are supported")
    theta = rope.get("rope_theta", hf.get("rotary_emb_base", hf.get("rope_theta", 10000.0)))
    fraction = rope.get("partial_rotary_factor", hf.get("rotary_pct", 0.25))
    return float(theta), float(fraction)


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Our config from a GPT-NeoX config.json (decoder-only, pre-LN LayerNorm, partial rotary, parallel or sequential
    residual, untied output unless it says otherwise)."""
    activation = checks.activation(hf, "hidden_act", "gelu")
    with checks.config_fields("GPT-NeoX"):
        theta, fraction = _rope(hf)
        bias = bool(hf.get("attention_bias", True))
        return TransformerConfig(
            vocab_size=int(hf["vocab_size"]),
            d_model=int(hf["hidden_size"]),
            n_heads=int(hf["num_attention_heads"]),
            d_ff=int(hf["intermediate_size"]),
            n_encoder_layers=0,
            n_decoder_layers=int(hf["num_hidden_layers"]),
            max_len=int(hf.get("max_position_embeddings", 2048)),
            positional="rotary",
            rope_theta=theta,
            rotary_fraction=fraction,
            activation=activation,
            norm_first=True,
            parallel_residual=bool(hf.get("use_parallel_residual", True)),
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-5)),
            dropout=0.0,
            scale_embeddings=False,
            tie_output=bool(hf.get("tie_word_embeddings", False)),
            pad_id=None,
            output_bias=False,
            qkv_bias=bias,
            out_bias=bias,
            ffn_bias=True,  # GPT-NeoX's feed-forward always has biases
        )


def split_qkv(fused: Tensor, n_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """query_key_value's rows (or bias) -> W_Q, W_K, W_V: GPT-NeoX interleaves them per head, [q_0 k_0 v_0 q_1 ...],
    each block d_head rows; ours keep each projection's heads together, head i's rows [i*Dh, (i+1)*Dh)."""
    per_head = fused.reshape(n_heads, 3, -1, *fused.shape[1:])  # (H, 3, Dh, D) for a weight, (H, 3, Dh) for a bias
    q, k, v = per_head.unbind(1)  # (H, Dh, D) each
    return tuple(part.reshape(-1, *fused.shape[1:]).contiguous() for part in (q, k, v))  # (D, D) or (D,) each


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Rename and split a GPT-NeoX state dict into ours, checking every key and shape; raises ConversionError listing
    every problem."""
    checked = Checked({k.removeprefix("gpt_neox."): v for k, v in checkpoint.items()})
    take = checked.take
    d, f = config.d_model, config.d_ff
    converted: dict[str, Tensor] = {}

    def put(ours: str, tensor: Tensor | None) -> None:
        if tensor is not None:
            converted[ours] = tensor

    embedding = take("embed_in.weight", (config.vocab_size, d))
    put("decoder.embeddings.token.weight", embedding)
    output = next((name for name in OUTPUT_KEYS if name in checked.theirs), OUTPUT_KEYS[0])
    if config.tie_output:
        put("generator.weight", embedding)  # the output matrix is the token embedding (tied)
        checked.used.update(OUTPUT_KEYS)
    else:
        put("generator.weight", take(output, (config.vocab_size, d)))
    shapes = {"norm1": (d,), "norm3": (d,), "self_attn.w_o": (d, d), "ffn.linear1": (f, d), "ffn.linear2": (d, f)}
    has_bias = {
        "norm1": True,
        "norm3": True,
        "self_attn.w_o": config.out_bias,
        "ffn.linear1": True,
        "ffn.linear2": True,
    }
    for i in range(config.n_decoder_layers):
        ours, prefix = f"decoder.layers.{i}.", f"layers.{i}."
        fused = take(f"{prefix}attention.query_key_value.weight", (3 * d, d))  # (3D, D), per head [q | k | v]
        if fused is not None:
            for part, weight in zip(("w_q", "w_k", "w_v"), split_qkv(fused, config.n_heads), strict=True):
                converted[f"{ours}self_attn.{part}.weight"] = weight
        if config.qkv_bias and (fused_bias := take(f"{prefix}attention.query_key_value.bias", (3 * d,))) is not None:
            for part, bias in zip(("w_q", "w_k", "w_v"), split_qkv(fused_bias, config.n_heads), strict=True):
                converted[f"{ours}self_attn.{part}.bias"] = bias
        for mine, name in LAYER_KEYS.items():
            put(f"{ours}{mine}.weight", take(f"{prefix}{name}.weight", shapes[mine]))
            if has_bias[mine]:
                put(f"{ours}{mine}.bias", take(f"{prefix}{name}.bias", shapes[mine][:1]))
    put("decoder.final_norm.weight", take("final_layer_norm.weight", (d,)))
    put("decoder.final_norm.bias", take("final_layer_norm.bias", (d,)))
    checked.finish("GPT-NeoX decoder", lambda k: k.endswith(IGNORED_SUFFIXES))
    return {k: v.to(torch.float32) for k, v in converted.items()}


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    """The folder's byte-level BPE (tokenizer.json, GPT-NeoX-20B's for the Pythia suite; else vocab.json +
    merges.txt), with no markers added: transformers' GPTNeoXTokenizer adds neither bos nor eos unless told to."""
    return ByteLevelTokenizer.from_folder(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A GPT-NeoX folder's descriptor: pretrained weights read with byte-level BPE ('Ġ' starts a word), with the
    tokenizer's own marker tokens (Pythia's <|endoftext|> and <|padding|>) and the roles config.json gives them."""
    marks = descriptor.BYTE_BPE_MARKS
    if tokenizer is not None:
        marks = descriptor.with_roles(marks | {"specials": tokenizer.specials}, tokenizer, hf)
    return descriptor.for_config(config, "GPT-NeoX family", "pretrained", **marks)
