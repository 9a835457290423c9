"""A model's positional information as arrays: its own table, and the paper's sinusoids at the same size."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models.positional import RotaryPositions, sinusoidal_table
from attention_explorer.models.registry import LoadedModel


def text_embeddings(loaded: LoadedModel):
    """The embedding layer that reads the text: the encoder's, or a decoder-only model's decoder's."""
    return text_embeddings_stack(loaded).embeddings


def tables(loaded: LoadedModel) -> dict[str, np.ndarray]:
    """{"sinusoidal": (max_len, d_model)} plus {"learned": ...} when the model was trained with its own positions."""
    config = loaded.model.config
    found = {"sinusoidal": sinusoidal_table(config.max_len, config.d_model).numpy()}
    if loaded.family.block.positions.kind == "learned":
        found["learned"] = text_embeddings(loaded).position.table.detach().cpu().numpy().copy()
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


def input_parts(loaded: LoadedModel) -> dict[str, float]:
    """The root-mean-square norm of each term summed into layer 1's input, as the model computes it: the token's
    embedding (scaled where the model scales it), the position's vector (where one is added) and the token-type row
    (type 0, the same row for every token; BERT)."""
    embeddings = text_embeddings(loaded)
    token, position = input_norms(loaded)
    parts = {"token": token}
    if embeddings.position is not None:
        parts["position"] = position
    if embeddings.token_type is not None:
        parts["token type"] = float(embeddings.token_type.weight[0].detach().norm())
    return parts


INPUT_SAMPLE = 128  # token ids (at positions 0, 1, ...) whose layer-1 inputs input_cosine compares


@torch.inference_mode()
def input_cosine(loaded: LoadedModel) -> float:
    """The mean cosine between the layer-1 inputs of different tokens at different positions, computed by the model's
    own embedding layer (token type and embedding LayerNorm included): near 1, every input points the same way."""
    embeddings = text_embeddings(loaded)
    n = min(INPUT_SAMPLE, embeddings.max_len, embeddings.token.num_embeddings)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(embeddings.token.num_embeddings, (1, n), generator=generator)  # drawn on the CPU: any device's
    x = embeddings(ids.to(embeddings.token.weight.device))[0]  # (T, D)
    unit = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    cosines = unit @ unit.T
    return float((cosines.sum() - cosines.diagonal().sum()) / (n * (n - 1)))


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


def rotary(loaded: LoadedModel) -> RotaryPositions | None:
    """The rotary tables the model's self-attention turns queries and keys with; None for a model that adds
    positions to its embedding instead."""
    layers = text_embeddings_stack(loaded).layers
    return layers[0].self_attn.rotary


def text_embeddings_stack(loaded: LoadedModel):
    """The stack that reads the text: the encoder, or a decoder-only model's decoder."""
    model = loaded.model
    return model.encoder if model.encoder is not None else model.decoder


def rotary_frequencies(loaded: LoadedModel) -> np.ndarray:
    """theta_i, the angle pair i turns by per position (Dh/2,): the paper's sinusoid frequencies with this model's base
    and head width, recovered from the model's own table (the angle at position 1)."""
    table = rotary(loaded)
    assert table is not None, "this model has no rotary positions"
    return np.arctan2(table.sin[1].cpu().numpy(), table.cos[1].cpu().numpy()).astype(np.float64)


def turned_dims(loaded: LoadedModel) -> int:
    """How many of each head's dimensions rotary turns (the first ones; the rest pass unturned): twice the pairs of
    the model's own table, d_head unless the rotary is partial."""
    return 2 * len(rotary_frequencies(loaded))


@torch.inference_mode()
def score_by_distance(
    loaded: LoadedModel, result: Trace, kind: str, layer: int, head: int, query: int, key: int, distances: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """One head's query (at `query`) and key (at `key`) as the model projected them, before rotation, placed
    0 .. distances - 1 positions apart and turned by the model's own tables: (distances, q . k / sqrt(d_k) at each,
    the model's own scaled score for the pair in the text). Rotation makes the score depend on distance only."""
    table = rotary(loaded)
    attention = result.attention(kind)
    assert table is not None and attention.q_unrotated is not None and attention.k_unrotated is not None
    distances = min(distances, table.cos.shape[0])
    q = torch.from_numpy(attention.q_unrotated[layer, head, query].copy()).to(table.cos.device)  # (Dh,)
    k = torch.from_numpy(attention.k_unrotated[layer, head, key].copy()).to(table.cos.device)  # (Dh,)
    turned_q = table(q.expand(1, 1, distances, -1))[0, 0]  # (N, Dh): q at positions 0 .. N-1
    turned_k = table(k[None, None, None, :])[0, 0, 0]  # k at position 0: not turned
    scores = (turned_q @ turned_k) * q.numel() ** -0.5  # (N,)
    own = float(attention.scaled_scores[layer, head, query, key])
    return np.arange(distances), scores.cpu().numpy().astype(np.float64), own
