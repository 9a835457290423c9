"""Hugging Face Gemma 3 (text) checkpoint -> our decoder-only model: Llama's block with today's attention, each a
config choice of the same engine. Local layers (a sliding window of keys, rotary base 10,000) interleaved with global
ones (every earlier key, base 1,000,000) as config.json's layer_types says; QK-norm (an RMSNorm over each head's q and
k); sandwich norms (an RMSNorm before and after each sub-layer); RMSNorm's gain stored as w around 0 and applied as
(1 + w); GeGLU (the gated feed-forward with GELU's tanh form); the embedding times sqrt(d_model); the scores scaled by
query_pre_attn_scalar^-1/2; final-logit soft-capping where config.json sets it. Gemma 3 270M is one, shipped as a GGUF
file: models.gguf reads it into the same names this converter takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import checks, descriptor, llama
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.tokenize import ByteLevelTokenizer

MODEL_TYPE = "gemma3_text"  # config.json's model_type this family reads (Gemma3ForCausalLM's; a GGUF's "gemma3")
REFERENCE_CLASS = "Gemma3ForCausalLM"  # transformers' class for the same folder (models.reference)

# ours (under decoder.layers.{i}.) -> theirs (under model.layers.{i}.): Llama's projections, QK-norm, and four norms a
# layer: before and after attention (norm1, post_norm1), before and after the feed-forward (norm3, post_norm3)
LAYER_KEYS = {
    "norm1": "input_layernorm",
    "self_attn.w_q": "self_attn.q_proj",
    "self_attn.w_k": "self_attn.k_proj",
    "self_attn.w_v": "self_attn.v_proj",
    "self_attn.w_o": "self_attn.o_proj",
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
    "post_norm1": "post_attention_layernorm",
    "norm3": "pre_feedforward_layernorm",
    "post_norm3": "post_feedforward_layernorm",
    "ffn.gate": "mlp.gate_proj",
    "ffn.linear1": "mlp.up_proj",
    "ffn.linear2": "mlp.down_proj",
}
SLIDING_WINDOW_PATTERN = 6  # Gemma3TextConfig's default: five local layers, then a global one
QUERY_PRE_ATTN_SCALAR = 256  # Gemma3TextConfig's default: the scores times 256^-1/2 (a GGUF file does not say)
# Gemma3TextConfig's default rotary bases (rope_local_base_freq, rope_theta)
LOCAL_BASE, GLOBAL_BASE = 10000.0, 1000000.0


def _base(rope: object, kind: str, default: float) -> float:
    """One layer kind's rotary base from config.json's rope_parameters; only plain rotary positions are run."""
    if rope is None:
        return default
    if not isinstance(rope, dict):
        raise ConversionError(f"config.json's rope_parameters for {kind} is not an object")
    found = rope.get("rope_type", rope.get("type", "default"))
    if found not in ("default", None):
        raise ConversionError(
            f"config.json's rope_parameters asks for rope_type {found!r} in {kind} layers: only plain rotary positions "
            "are supported"
        )
    return float(rope.get("rope_theta", default))


def _bases(hf: Mapping[str, object]) -> tuple[float, float]:
    """(global base, local base): transformers 5's rope_parameters by layer type, or the older rope_theta,
    rope_local_base_freq and rope_scaling."""
    rope = hf.get("rope_parameters")
    if isinstance(rope, dict) and ("full_attention" in rope or "sliding_attention" in rope):
        return (
            _base(rope.get("full_attention"), "full_attention", GLOBAL_BASE),
            _base(rope.get("sliding_attention"), "sliding_attention", LOCAL_BASE),
        )
    scaling = hf.get("rope_scaling") or (rope if isinstance(rope, dict) else None)
    theta = hf.get("rope_theta", (scaling or {}).get("rope_theta", GLOBAL_BASE))
    return _base((scaling or {}) | {"rope_theta": theta}, "full_attention", GLOBAL_BASE), float(
        hf.get("rope_local_base_freq", LOCAL_BASE)
    )


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Our config from a Gemma 3 text config.json; what the engine does not run (soft-capped attention scores,
    bidirectional attention, scaled rotary positions, another layer type) is one ConversionError naming the field."""
    activation = checks.activation(hf, "hidden_activation", "gelu_pytorch_tanh")
    with checks.config_fields("Gemma 3"):
        for field in ("attn_logit_softcapping",):
            if hf.get(field) is not None:
                raise ConversionError(f"config.json sets {field} {hf[field]!r}: the engine does not cap scores")
        if hf.get("use_bidirectional_attention"):
            raise ConversionError("config.json sets use_bidirectional_attention true: the engine runs Gemma 3 causal")
        n_layers = int(hf["num_hidden_layers"])
        types = llama.layer_types(hf, n_layers)
        if types is None:
            pattern = int(hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", SLIDING_WINDOW_PATTERN)))
            types = tuple("global" if (i + 1) % pattern == 0 else "local" for i in range(n_layers))
        window = hf.get("sliding_window")
        if "local" in types and window is None:
            raise ConversionError("config.json's layer_types has sliding_attention layers but no sliding_window")
        global_base, local_base = _bases(hf)
        head_dim = int(hf.get("head_dim", 256))
        cap = hf.get("final_logit_softcapping")
        return llama.decoder_config(
            hf | {"head_dim": head_dim},
            "Gemma 3",
            activation=activation,
            rope_theta=global_base,
            rope_local_theta=local_base,
            sliding_window=int(window) if "local" in types else None,
            layer_types=types if "local" in types else None,
            qk_norm=True,
            sandwich_norm=True,
            norm_offset=1.0,
            scale_embeddings=True,
            query_scale=float(hf.get("query_pre_attn_scalar", QUERY_PRE_ATTN_SCALAR)) ** -0.5,
            logit_softcap=None if cap is None else float(cap),
            tie_output=bool(hf.get("tie_word_embeddings", True)),
        )


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Llama's converter over Gemma 3's key map (QK-norm, sandwich norms)."""
    return llama.convert(checkpoint, config, LAYER_KEYS, "Gemma 3 decoder")


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    return llama.load_tokenizer(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A Gemma 3 model's descriptor: Llama's (its vocabulary's word marks and marker tokens), named for its family."""
    return replace(llama.family(config, tokenizer, hf), name="Gemma 3 family")
