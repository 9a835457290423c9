"""Hugging Face Mistral-family checkpoint -> our decoder-only model: Llama's block with a sliding window of keys in
every layer (config.json's sliding_window: query i reads keys i - w < j <= i; none when it is null) and heads of
config.json's head_dim. The whole family is this file: Llama's config, key map and converter with the window on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import checks, descriptor, llama
from attention_explorer.models.tokenize import ByteLevelTokenizer

MODEL_TYPE = "mistral"  # config.json's model_type this family reads
REFERENCE_CLASS = "MistralForCausalLM"  # transformers' class for the same folder (models.reference)


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Llama's config with config.json's sliding window over every layer."""
    with checks.config_fields("Mistral"):
        window = hf.get("sliding_window")
        return llama.decoder_config(hf, "Mistral", sliding_window=None if window is None else int(window))


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Llama's key map, as it is."""
    return llama.convert(checkpoint, config, llama.LAYER_KEYS, "Mistral decoder")


def load_tokenizer(folder: Path) -> ByteLevelTokenizer:
    return llama.load_tokenizer(folder)


def family(
    config: TransformerConfig, tokenizer: ByteLevelTokenizer | None = None, hf: Mapping | None = None
) -> descriptor.Family:
    """A Mistral-family model's descriptor: Llama's, named for its family."""
    return replace(llama.family(config, tokenizer, hf), name="Mistral family")
