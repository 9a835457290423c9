"""The blocks a layer is built of, each a config choice written once: the feed-forward (eq. 2, or gated: SwiGLU),
the norm (LayerNorm, or RMSNorm) with its residual connection (post-LN as in the paper, or pre-norm), and multi-head
attention with its key/value heads, biases and rotary positions as the config says."""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor, nn

from attention_explorer.models.attention import MultiHeadAttention
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.positional import RotaryPositions


class QuickGELU(nn.Module):
    """x * sigmoid(1.702 x): the sigmoid approximation of GELU that some configs name quick_gelu."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(1.702 * x)


def activation(name: str) -> nn.Module:
    """The module a config's activation name means: exact (erf) GELU for BERT's "gelu", the tanh approximation for
    GPT-2's "gelu_new" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), also spelt gelu_pytorch_tanh, gelu_fast)."""
    modules: dict[str, Callable[[], nn.Module]] = {
        "relu": nn.ReLU,
        "gelu": nn.GELU,
        "gelu_new": lambda: nn.GELU(approximate="tanh"),
        "gelu_pytorch_tanh": lambda: nn.GELU(approximate="tanh"),
        "gelu_fast": lambda: nn.GELU(approximate="tanh"),
        "quick_gelu": QuickGELU,
        "silu": nn.SiLU,
        "swish": nn.SiLU,
    }
    return modules[name]()


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, eq. (2); GELU instead of ReLU for the BERT and GPT-2 families; gated
    (the Llama family's SwiGLU): W_2 (SiLU(x W_gate) * x W_1), the activated gate scaling each unit of x W_1."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.linear1 = nn.Linear(config.d_model, config.d_ff, bias=config.ffn_bias)  # the "up" projection when gated
        self.linear2 = nn.Linear(config.d_ff, config.d_model, bias=config.ffn_bias)  # "down"
        self.gate = nn.Linear(config.d_model, config.d_ff, bias=config.ffn_bias) if config.gated_ffn else None
        self.activation_name = config.activation
        self.activation = activation(config.activation)
        self.dropout = nn.Dropout(config.dropout)

    def hidden(self, x: Float[Tensor, "... D"]) -> Float[Tensor, "... F"]:
        """What W_2 reads: act(x W_1 + b_1), or act(x W_gate) * x W_1 when gated."""
        if self.gate is None:
            return self.activation(self.linear1(x))
        return self.activation(self.gate(x)) * self.linear1(x)

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B T D"]:
        return self.linear2(self.dropout(self.hidden(x)))


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019): LayerNorm without the mean and without a bias. `offset`:
    the gain is (offset + w), Gemma's (1 + w) with w stored around 0."""

    def __init__(self, d_model: int, eps: float = 1e-6, offset: float = 0.0) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model) if not offset else torch.zeros(d_model))
        self.eps = eps
        self.offset = offset

    def forward(self, x: Tensor) -> Tensor:
        gain = self.weight if not self.offset else self.offset + self.weight
        return gain * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def norm_layer(config: TransformerConfig, width: int | None = None) -> nn.Module:
    """The config's norm over d_model (or `width`): LayerNorm (the paper, BERT, GPT-2) or RMSNorm (the Llama family,
    with Gemma's (1 + w) gain where the config says)."""
    if config.norm == "rms":
        return RMSNorm(width or config.d_model, config.layer_norm_eps, config.norm_offset)
    return nn.LayerNorm(width or config.d_model, eps=config.layer_norm_eps)


def attention_layer(
    config: TransformerConfig, rotary: RotaryPositions | None = None, window: int | None = None
) -> MultiHeadAttention:
    """One multi-head attention as the config describes it (key/value heads, biases, head width, QK-norm, score
    scale); rotary for self-attention; `window`: a local layer's sliding window of keys."""
    return MultiHeadAttention(
        config.d_model,
        config.n_heads,
        config.dropout,
        config.key_value_heads,
        config.qkv_bias,
        config.out_bias,
        rotary,
        config.d_head,
        norm_layer(config, config.d_head) if config.qk_norm else None,
        norm_layer(config, config.d_head) if config.qk_norm else None,
        config.query_scale,
        window,
    )


def rotary_positions(config: TransformerConfig, base: float | None = None) -> RotaryPositions | None:
    """The rotary tables a model with rotary positions shares between its layers' self-attentions (`base`: a layer
    kind's own, as Gemma 3's local layers have); None otherwise."""
    if config.positional != "rotary":
        return None
    return RotaryPositions(config.max_len, config.d_head, base or config.rope_theta, config.rotary_dims)


class OutputLayer(nn.Linear):
    """The final linear layer (figure 1, top: its logits go to softmax), with the logits soft-capped as
    cap * tanh(logits / cap) where the config sets a cap (Gemma 2): every caller of model.generator gets the same."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool, softcap: float | None = None) -> None:
        super().__init__(d_model, vocab_size, bias=bias)
        self.softcap = softcap

    def forward(self, x: Tensor) -> Tensor:
        logits = super().forward(x)
        if self.softcap is None:
            return logits
        return torch.tanh(logits / self.softcap) * self.softcap


class Residual:
    """Residual connection and norm around a sub-layer (section 3.1): post-LN as in the paper, or pre-LN. Mixed
    into the norm module itself, so the norm's weights keep their names (norm1.weight)."""

    norm_first: bool
    dropout: nn.Dropout
    forward: Callable[[Tensor], Tensor]  # the norm's own

    def normed_input(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: x itself (post-LN) or Norm(x) (pre-LN)."""
        return self.forward(x) if self.norm_first else x

    def combine(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """Norm(x + Sublayer(x)) for post-LN; x + Sublayer(Norm(x)) for pre-LN."""
        if self.norm_first:
            return x + self.dropout(sublayer_out)
        return self.forward(x + self.dropout(sublayer_out))


class ResidualNorm(Residual, nn.LayerNorm):
    """A sub-layer's residual connection with LayerNorm."""

    def __init__(self, config: TransformerConfig) -> None:
        nn.LayerNorm.__init__(self, config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.norm_first = config.norm_first


class ResidualRMSNorm(Residual, RMSNorm):
    """A sub-layer's residual connection with RMSNorm."""

    def __init__(self, config: TransformerConfig) -> None:
        RMSNorm.__init__(self, config.d_model, config.layer_norm_eps, config.norm_offset)
        self.dropout = nn.Dropout(config.dropout)
        self.norm_first = config.norm_first


def residual_norm(config: TransformerConfig) -> ResidualNorm | ResidualRMSNorm:
    """The residual connection and norm of one sub-layer, with the config's norm."""
    return ResidualRMSNorm(config) if config.norm == "rms" else ResidualNorm(config)
