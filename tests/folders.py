"""Tiny random Hugging Face model folders built offline, one builder per family the engine reads (litgpt's way: the
real converter runs on a tiny model of the real format). Each saves transformers' own model class with random weights
(config.json, model.safetensors or its shards, or pytorch_model.bin) beside the tokenizer files its family reads:
WordPiece's vocab.txt for BERT, a byte-level BPE trained here on a few English sentences for the others. BUILDERS names
each builder by the config.json model_type it writes; every test that needs such a folder builds it here."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

# BERT: a WordPiece vocabulary just large enough for the test sentences ("The cats sat on a mat.")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "##s", "a", "."]


def tiny_bert(seed: int = 0, **overrides):
    """A tiny random transformers BertModel over VOCAB (3 layers of 4 heads, eager attention, eval mode);
    overrides go to BertConfig."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    settings = dict(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
        type_vocab_size=2,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        attn_implementation="eager",
    )
    settings.update(overrides)
    return BertModel(BertConfig(**settings)).eval()


def make_bert_folder(
    path: Path,
    reference=None,
    *,
    weights: str = "safetensors",
    dtype: torch.dtype = torch.float32,
    shard_size: int | None = None,
    seed: int = 0,
    **overrides,
) -> Path:
    """A BERT folder at `path` (config.json, the weights, vocab.txt and tokenizer_config.json) holding `reference`'s
    weights (a BertModel the test compares against), else tiny_bert(seed, **overrides)'s. weights: "safetensors"
    (model.safetensors) or "bin" (pytorch_model.bin), the state dict as it is; shard_size: save_pretrained's shards of
    about this many bytes with model.safetensors.index.json naming each weight's shard, stored as `dtype`."""
    if weights not in ("safetensors", "bin"):
        raise ValueError(f"weights must be 'safetensors' or 'bin', not {weights!r}")
    reference = tiny_bert(seed, **overrides) if reference is None else reference
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if shard_size is not None:  # as save_pretrained writes a bigger model
        reference.to(dtype).save_pretrained(str(path), max_shard_size=shard_size)
    else:
        (path / "config.json").write_text(json.dumps(reference.config.to_dict()))
        state = {k: v.to(dtype).contiguous() for k, v in reference.state_dict().items()}
        if weights == "safetensors":
            save_file(state, str(path / "model.safetensors"))
        else:
            torch.save(state, path / "pytorch_model.bin")
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return path


# GPT-2, and the byte-level BPE the Llama and Qwen2 folders read too
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


def _byte_bpe(vocab_size: int | None = None):
    """train_tokenizer's BPE (the tokenizers.Tokenizer inside the ByteLevelBPETokenizer wrapper), padded to
    `vocab_size` (None: its own), and the config settings it fixes: the vocabulary's size, its end token bos and eos."""
    bpe = train_tokenizer()._tokenizer
    if vocab_size is not None:
        bpe = padded(bpe, vocab_size)
    end_id = bpe.token_to_id(END)
    return bpe, {"vocab_size": bpe.get_vocab_size(), "bos_token_id": end_id, "eos_token_id": end_id}


def _perturbed(model_class, config, seed: int, *, norms, embeddings, gain, shift, rest):
    """model_class(config) in eval mode, built after torch.manual_seed(seed), every parameter then drawn again far from
    its default so that a converter that drops, misplaces or mis-scales one cannot match: seeded standard normal noise
    (one draw of the parameter's shape, in named_parameters' order, from a generator seeded with `seed`) scaled by the
    first kind the name fits. A norm's (its name holds one of `norms`): gains 1 + gain * noise, shifts shift * noise
    (shift None: every parameter of a norm is a gain); an embedding table's (the name ends with one of `embeddings`):
    0.5 * noise; a bias: 0.1 * noise; any other weight: rest * noise."""
    torch.manual_seed(seed)
    model = model_class(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if any(part in name for part in norms):
                param.copy_(1.0 + gain * noise if shift is None or name.endswith("weight") else shift * noise)
            elif name.endswith(embeddings):
                param.copy_(0.5 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(rest * noise)
    if not config.tie_word_embeddings:
        assert model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    return model


def _saved(model, path: Path, dtype: torch.dtype, shard_size: int | None, bpe, tokenizer: str = "json") -> Path:
    """`model` saved at `path` by save_pretrained, stored as `dtype` (float16, bfloat16: as most published checkpoints
    are), split into shards of about `shard_size` bytes with model.safetensors.index.json naming each weight's shard
    (None: one file); beside it the byte-level BPE `bpe`: tokenizer.json, or vocab.json + merges.txt
    (tokenizer="vocab_merges")."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.to(dtype).save_pretrained(str(path), **({} if shard_size is None else {"max_shard_size": shard_size}))
    if tokenizer == "json":
        bpe.save(str(path / "tokenizer.json"))
    else:
        bpe.model.save(str(path))  # vocab.json + merges.txt
    return path


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
    bpe, tokens = _byte_bpe(vocab_size)
    config = GPT2Config(
        **tokens,
        n_embd=n_embd,
        n_head=n_head,
        n_layer=n_layer,
        n_positions=n_positions,
        n_inner=n_inner,
        activation_function=activation,
        tie_word_embeddings=tie,
        **overrides,
    )
    # ".ln_": each block's ln_1 and ln_2 and the final transformer.ln_f
    model = _perturbed(
        GPT2LMHeadModel,
        config,
        seed,
        norms=(".ln_",),
        embeddings=("wte.weight", "wpe.weight"),
        gain=0.3,
        shift=0.2,
        rest=0.15,
    )
    return _saved(model, path, dtype, shard_size, bpe, tokenizer)


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
    """A Llama folder at `path` (config.json, model.safetensors, tokenizer.json: the byte-level BPE of
    train_tokenizer), weights and RMSNorm gains far from their defaults; overrides go to LlamaConfig. family="qwen2":
    a Qwen2 folder instead (Llama with biases on W_Q, W_K, W_V), built the same way (make_qwen2_folder)."""
    import transformers

    LlamaConfig, LlamaForCausalLM = {  # noqa: N806 -- the classes, by family
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
    }[family]

    bpe, tokens = _byte_bpe()
    config = LlamaConfig(
        **tokens,
        hidden_size=hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        max_position_embeddings=positions,
        rope_theta=rope_theta,
        tie_word_embeddings=tie,
        **overrides,
    )
    # RMSNorm gains far from 1: a missing or misplaced gain could not pass
    model = _perturbed(
        LlamaForCausalLM,
        config,
        seed,
        norms=("norm",),
        embeddings=("embed_tokens.weight",),
        gain=0.5,
        shift=None,
        rest=0.2,
    )
    return _saved(model, path, dtype, shard_size, bpe)


def make_qwen2_folder(path: Path, **settings) -> Path:
    """A Qwen2 folder at `path`: make_llama_folder's, with Qwen2's classes (biases on W_Q, W_K and W_V)."""
    return make_llama_folder(path, family="qwen2", **settings)


def make_qwen3_folder(path: Path, *, head_dim: int = 16, window: int | None = None, **settings) -> Path:
    """A Qwen3 folder at `path`: make_llama_folder's with Qwen3's classes (QK-norm, heads of `head_dim`); `window`:
    a sliding window in the layers from max_window_layers on (overrides may give layer_types instead)."""
    sliding = {} if window is None else {"use_sliding_window": True, "sliding_window": window}
    return make_llama_folder(path, family="qwen3", head_dim=head_dim, **(sliding | settings))


def make_mistral_folder(path: Path, *, window: int | None = 6, **settings) -> Path:
    """A Mistral folder at `path`: make_llama_folder's with Mistral's classes, every layer's window `window` keys."""
    return make_llama_folder(path, family="mistral", sliding_window=window, **settings)


def make_gemma3_folder(
    path: Path,
    *,
    hidden_size: int = 48,
    heads: int = 4,
    kv_heads: int = 2,
    head_dim: int = 16,
    layers: int = 3,
    intermediate: int = 80,
    positions: int = 64,
    window: int = 5,
    pattern: int = 3,
    layer_types: list[str] | None = None,
    query_pre_attn_scalar: float = 24,
    local_base: float = 10000.0,
    global_base: float = 1000000.0,
    softcap: float | None = None,
    tie: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    shard_size: int | None = None,
    vocab_size: int | None = None,
    **overrides,
) -> Path:
    """A Gemma 3 text folder at `path` (Gemma3ForCausalLM: config.json, model.safetensors, tokenizer.json): local
    layers of a `window`-key sliding window, every `pattern`-th layer global (or `layer_types`), the two rotary bases,
    heads of `head_dim`, QK-norm and sandwich norms whose (1 + w) gains are far from 1; overrides go to
    Gemma3TextConfig. vocab_size: the tokenizer padded to that many tokens (a real model's vocabulary size)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    bpe, tokens = _byte_bpe(vocab_size)
    types = layer_types or ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
    config = Gemma3TextConfig(
        **tokens,
        pad_token_id=tokens["eos_token_id"],
        hidden_size=hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        num_hidden_layers=layers,
        intermediate_size=intermediate,
        max_position_embeddings=positions,
        sliding_window=window,
        layer_types=types,
        query_pre_attn_scalar=query_pre_attn_scalar,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": local_base},
            "full_attention": {"rope_type": "default", "rope_theta": global_base},
        },
        final_logit_softcapping=softcap,
        tie_word_embeddings=tie,
        attn_implementation="eager",
        **overrides,
    )
    model = _perturbed(
        Gemma3ForCausalLM,
        config,
        seed,
        norms=("norm",),
        embeddings=("embed_tokens.weight",),
        gain=0.5,
        shift=None,
        rest=0.2,
    )
    return _saved(model, path, dtype, shard_size, bpe)


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
    shard_size: int | None = None,
    **overrides,
) -> Path:
    """A GPT-NeoX folder at `path` (config.json, model.safetensors, tokenizer.json); rotary_pct and rope_theta as the
    Pythia files name them (transformers writes them into rope_parameters); overrides go to GPTNeoXConfig."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    bpe, tokens = _byte_bpe()
    config = GPTNeoXConfig(
        **tokens,
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
        **overrides,
    )
    # LayerNorm gains far from 1, shifts far from 0
    model = _perturbed(
        GPTNeoXForCausalLM,
        config,
        seed,
        norms=("layernorm", "layer_norm"),
        embeddings=("embed_in.weight",),
        gain=0.3,
        shift=0.2,
        rest=0.2,
    )
    return _saved(model, path, dtype, shard_size, bpe)


# config.json's model_type -> the builder of a tiny folder of that family (tests/models/test_folders.py checks that
# every family in models/families has one)
BUILDERS = {
    "bert": make_bert_folder,
    "gpt2": make_gpt2_folder,
    "llama": make_llama_folder,
    "qwen2": make_qwen2_folder,
    "gpt_neox": make_gptneox_folder,
    "qwen3": make_qwen3_folder,
    "mistral": make_mistral_folder,
    "gemma3_text": make_gemma3_folder,
}
