"""Hugging Face Qwen3-family checkpoint -> our decoder-only model: Llama's block with QK-norm (an RMSNorm over each
head's queries and keys, before rotary), heads of their own width (head_dim, 128 in the published models, whatever
hidden_size / heads is), and, where config.json turns it on, a sliding window of keys in the layers layer_types names
"sliding_attention". The whole family is this file: Llama's config, key map and converter with those switched on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import checks, descriptor, llama
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.tokenize import ByteLevelTokenizer

MODEL_TYPE = "qwen3"  # config.json's model_type this family reads
REFERENCE_CLASS = "Qwen3ForCausalLM"  # transformers' class for the same folder (models.reference)

# Llama's layer, with each head's query and key norms (self_attn.q_norm, self_attn.k_norm on both sides)
LAYER_KEYS = llama.LAYER_KEYS | {"self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm"}


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Llama's config with QK-norm, config.json's head_dim, and its sliding window where layer_types asks for one."""
    with checks.config_fields("Qwen3"):
        n_layers = int(hf["num_hidden_layers"])
        window = hf.get("sliding_window") if hf.get("use_sliding_window") else None
        types = llama.layer_types(hf, n_layers)
        if types is None and window is not None:  # older files: every layer from max_window_layers on slides
            first = int(hf.get("max_window_layers", n_layers))
            types = tuple("local" if i >= first else "global" for i in range(n_layers))
        if types is not None and "local" in types and window is None:
            raise ConversionError("config.json's layer_types has sliding_attention layers but no sliding_window")
        if types is not None and "local" not in types:
            types, window = None, None  # every layer global: no window to carry
        return llama.decoder_config(
            hf,
            "Qwen3",
            qk_norm=True,
            sliding_window=None if window is None else int(window),
            layer_types=types,
        )


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Llama's key map with each layer's q_norm and k_norm."""
    return llama.convert(checkpoint, config, LAYER_KEYS, "Qwen3 decoder")


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    return llama.load_tokenizer(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A Qwen3-family model's descriptor: Llama's, named for its family."""
    return replace(llama.family(config, tokenizer, hf), name="Qwen3 family")
