"""A tiny Llama GGUF file written offline from a tiny random Llama folder (tests.llama_folder), as llama.cpp's own
converter lays one out: metadata under "llama.", the byte-level BPE's tokens and merges, and W_Q, W_K rows permuted
for llama.cpp's rotary layout. Quantization aside, the same format as SmolLM2's file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def permute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter's order: per head, rows from (half, pair) to (pair, half)."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def gguf_name(hf_name: str) -> str:
    if hf_name in HF_TO_GGUF:
        return HF_TO_GGUF[hf_name]
    _, _, layer, *rest = hf_name.split(".")  # model.layers.{i}.<module>.weight
    return f"blk.{layer}.{HF_TO_GGUF['.'.join(rest[:-1])]}.weight"


def write_gguf(folder: Path, path: Path, architecture: str = "llama") -> Path:
    """The folder's weights, config and tokenizer as one GGUF file at `path`."""
    import gguf

    config = json.loads((folder / "config.json").read_text())
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    specials = {t["id"] for t in tokenizer["added_tokens"] if t["special"]}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(float(config.get("rope_parameters", {}).get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([3 if i in specials else 1 for i in range(len(tokens))])
    writer.add_add_bos_token(False)
    for name, weight in load_file(str(folder / "model.safetensors")).items():
        weight = weight.astype(np.float32)
        if name.endswith("q_proj.weight"):
            weight = permute(weight, heads)
        elif name.endswith("k_proj.weight"):
            weight = permute(weight, kv_heads)
        writer.add_tensor(gguf_name(name), weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
