"""Tiny random Llama folders built offline: transformers' LlamaForCausalLM saved as safetensors, with the byte-level
BPE of tests.gpt2_folder (tokenizer.json), weights and RMSNorm gains far from their defaults."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.gpt2_folder import END, train_tokenizer


def make_llama_folder(
    path: Path,
    *,
    hidden_size: int = 48,
    heads: int = 4,
    kv_heads: int = 2,
    layers: int = 2,
    intermediate: int = 80,
    positions: int = 64,
    rope_theta: float = 10000.0,
    tie: bool = False,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    shard_size: int | None = None,
    family: str = "llama",
    **overrides,
) -> Path:
    """A Llama folder at `path` (config.json, model.safetensors, tokenizer.json); overrides go to LlamaConfig.
    family="qwen2": a Qwen2 folder instead (Llama with biases on W_Q, W_K, W_V), built the same way."""
    import transformers

    LlamaConfig, LlamaForCausalLM = {  # noqa: N806 -- the classes, by family
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    }[family]

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    bpe = train_tokenizer()
    end_id = bpe.token_to_id(END)
    config = LlamaConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        max_position_embeddings=positions,
        rope_theta=rope_theta,
        tie_word_embeddings=tie,
        bos_token_id=end_id,
        eos_token_id=end_id,
        **overrides,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "norm" in name:  # RMSNorm gains far from 1: a missing or misplaced gain could not pass
                param.copy_(1.0 + 0.5 * noise)
            elif name.endswith("embed_tokens.weight"):
                param.copy_(0.5 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.2 * noise)
    # dtype: stored as (float16, bfloat16: as most published checkpoints are); shard_size: split into shards of
    # about this many bytes with model.safetensors.index.json naming each weight's shard (None: one file)
    model.to(dtype).save_pretrained(str(path), **({} if shard_size is None else {"max_shard_size": shard_size}))
    bpe.save(str(path / "tokenizer.json"))
    return path
