"""Tiny random GPT-2 folders built offline: transformers' GPT2LMHeadModel saved as safetensors, with a byte-level BPE
trained here on a few English sentences (tokenizer.json, or vocab.json + merges.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

END = "<|endoftext|>"
CORPUS = (
    "the cat sat on the mat.",
    "the dog sat on the rug and the cat sat on the dog.",
    "a cat and a dog played in the garden near the house.",
    "the quick brown fox jumps over the lazy dog.",
    "she said that the bird was singing in the tree.",
    "we read the book, then we went to the park to play.",
    "the animal did not cross the street because it was too tired.",
    "he gave her a red apple and she thanked him for it.",
    "attention lets each word look at the other words in the sentence.",
    "the model predicts the next word from the words before it.",
)
# a few merges past the 256 bytes and the end token: common words become one token, rarer ones several
VOCAB_SIZE = 400


def train_tokenizer(vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE trained on CORPUS (deterministic; a few milliseconds)."""
    from tokenizers.implementations import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        list(CORPUS) * 4, vocab_size=vocab_size, min_frequency=2, special_tokens=[END], show_progress=False
    )
    return tokenizer


def padded(bpe, vocab_size: int):
    """The trained BPE (a tokenizers.Tokenizer) with unused tokens appended to its vocabulary up to `vocab_size`: a
    model vocabulary as large as a real one (GPT-2's 50,257) that no text on CORPUS's words ever reaches."""
    data = json.loads(bpe.to_str())
    vocab = data["model"]["vocab"]
    if vocab_size < len(vocab):
        raise ValueError(f"vocab_size {vocab_size} is below the trained tokenizer's {len(vocab)} tokens")
    vocab.update({f"<|unused{i}|>": i for i in range(len(vocab), vocab_size)})
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(data))


def make_gpt2_folder(
    path: Path,
    *,
    n_embd: int = 48,
    n_head: int = 4,
    n_layer: int = 2,
    n_positions: int = 64,
    n_inner: int | None = None,
    activation: str = "gelu_new",
    tokenizer: str = "json",
    tie: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    shard_size: int | None = None,
    vocab_size: int | None = None,
    **overrides,
) -> Path:
    """A GPT-2 folder at `path` (config.json, model.safetensors, tokenizer files) with random weights far from the
    defaults (LayerNorm gains and biases not 1 and 0, weights big enough that attention is not uniform).
    tokenizer: "json" (tokenizer.json) or "vocab_merges" (vocab.json + merges.txt); vocab_size: the tokenizer's
    vocabulary padded with unused tokens to this size (None: the trained BPE's own); overrides go to GPT2Config."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if tokenizer not in ("json", "vocab_merges"):
        raise ValueError(f"tokenizer must be 'json' or 'vocab_merges', not {tokenizer!r}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    bpe = train_tokenizer()._tokenizer  # the tokenizers.Tokenizer inside the ByteLevelBPETokenizer wrapper
    if vocab_size is not None:
        bpe = padded(bpe, vocab_size)
    end_id = bpe.token_to_id(END)
    config = GPT2Config(
        vocab_size=bpe.get_vocab_size(),
        n_embd=n_embd,
        n_head=n_head,
        n_layer=n_layer,
        n_positions=n_positions,
        n_inner=n_inner,
        activation_function=activation,
        tie_word_embeddings=tie,
        bos_token_id=end_id,
        eos_token_id=end_id,
        **overrides,
    )
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                param.copy_(1.0 + 0.3 * noise if name.endswith("weight") else 0.2 * noise)
            elif name.endswith(("wte.weight", "wpe.weight")):
                param.copy_(0.5 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.15 * noise)
        if not tie:
            assert model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr()
    # dtype: stored as (float16, bfloat16: as most published checkpoints are); shard_size: split into shards of
    # about this many bytes with model.safetensors.index.json naming each weight's shard (None: one file)
    model.to(dtype).save_pretrained(str(path), **({} if shard_size is None else {"max_shard_size": shard_size}))
    if tokenizer == "json":
        bpe.save(str(path / "tokenizer.json"))
    else:
        bpe.model.save(str(path))  # vocab.json + merges.txt
    return path
