"""A model's positional information as arrays: its own table, and the paper's sinusoids at the same size."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.positional import sinusoidal_table
from models.registry import LoadedModel


def text_embeddings(loaded: LoadedModel):
    """The embedding layer that reads the text: the encoder's, or a decoder-only model's decoder's."""
    model = loaded.model
    return (model.encoder if model.encoder is not None else model.decoder).embeddings


def tables(loaded: LoadedModel) -> dict[str, np.ndarray]:
    """{"sinusoidal": (max_len, d_model)} plus {"learned": ...} when the model was trained with its own positions."""
    config = loaded.model.config
    found = {"sinusoidal": sinusoidal_table(config.max_len, config.d_model).numpy()}
    if config.positional == "learned":
        found["learned"] = text_embeddings(loaded).position.table.detach().numpy().copy()
    return found


def input_norms(loaded: LoadedModel) -> tuple[float, float]:
    """(token, position): the root-mean-square norm of a token's embedding as it enters the sum (x sqrt(d_model)
    where the model scales it; over the whole vocabulary) and of a position's vector (over every position; 0 where
    nothing is added, as with rotary positions)."""
    embeddings = text_embeddings(loaded)
    token = embeddings.token.weight.detach() * embeddings.scale
    if embeddings.position is None:
        return float(token.pow(2).sum(-1).mean().sqrt()), 0.0
    position = embeddings.position(embeddings.max_len).detach()
    return float(token.pow(2).sum(-1).mean().sqrt()), float(position.pow(2).sum(-1).mean().sqrt())


def neighbour_cosine(table: np.ndarray) -> float:
    """The mean cosine between the vectors of neighbouring positions, i and i + 1."""
    unit = table / np.maximum(np.linalg.norm(table, axis=-1, keepdims=True), 1e-12)
    return float((unit[:-1] * unit[1:]).sum(-1).mean())


SAMPLES_PER_POSITION = 8  # dimension 0 turns once every 2 pi positions: whole positions alone draw a zig-zag


def sinusoid_curves(n_positions: int, d_model: int, dims: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The paper's PE(pos, dim) (section 3.5) sampled between whole positions too, to draw each curve smoothly:
    (x (N,), y (N, len(dims))) with x from 0 to n_positions - 1, every SAMPLES_PER_POSITION-th one whole."""
    x = np.linspace(0, n_positions - 1, (n_positions - 1) * SAMPLES_PER_POSITION + 1)
    dims = np.asarray(dims)
    angle = x[:, None] / 10000.0 ** (2 * (dims // 2) / d_model)  # (N, dims): pos / 10000^(2i/d_model)
    return x, np.where(dims % 2 == 0, np.sin(angle), np.cos(angle))
