"""Hugging Face BERT-family checkpoint -> our encoder: a key map and one pure renaming function."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import descriptor
from attention_explorer.models.families.checks import Checked, ConversionError, config_fields
from attention_explorer.models.tokenize import WordPieceTokenizer

MODEL_TYPE = "bert"  # config.json's model_type this family reads
REFERENCE_CLASS = "BertModel"  # transformers' class for the same folder (models.reference)

# Checkpoint keys we know and deliberately do not use: the pooler and pre-training heads sit on top of the
# encoder, and position_ids is a buffer of 0..max_len-1.
IGNORED_PREFIXES = ("pooler.", "cls.", "embeddings.position_ids")

EMBEDDING_KEYS = {
    "encoder.embeddings.token.weight": "embeddings.word_embeddings.weight",
    "encoder.embeddings.position.weight": "embeddings.position_embeddings.weight",
    "encoder.embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
    "encoder.embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "encoder.embeddings.norm.bias": "embeddings.LayerNorm.bias",
}

LAYER_KEYS = {  # ours (under encoder.layers.{i}.) -> theirs (under encoder.layer.{i}.)
    "self_attn.w_q": "attention.self.query",
    "self_attn.w_k": "attention.self.key",
    "self_attn.w_v": "attention.self.value",
    "self_attn.w_o": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",
    "ffn.linear1": "intermediate.dense",
    "ffn.linear2": "output.dense",
    "norm2": "output.LayerNorm",
}


def config_from_hf(hf: Mapping[str, object]) -> TransformerConfig:
    """Our config from a BERT config.json (post-LN, learned positions, segment embeddings, no decoder)."""
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(f"unsupported position_embedding_type {hf['position_embedding_type']!r}")
    activation = hf.get("hidden_act", "gelu")
    if activation not in ("gelu", "relu"):
        raise ConversionError(f"unsupported hidden_act {activation!r} (gelu or relu)")
    with config_fields("BERT"):
        return TransformerConfig(
            vocab_size=int(hf["vocab_size"]),
            d_model=int(hf["hidden_size"]),
            n_heads=int(hf["num_attention_heads"]),
            d_ff=int(hf["intermediate_size"]),
            n_encoder_layers=int(hf["num_hidden_layers"]),
            n_decoder_layers=0,
            max_len=int(hf["max_position_embeddings"]),
            positional="learned",
            activation=activation,
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            dropout=0.0,
            scale_embeddings=False,
            type_vocab_size=int(hf.get("type_vocab_size", 2)),
            embedding_norm=True,
            tie_output=False,
            pad_id=int(hf.get("pad_token_id") or 0),
        )


def key_map(n_layers: int) -> dict[str, str]:
    """Every parameter of our encoder -> its BERT checkpoint name (without the 'bert.' prefix)."""
    mapping = dict(EMBEDDING_KEYS)
    for i in range(n_layers):
        for ours, theirs in LAYER_KEYS.items():
            for leaf in ("weight", "bias"):
                mapping[f"encoder.layers.{i}.{ours}.{leaf}"] = f"encoder.layer.{i}.{theirs}.{leaf}"
    return mapping


def _normalise_key(key: str) -> str:
    """Strip the task-model prefix and rename TF-era LayerNorm gamma/beta."""
    if key.startswith("bert."):
        key = key[len("bert.") :]
    if key.endswith(".gamma"):
        key = key[: -len("gamma")] + "weight"
    elif key.endswith(".beta"):
        key = key[: -len("beta")] + "bias"
    return key


def convert(checkpoint: Mapping[str, Tensor], config: TransformerConfig) -> dict[str, Tensor]:
    """Rename a BERT state dict to ours, checking every key and shape; raises ConversionError listing problems."""
    checked = Checked({_normalise_key(k): v for k, v in checkpoint.items()})
    expected_shapes = _expected_shapes(config)
    converted: dict[str, Tensor] = {}
    for ours, name in key_map(config.n_encoder_layers).items():
        if (tensor := checked.take(name, expected_shapes[ours])) is not None:
            converted[ours] = tensor
    checked.finish("BERT encoder", lambda k: k.startswith(IGNORED_PREFIXES))
    return converted


def _expected_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Shape of every parameter of our encoder, from the config alone (no module is built)."""
    d, f = config.d_model, config.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "encoder.embeddings.token.weight": (config.vocab_size, d),
        "encoder.embeddings.position.weight": (config.max_len, d),
        "encoder.embeddings.token_type.weight": (config.type_vocab_size, d),
        "encoder.embeddings.norm.weight": (d,),
        "encoder.embeddings.norm.bias": (d,),
    }
    per_layer = {
        "self_attn.w_q": ((d, d), (d,)),
        "self_attn.w_k": ((d, d), (d,)),
        "self_attn.w_v": ((d, d), (d,)),
        "self_attn.w_o": ((d, d), (d,)),
        "norm1": ((d,), (d,)),
        "ffn.linear1": ((f, d), (f,)),
        "ffn.linear2": ((d, f), (d,)),
        "norm2": ((d,), (d,)),
    }
    for i in range(config.n_encoder_layers):
        for ours, (weight, bias) in per_layer.items():
            shapes[f"encoder.layers.{i}.{ours}.weight"] = weight
            shapes[f"encoder.layers.{i}.{ours}.bias"] = bias
    return shapes


def load_tokenizer(folder: Path) -> WordPieceTokenizer:
    """The folder's WordPiece tokenizer (tokenizer.json, else vocab.txt)."""
    return WordPieceTokenizer.from_folder(folder)


def family(config: TransformerConfig, tokenizer: object = None, hf: Mapping | None = None) -> descriptor.Family:
    """A BERT-family folder's descriptor: pretrained weights read with WordPiece ([CLS] ... [SEP])."""
    return descriptor.for_config(config, "BERT family", "pretrained", **descriptor.WORDPIECE_MARKS)
