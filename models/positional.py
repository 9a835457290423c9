"""Positional information: the paper's sinusoids (section 3.5) and learned position embeddings (BERT)."""

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
