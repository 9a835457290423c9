"""Positional information: the paper's sinusoids (section 3.5), learned position embeddings (BERT) and rotary
positions (Su et al. 2021), on all of a head's dimensions (Llama) or on its first share only (GPT-NeoX)."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn


def sinusoidal_table(max_len: int, d_model: int) -> Float[Tensor, "T D"]:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)); section 3.5."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    # 10000^(-2i/d_model) for i = 0 .. d_model/2 - 1, in float64 so the table is exact to float32 precision
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)  # even dimensions
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])  # odd dimensions (d_model may be odd)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids added to the embeddings; not a parameter, so not in the state dict."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, length: int) -> Float[Tensor, "T D"]:
        return self.table[:length]


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position, as in BERT (the paper found both variants nearly equal, table 3 (E))."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    @property
    def table(self) -> Float[Tensor, "T D"]:
        return self.weight

    def forward(self, length: int) -> Float[Tensor, "T D"]:
        return self.weight[:length]


def rotary_frequencies(d_head: int, base: float) -> Float[Tensor, " Dh2"]:
    """theta_i = base^(-2i/d_head), i = 0 .. d_head/2 - 1: the angle pair i turns by per position (Su et al. 2021;
    the paper's sinusoid frequencies, 10000^(-2i/d_model), with the model's own base and the head's width)."""
    # computed in float32 from integer exponents, as Hugging Face's Llama does, so the angles round alike
    return 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))


def rotate(x: Float[Tensor, "B H T Dh"], cos: Float[Tensor, "T Dh2"], sin: Float[Tensor, "T Dh2"]) -> Tensor:
    """Turn each pair (x_i, x_{i + Dh/2}) by its angle: RoPE in the half-split layout Hugging Face's Llama uses."""
    x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, Dh/2) each
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class RotaryPositions(nn.Module):
    """Rotary positions: nothing is added to the embedding; every query and key is turned by position x theta_i, so
    q . k depends on the two tokens and on their distance only. Tables of cos and sin up to max_len, not parameters.
    `rotary_dims` (GPT-NeoX's partial rotary): only the first rotary_dims of each head's dimensions are turned, with
    frequencies over that width; the rest pass through unchanged (None: all d_head)."""

    def __init__(self, max_len: int, d_head: int, base: float, rotary_dims: int | None = None) -> None:
        super().__init__()
        self.base = base
        self.rotary_dims = d_head if rotary_dims is None else rotary_dims
        theta = rotary_frequencies(self.rotary_dims, base)  # (R/2,): frequencies over the turned width only
        angles = torch.arange(max_len).float()[:, None] * theta[None, :]  # (T, R/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: Float[Tensor, "B H T Dh"], offset: int = 0) -> Float[Tensor, "B H T Dh"]:
        """x's rows turned by the angles of positions offset .. offset + T - 1 (their first rotary_dims only)."""
        t = x.size(-2)
        cos, sin = self.cos[offset : offset + t], self.sin[offset : offset + t]
        if self.rotary_dims == x.size(-1):
            return rotate(x, cos, sin)
        turned, passed = x[..., : self.rotary_dims], x[..., self.rotary_dims :]  # (B, H, T, R), (B, H, T, Dh - R)
        return torch.cat((rotate(turned, cos, sin), passed), dim=-1)  # (B, H, T, Dh)
