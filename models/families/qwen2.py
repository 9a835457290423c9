"""Hugging Face Qwen2-family checkpoint -> our decoder-only model: the Llama family with biases on W_Q, W_K and W_V
(none on W_O or the feed-forward). The whole family is this file: Llama's config, key map and converter, with the
biases switched on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import descriptor, llama
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.tokenize import ByteLevelTokenizer

MODEL_TYPE = "qwen2"  # config.json's model_type this family reads
REFERENCE_CLASS = "Qwen2ForCausalLM"  # transformers' class for the same folder (models.reference)


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Llama's config with biases on the query, key and value projections only."""
    if hf.get("use_sliding_window"):
        raise ConversionError("config.json asks for sliding-window attention, which is not supported")
    return replace(llama.config_from_hf(hf), qkv_bias=True, out_bias=False, ffn_bias=False)


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Llama's key map, the q/k/v biases included (models.families.llama.convert reads them from the config)."""
    return llama.convert(checkpoint, config)


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    return llama.load_tokenizer(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A Qwen2-family model's descriptor: Llama's, named for its family."""
    return replace(llama.family(config, tokenizer, hf), name="Qwen2 family")
