"""Frozen model configuration, the paper's base model and a toy shape (BERT-family configs come from their
config.json, through convert_bert.config_from_hf)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the Transformer; names follow Vaswani et al. 2017, section 3 and table 3."""

    vocab_size: int
    tgt_vocab_size: int | None = None  # None: source and target share one vocabulary (as in the paper)
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6  # 0 = encoder only (BERT family)
    max_len: int = 512
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"
    activation: Literal["relu", "gelu"] = "relu"
    norm_first: bool = False  # post-LN as in the paper and BERT
    layer_norm_eps: float = 1e-5  # BERT uses 1e-12
    dropout: float = 0.1
    scale_embeddings: bool = True  # the paper multiplies embeddings by sqrt(d_model); BERT does not
    type_vocab_size: int = 0  # BERT's segment (token-type) embeddings; 0 = none
    embedding_norm: bool = False  # BERT normalises the summed embeddings
    tie_output: bool = True  # the paper shares the target embedding with the pre-softmax linear layer
    # and, with one vocabulary for both sides, the source embedding too (section 3.4); off by default, so
    # checkpoints written with two embedding matrices still load as they were trained
    share_embeddings: bool = False
    pad_id: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_encoder_layers < 1:
            raise ValueError("a Transformer needs at least one encoder layer")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"unknown positional encoding {self.positional!r}")
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {self.activation!r}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            raise ValueError("shared embeddings need one vocabulary for the source and the target")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def is_encoder_decoder(self) -> bool:
        return self.n_decoder_layers > 0

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size


# The paper's base model (table 3, row "base"); vocabulary set by the tokenizer it is paired with.
PAPER_BASE = TransformerConfig(vocab_size=37000, share_embeddings=True)

# Small shapes for tests.
TOY = TransformerConfig(
    vocab_size=64, d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, max_len=64
)
