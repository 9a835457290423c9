"""Frozen model configuration, the paper's base model and a toy shape (BERT- and GPT-2-family configs come from
their config.json, through models/families/)."""

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
    # the share of each head's dimensions rotary turns: the first int(d_head * f) of every query and key, the rest
    # passed through unturned (GPT-NeoX's rotary_pct: 0.25 in the Pythia suite)
    rotary_fraction: float = 1.0
    activation: str = "relu"  # one of ACTIVATIONS
    gated_ffn: bool = False  # down(act(gate x) * up x) (SwiGLU with SiLU; Shazeer 2020) instead of eq. (2)
    norm: Literal["layer", "rms"] = "layer"  # LayerNorm, or RMSNorm (no mean, no bias; Zhang & Sennrich 2019)
    norm_first: bool = False  # post-LN as in the paper and BERT; pre-LN in GPT-2
    # the parallel block (GPT-J, GPT-NeoX): attention and the feed-forward both read the layer's input x, each through
    # its own norm, and both add to it: x + Attn(Norm1(x)) + FFN(Norm2(x)); off: one after the other (section 3.1)
    parallel_residual: bool = False
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
    # today's attention (Gemma 2/3, Qwen3, Mistral), each off by default: a head's own width where it is not
    # d_model / n_heads (Gemma 3 270M: 4 heads of 256 over d_model 640); an RMSNorm over each head's q and k before
    # rotary (QK-norm); a norm after each sub-layer as well as before it (sandwich: x + Norm'(Sublayer(Norm(x))));
    # RMSNorm's gain as (1 + w) (Gemma stores w around 0); the scores' scale when it is not 1/sqrt(d_head) (Gemma's
    # query_pre_attn_scalar^-1/2); the final logits soft-capped as cap * tanh(logits / cap)
    head_dim: int | None = None
    qk_norm: bool = False
    sandwich_norm: bool = False
    norm_offset: float = 0.0
    query_scale: float | None = None
    logit_softcap: float | None = None
    # a sliding window of w keys: query i reads keys i - w < j <= i only (Mistral, Gemma's local layers); which of the
    # decoder's layers have it ("local"; "global" reads every earlier key): None = every layer local when a window is
    # set; local layers turn q and k with their own rotary base (Gemma 3: 10,000 local, 1,000,000 global)
    sliding_window: int | None = None
    layer_types: tuple[Literal["local", "global"], ...] | None = None
    rope_local_theta: float | None = None

    def __post_init__(self) -> None:
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_encoder_layers < 0 or self.n_decoder_layers < 0 or self.n_encoder_layers + self.n_decoder_layers < 1:
            raise ValueError("a Transformer needs at least one encoder or decoder layer")
        if self.positional not in ("sinusoidal", "learned", "rotary"):
            raise ValueError(f"unknown positional encoding {self.positional!r}")
        if not 0 < self.rotary_fraction <= 1:
            raise ValueError(
                f"rotary_fraction={self.rotary_fraction} is not a share of a head's dimensions (0 < f <= 1)"
            )
        if self.rotary_fraction != 1 and self.positional != "rotary":
            raise ValueError(f"rotary_fraction={self.rotary_fraction} needs rotary positions, not {self.positional!r}")
        if self.positional == "rotary" and (self.rotary_dims % 2 or not self.rotary_dims):
            raise ValueError(
                f"rotary positions turn pairs of dimensions: int(d_head={self.d_head} x rotary_fraction="
                f"{self.rotary_fraction}) = {self.rotary_dims} dimensions is not a positive even number"
            )
        if self.parallel_residual and not (self.norm_first and self.is_decoder_only):
            raise ValueError(
                "parallel_residual (x + Attn(Norm1(x)) + FFN(Norm2(x))) needs pre-norm (norm_first=True) and a "
                "decoder-only model (no encoder, so no cross-attention)"
            )
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"unknown norm {self.norm!r}; choose layer or rms")
        if self.n_heads % self.key_value_heads:
            raise ValueError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.key_value_heads}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {', '.join(ACTIVATIONS)}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            raise ValueError("shared embeddings need one vocabulary for the source and the target")
        self._check_modern()

    def _check_modern(self) -> None:
        """The Gemma / Qwen3 / Mistral fields: decoder-only, pre-norm, and a window where layers are local."""
        modern = (self.sandwich_norm, self.sliding_window is not None, self.layer_types is not None)
        if any(modern) and not (self.is_decoder_only and self.norm_first):
            raise ValueError("sandwich norms and sliding windows need a pre-norm decoder-only model")
        if self.head_dim is not None and self.head_dim < 1:
            raise ValueError(f"head_dim={self.head_dim} is not a positive width")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window={self.sliding_window} is not a positive number of keys")
        if self.layer_types is not None:
            if len(self.layer_types) != self.n_decoder_layers:
                raise ValueError(f"{len(self.layer_types)} layer_types for {self.n_decoder_layers} layers")
            if set(self.layer_types) - {"local", "global"}:
                raise ValueError(f"layer_types must be 'local' or 'global', not {self.layer_types}")
            if "local" in self.layer_types and self.sliding_window is None:
                raise ValueError("local layers need a sliding_window")
        if self.norm_offset and self.norm != "rms":
            raise ValueError("norm_offset (a (1 + w) gain) is RMSNorm's")
        if self.logit_softcap is not None and self.logit_softcap <= 0:
            raise ValueError(f"logit_softcap={self.logit_softcap} is not a positive cap")

    @property
    def d_head(self) -> int:
        """A head's width: d_model / n_heads (the paper), or the config's own head_dim."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def d_attention(self) -> int:
        """The width of all heads side by side: what W_Q writes and W_O reads (d_model in the paper)."""
        return self.n_heads * self.d_head

    def local(self, layer: int) -> bool:
        """Whether decoder layer `layer` (from 0) reads a sliding window of keys rather than every earlier one."""
        if self.sliding_window is None:
            return False
        return self.layer_types is None or self.layer_types[layer] == "local"

    @property
    def rotary_dims(self) -> int:
        """How many of each head's dimensions rotary turns: the first int(d_head x rotary_fraction), as GPT-NeoX."""
        return int(self.d_head * self.rotary_fraction)

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
