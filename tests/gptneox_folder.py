"""Tiny random GPT-NeoX folders built offline: transformers' GPTNeoXForCausalLM saved as safetensors, with the
byte-level BPE of tests.gpt2_folder (tokenizer.json), LayerNorm gains, biases and weights far from their defaults."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.gpt2_folder import END, train_tokenizer


def make_gptneox_folder(
    path: Path,
    *,
    hidden_size: int = 64,
    heads: int = 4,
    layers: int = 2,
    intermediate: int = 96,
    positions: int = 64,
    rotary_pct: float = 0.25,
    rope_theta: float = 10000.0,
    parallel: bool = True,
    tie: bool = False,
    attention_bias: bool = True,
    activation: str = "gelu",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    **overrides,
) -> Path:
    """A GPT-NeoX folder at `path` (config.json, model.safetensors, tokenizer.json); rotary_pct and rope_theta as the
    Pythia files name them (transformers writes them into rope_parameters); overrides go to GPTNeoXConfig."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    bpe = train_tokenizer()._tokenizer  # the tokenizers.Tokenizer inside the ByteLevelBPETokenizer wrapper
    end_id = bpe.token_to_id(END)
    config = GPTNeoXConfig(
        vocab_size=bpe.get_vocab_size(),
        hidden_size=hidden_size,
        num_attention_heads=heads,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        max_position_embeddings=positions,
        rotary_pct=rotary_pct,
        rotary_emb_base=rope_theta,
        use_parallel_residual=parallel,
        tie_word_embeddings=tie,
        attention_bias=attention_bias,
        hidden_act=activation,
        bos_token_id=end_id,
        eos_token_id=end_id,
        **overrides,
    )
    torch.manual_seed(seed)
    model = GPTNeoXForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if "layernorm" in name or "layer_norm" in name:  # gains far from 1, shifts far from 0
                param.copy_(1.0 + 0.3 * noise if name.endswith("weight") else 0.2 * noise)
            elif name.endswith("embed_in.weight"):
                param.copy_(0.5 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.2 * noise)
        if not tie:
            assert model.lm_head.weight.data_ptr() != model.gpt_neox.embed_in.weight.data_ptr()
    model.to(dtype).save_pretrained(str(path))
    bpe.save(str(path / "tokenizer.json"))
    return path
