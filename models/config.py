"""Frozen model configuration, the paper's base model and a toy shape (BERT- and GPT-2-family configs come from
their config.json, through models.convert_bert / models.convert_gpt2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["encoder-only", "decoder-only", "encoder-decoder"]

# the feed-forward activations configs name (Hugging Face's names): ReLU (the paper), exact GELU (BERT), GELU's tanh
# approximation (GPT-2's gelu_new, and its other spellings), x * sigmoid(1.702 x) (quick_gelu), SiLU
ACTIVATIONS = ("relu", "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu", "silu", "swish")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the Transformer; names follow Vaswani et al. 2017, section 3 and table 3."""

    vocab_size: int
    tgt_vocab_size: int | None = None  # None: source and target share one vocabulary (as in the paper)
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6  # 0 = decoder only (GPT-2 family): the decoder's layers have no cross-attention
    n_decoder_layers: int = 6  # 0 = encoder only (BERT family)
    max_len: int = 512
    # sinusoids added to the embedding (the paper), learned rows added (BERT, GPT-2), or rotary: nothing added, each
    # query/key pair turned by an angle that grows with the position (Su et al. 2021; the Llama family)
    positional: Literal["sinusoidal", "learned", "rotary"] = "sinusoidal"
    rope_theta: float = 10000.0  # rotary's base: pair i turns by position * rope_theta^(-2i/d_head)
    rotary_fraction: float = 1.0  # the share of each head's dimensions rotary turns (GPT-NeoX: a quarter)
    activation: str = "relu"  # one of ACTIVATIONS
    gated_ffn: bool = False  # down(act(gate x) * up x) (SwiGLU with SiLU; Shazeer 2020) instead of eq. (2)
    norm: Literal["layer", "rms"] = "layer"  # LayerNorm, or RMSNorm (no mean, no bias; Zhang & Sennrich 2019)
    norm_first: bool = False  # post-LN as in the paper and BERT; pre-LN in GPT-2
    parallel_residual: bool = False  # x + Attn(Norm1(x)) + FFN(Norm2(x)): both read x (GPT-NeoX; pre-LN, decoder-only)
    layer_norm_eps: float = 1e-5  # BERT uses 1e-12
    n_kv_heads: int | None = None  # grouped-query attention: fewer key/value heads, each shared; None = n_heads
    qkv_bias: bool = True  # biases of W_Q, W_K, W_V (the Llama family has none; Qwen2 has them)
    out_bias: bool = True  # bias of W_O
    ffn_bias: bool = True  # biases of the feed-forward's linear layers
    dropout: float = 0.1
    scale_embeddings: bool = True  # the paper multiplies embeddings by sqrt(d_model); BERT does not
    type_vocab_size: int = 0  # BERT's segment (token-type) embeddings; 0 = none
    embedding_norm: bool = False  # BERT normalises the summed embeddings
    tie_output: bool = True  # the paper shares the target embedding with the pre-softmax linear layer
    # and, with one vocabulary for both sides, the source embedding too (section 3.4); off by default, so
    # checkpoints written with two embedding matrices still load as they were trained
    share_embeddings: bool = False
    pad_id: int | None = 0  # None: the vocabulary has no padding token (GPT-2), so no key is ever masked as padding
    output_bias: bool = True  # the final linear layer's bias (GPT-2's has none)

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_encoder_layers < 0 or self.n_decoder_layers < 0 or self.n_encoder_layers + self.n_decoder_layers < 1:
            raise ValueError("a Transformer needs at least one encoder or decoder layer")
        if self.positional not in ("sinusoidal", "learned", "rotary"):
            raise ValueError(f"unknown positional encoding {self.positional!r}")
        if self.positional == "rotary" and self.d_head % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions: d_head={self.d_head} is odd")
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"unknown norm {self.norm!r}; choose layer or rms")
        if self.n_heads % self.key_value_heads:
            raise ValueError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.key_value_heads}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {', '.join(ACTIVATIONS)}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            raise ValueError("shared embeddings need one vocabulary for the source and the target")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def key_value_heads(self) -> int:
        """How many key/value heads each attention has (fewer than n_heads under grouped-query attention)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def is_encoder_decoder(self) -> bool:
        return self.n_encoder_layers > 0 and self.n_decoder_layers > 0

    @property
    def is_decoder_only(self) -> bool:
        return self.n_encoder_layers == 0

    @property
    def shape(self) -> Shape:
        """encoder-only (BERT), decoder-only (GPT-2) or encoder-decoder (the paper's)."""
        if self.is_decoder_only:
            return "decoder-only"
        return "encoder-decoder" if self.n_decoder_layers else "encoder-only"

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size


# The paper's base model (table 3, row "base"); vocabulary set by the tokenizer it is paired with.
PAPER_BASE = TransformerConfig(vocab_size=37000, share_embeddings=True)

# Small shapes for tests.
TOY = TransformerConfig(
    vocab_size=64, d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, max_len=64
)
