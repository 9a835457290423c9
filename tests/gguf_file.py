"""Tiny GGUF files written offline from tiny random Llama or Qwen2 folders (tests.folders) with `gguf`'s own
GGUFWriter, as llama.cpp's convert_hf_to_gguf.py lays one out: metadata under the architecture's name, the byte-level
BPE's tokens and merges, W_Q's and W_K's rows permuted for llama.cpp's rotary layout (the llama architecture only:
Qwen2 runs llama.cpp's half-split rotary and is written as is), norms and biases in F32 and every matrix in the
storage type asked for (F32, F16, BF16, Q8_0, Q4_0, ..., quantized by gguf.quants.quantize)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

HF_TO_GGUF = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}
# Gemma 3's layer names, as llama.cpp's converter writes them: its post_attention_layernorm is the norm after attention
GEMMA3_TO_GGUF = HF_TO_GGUF | {
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}


def permute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter's order: per head, rows from (half, pair) to (pair, half)."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def gguf_name(hf_name: str, names: dict[str, str] = HF_TO_GGUF) -> str:
    """model.layers.3.self_attn.q_proj.bias -> blk.3.attn_q.bias."""
    module, _, suffix = hf_name.rpartition(".")
    if module in names:
        return f"{names[module]}.{suffix}"
    _, _, layer, *rest = module.split(".")  # model.layers.{i}.<module>
    return f"blk.{layer}.{names['.'.join(rest)]}.{suffix}"


# where a K-quant block (256 weights) keeps its float16 scales: (byte offset, count); gguf writes no K-quants, so
# their blocks are random bytes with these scales set small (the weights then stay about the size of trained ones)
K_QUANT_SCALES = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208, 1)}


def stored(weight: np.ndarray, kind: str):
    """(data, raw_dtype) for GGUFWriter.add_tensor: the weight in storage type `kind` ("F32", "F16", "F64", any type
    gguf.quants.quantize writes: "BF16", "Q8_0", "Q4_0", ..., or a K-quant of K_QUANT_SCALES, made of random blocks
    of the weight's shape rather than of its values)."""
    import gguf

    if kind in ("F32", "F16", "F64"):
        return weight.astype({"F32": np.float32, "F16": np.float16, "F64": np.float64}[kind]), None
    qtype = gguf.GGMLQuantizationType[kind]
    if kind not in K_QUANT_SCALES:
        return gguf.quants.quantize(weight, qtype), qtype
    block, size = gguf.constants.GGML_QUANT_SIZES[qtype]
    rows, columns = weight.shape
    blocks = np.random.default_rng(rows * 7919 + columns).integers(0, 256, (rows, columns // block, size), np.uint8)
    start, count = K_QUANT_SCALES[kind]
    scales = np.full((rows, columns // block, count), 2e-4, np.float16)
    blocks[..., start : start + 2 * count] = scales.view(np.uint8)
    return blocks.reshape(rows, -1), qtype


def write_gguf(
    folder: Path,
    path: Path,
    architecture: str | None = None,
    kind: str = "F32",
    pre: str | None = None,
    kinds: dict[str, str] | None = None,
    edit: Callable[[object], None] | None = None,
    tokenizer: bool = True,
) -> Path:
    """The folder's weights, config and tokenizer as one GGUF file at `path`. architecture: the name written (default:
    the folder's model_type); kind: the matrices' storage type (1-D norms and biases stay F32, as llama.cpp keeps
    them); kinds: a storage type for single GGUF tensor names; pre: tokenizer.ggml.pre; edit(writer): more metadata;
    tokenizer=False leaves the tokenizer out."""
    import gguf

    config = json.loads((folder / "config.json").read_text())
    architecture = architecture or {"gemma3_text": "gemma3"}.get(config["model_type"], config["model_type"])
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    rope = config.get("rope_parameters", {})
    rope = rope.get("full_attention", rope)  # Gemma 3's global layers' base is the file's
    theta = rope.get("rope_theta", config.get("rope_theta", 10000.0))
    writer.add_rope_freq_base(float(theta))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    if config.get("head_dim") and config["head_dim"] * heads != config["hidden_size"]:  # Qwen3, Gemma 3
        writer.add_key_length(config["head_dim"])
        writer.add_value_length(config["head_dim"])
    if config.get("sliding_window"):  # Gemma 3's local layers, Mistral's every layer, Qwen3 where it slides
        writer.add_sliding_window(config["sliding_window"])
    if tokenizer:
        bpe = json.loads((folder / "tokenizer.json").read_text())
        vocab = bpe["model"]["vocab"]
        tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
        merges = [m if isinstance(m, str) else " ".join(m) for m in bpe["model"]["merges"]]
        specials = {t["id"] for t in bpe["added_tokens"] if t["special"]}
        writer.add_vocab_size(len(tokens))
        writer.add_tokenizer_model("gpt2")
        if pre is not None:
            writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_merges(merges)
        writer.add_token_types([3 if i in specials else 1 for i in range(len(tokens))])
        writer.add_add_bos_token(False)
        if config.get("bos_token_id") is not None:  # the marker tokens' roles, as llama.cpp's converter writes them
            writer.add_bos_token_id(config["bos_token_id"])
        if config.get("eos_token_id") is not None:
            writer.add_eos_token_id(config["eos_token_id"])
    if edit is not None:
        edit(writer)
    for name, weight in load_file(str(folder / "model.safetensors")).items():
        weight = weight.astype(np.float32)
        if architecture == "llama" and name.endswith("q_proj.weight"):
            weight = permute(weight, heads)
        elif architecture == "llama" and name.endswith("k_proj.weight"):
            weight = permute(weight, kv_heads)
        target = gguf_name(name, GEMMA3_TO_GGUF if architecture == "gemma3" else HF_TO_GGUF)
        if architecture == "gemma3" and "norm" in name:
            weight = weight + np.float32(1.0)  # llama.cpp stores Gemma's gains as the (1 + w) the norm multiplies by
        data, raw_dtype = stored(weight, (kinds or {}).get(target, kind if weight.ndim == 2 else "F32"))
        writer.add_tensor(target, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
