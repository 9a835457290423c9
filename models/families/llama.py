"""Hugging Face Llama-family checkpoint -> our decoder-only model: the config, a key map and one pure function.

Llama is GPT-2's pre-norm decoder with four modern blocks, each a config choice of the same engine: RMSNorm instead of
LayerNorm, rotary positions (nothing added to the embedding; queries and keys turned by position), a gated SiLU
feed-forward (SwiGLU), and grouped-query attention (several query heads share one key/value head); no biases.
SmolLM2-135M-Instruct is one, shipped as a GGUF file: models.gguf reads it into the same names this converter takes.
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

MODEL_TYPE = "llama"  # config.json's model_type this family reads
REFERENCE_CLASS = "LlamaForCausalLM"  # transformers' class for the same folder (models.reference)

# ours (under decoder.layers.{i}.) -> theirs (under model.layers.{i}.); nn.Linear both sides: no transposes
LAYER_KEYS = {
    "norm1": "input_layernorm",
    "self_attn.w_q": "self_attn.q_proj",
    "self_attn.w_k": "self_attn.k_proj",
    "self_attn.w_v": "self_attn.v_proj",
    "self_attn.w_o": "self_attn.o_proj",
    "norm3": "post_attention_layernorm",
    "ffn.gate": "mlp.gate_proj",
    "ffn.linear1": "mlp.up_proj",
    "ffn.linear2": "mlp.down_proj",
}
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)  # older checkpoints store rotary's frequencies; rebuilt from the config


def _rope_theta(hf: Mapping[str, object]) -> float:
    """rope_theta from config.json (older files) or its rope_parameters (transformers 5); only plain RoPE is run."""
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise ConversionError("config.json's rope_parameters is not an object")
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in ("default", None):
        raise ConversionError(f"config.json asks for rope_type {kind!r}: only plain rotary positions are supported")
    return float(rope.get("rope_theta", hf.get("rope_theta", 10000.0)))


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Our config from a Llama config.json (decoder-only, pre-norm RMSNorm, rotary, SwiGLU, grouped-query)."""
    with checks.config_fields("Llama"):
        d_model, n_heads = int(hf["hidden_size"]), int(hf["num_attention_heads"])
        head_dim = hf.get("head_dim")
        if head_dim is not None and int(head_dim) * n_heads != d_model:
            raise ConversionError(f"config.json's head_dim {head_dim} x {n_heads} heads is not hidden_size {d_model}")
    return decoder_config(hf, "Llama")


def decoder_config(hf: Mapping[str, object], name: str, **fields) -> TransformerConfig:
    """Llama's block as config.json describes it, the families built on it (Qwen3, Mistral, Gemma 3) giving their
    own `fields`: heads of config.json's head_dim where it is not hidden_size / heads."""
    activation = fields.pop("activation", None) or checks.activation(hf, "hidden_act", "silu")
    with checks.config_fields(name):
        d_model, n_heads = int(hf["hidden_size"]), int(hf["num_attention_heads"])
        head_dim = hf.get("head_dim")
        bias = bool(hf.get("attention_bias", False))
        settings = dict(
            vocab_size=int(hf["vocab_size"]),
            d_model=d_model,
            n_heads=n_heads,
            n_kv_heads=int(hf.get("num_key_value_heads") or n_heads),
            d_ff=int(hf["intermediate_size"]),
            n_encoder_layers=0,
            n_decoder_layers=int(hf["num_hidden_layers"]),
            max_len=int(hf.get("max_position_embeddings", 2048)),
            positional="rotary",
            activation=activation,
            gated_ffn=True,
            norm="rms",
            norm_first=True,
            layer_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            dropout=0.0,
            scale_embeddings=False,
            tie_output=bool(hf.get("tie_word_embeddings", False)),
            pad_id=None,
            output_bias=False,
            qkv_bias=bias,
            out_bias=bias,
            ffn_bias=bool(hf.get("mlp_bias", False)),
            head_dim=None if head_dim is None or int(head_dim) * n_heads == d_model else int(head_dim),
        )
        if "rope_theta" not in fields:
            settings["rope_theta"] = _rope_theta(hf)
        return TransformerConfig(**(settings | fields))


LAYER_TYPES = {"full_attention": "global", "sliding_attention": "local"}  # config.json's layer_types -> ours


def layer_types(hf: Mapping[str, object], n_layers: int) -> tuple[str, ...] | None:
    """config.json's layer_types as ours ("global", "local"); None where it gives none. Any other kind (chunked
    attention, ...) is one ConversionError naming it."""
    found = hf.get("layer_types")
    if found is None:
        return None
    if not isinstance(found, list) or len(found) != n_layers:
        raise ConversionError(f"config.json's layer_types is not a list of {n_layers} layer types")
    unknown = sorted({kind for kind in found if kind not in LAYER_TYPES}, key=str)
    if unknown:
        raise ConversionError(
            f"config.json's layer_types has {unknown[0]!r}: the engine runs {' and '.join(LAYER_TYPES)} only"
        )
    return tuple(LAYER_TYPES[kind] for kind in found)


def convert(
    checkpoint: Mapping[str, Tensor],
    config: TransformerConfig,
    layer_keys: Mapping[str, str] = LAYER_KEYS,
    what: str = "Llama decoder",
) -> dict[str, Tensor]:
    """Rename a Llama state dict into ours, checking every key and shape; raises ConversionError listing every
    problem. `layer_keys`: a family's own map of a layer's keys (Qwen3's QK-norm, Gemma 3's sandwich norms)."""
    checked = Checked(checkpoint)
    take = checked.take
    d, f, dh = config.d_model, config.d_ff, config.d_head
    kv, qs = config.key_value_heads * dh, config.d_attention
    converted: dict[str, Tensor] = {}

    def put(ours: str, tensor: Tensor | None) -> None:
        if tensor is not None:
            converted[ours] = tensor

    embedding = take("model.embed_tokens.weight", (config.vocab_size, d))
    put("decoder.embeddings.token.weight", embedding)
    if config.tie_output:
        put("generator.weight", embedding)  # the output matrix is the token embedding (tied)
        checked.used.add("lm_head.weight")
    else:
        put("generator.weight", take("lm_head.weight", (config.vocab_size, d)))
    shapes = {
        "self_attn.w_q": (qs, d),
        "self_attn.w_k": (kv, d),
        "self_attn.w_v": (kv, d),
        "self_attn.w_o": (d, qs),
        "self_attn.q_norm": (dh,),  # QK-norm: one gain over a head's width, shared by every head
        "self_attn.k_norm": (dh,),
        "ffn.gate": (f, d),
        "ffn.linear1": (f, d),
        "ffn.linear2": (d, f),
    }
    has_bias = dict.fromkeys(("self_attn.w_q", "self_attn.w_k", "self_attn.w_v"), config.qkv_bias)
    has_bias |= {"self_attn.w_o": config.out_bias} | dict.fromkeys(
        ("ffn.gate", "ffn.linear1", "ffn.linear2"), config.ffn_bias
    )
    for i in range(config.n_decoder_layers):
        ours, prefix = f"decoder.layers.{i}.", f"model.layers.{i}."
        for mine, name in layer_keys.items():
            put(f"{ours}{mine}.weight", take(f"{prefix}{name}.weight", shapes.get(mine, (d,))))  # (d,): a norm
            if has_bias.get(mine):
                put(f"{ours}{mine}.bias", take(f"{prefix}{name}.bias", shapes[mine][:1]))
    put("decoder.final_norm.weight", take("model.norm.weight", (d,)))
    checked.finish(what, lambda k: k.endswith(IGNORED_SUFFIXES))
    return {k: v.to(torch.float32) for k, v in converted.items()}


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    """The folder's tokenizer.json (byte-level BPE), with the markers its own template adds (a Llama tokenizer
    starts the text with <s>)."""
    return ByteLevelTokenizer.from_folder(folder, with_markers=True)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A Llama-family model's descriptor: pretrained, read with byte-level BPE ('Ġ' starts a word) or a SentencePiece
    vocabulary ('▁' starts a word), whichever its vocabulary spells, with its own marker tokens and the role config.json
    (or the GGUF file) gives each: SmolLM2's text starts with <|im_start|> and ends with <|im_end|>."""
    if tokenizer is None:
        return descriptor.for_config(config, "Llama family", "pretrained", **descriptor.BYTE_BPE_MARKS)
    kind = descriptor.spelt_by(tokenizer, descriptor.BYTE_BPE_MARKS, descriptor.SENTENCEPIECE_MARKS)
    # the roles as its own files say them, never GPT-2's or SentencePiece's by name (SmolLM2 has <|endoftext|> too)
    spelling = {k: v for k, v in kind.items() if k not in descriptor.ROLES}
    marks = descriptor.with_roles(spelling | {"specials": tokenizer.specials}, tokenizer, hf)
    return descriptor.for_config(config, "Llama family", "pretrained", **marks)
