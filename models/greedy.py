"""Greedy decoding with a key/value cache: the tokens Transformer.generate picks, each step's work done once.

Transformer.generate runs the whole decoder over the whole prefix at every step (and projects the encoder's memory
to keys and values again in every layer), which at 512 source tokens and 64 output tokens takes seconds. Under the
causal mask no position sees a later one, so the keys and values of the positions already written never change:
each step here runs the decoder on the newest position only, reading the earlier keys and values from a cache that
is passed along by value (the shared model is never changed). Nothing here is drawn: the explorer runs the decoder
once more, teacher-forced on these tokens, to capture every internal (explorer/trace.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from models.attention import MultiHeadAttention, scaled_dot_product_attention
from models.transformer import DecoderLayer, Transformer, padding_mask


@dataclass(frozen=True)
class LayerCache:
    """One decoder layer's keys and values so far: its masked self-attention's, then the memory's (fixed)."""

    self_k: Float[Tensor, "B H t Dh"]
    self_v: Float[Tensor, "B H t Dh"]
    memory_k: Float[Tensor, "B H S Dh"]
    memory_v: Float[Tensor, "B H S Dh"]


def _attend(
    attention: MultiHeadAttention,
    x_q: Float[Tensor, "B 1 D"],
    k: Float[Tensor, "B H Tk Dh"],
    v: Float[Tensor, "B H Tk Dh"],
    mask: Bool[Tensor, "#B 1 1 Tk"] | None,
) -> Float[Tensor, "B 1 D"]:
    """MultiHeadAttention.forward for one query against given keys and values, by the same operations."""
    q = attention.split_heads(attention.w_q(x_q))  # (B, H, 1, Dh)
    heads, _, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H, 1, Dh)
    b, _, tq, _ = heads.shape
    return attention.w_o(heads.transpose(1, 2).reshape(b, tq, attention.n_heads * attention.d_head))  # (B, 1, D)


def _step(
    layer: DecoderLayer, x: Float[Tensor, "B 1 D"], cache: LayerCache, memory_mask: Bool[Tensor, "#B 1 1 S"] | None
) -> tuple[Float[Tensor, "B 1 D"], LayerCache]:
    """DecoderLayer.forward's three sub-layers for the newest position only, and the cache with its keys and values."""
    attention = layer.self_attn
    h = layer.norm1.normed_input(x)
    k = torch.cat([cache.self_k, attention.split_heads(attention.w_k(h))], dim=2)  # (B, H, t, Dh)
    v = torch.cat([cache.self_v, attention.split_heads(attention.w_v(h))], dim=2)  # (B, H, t, Dh)
    # the newest position is the last row of the causal mask: it may see every position so far, so no mask
    after_self = layer.norm1.combine(x, _attend(attention, h, k, v, None))
    cross = _attend(layer.cross_attn, layer.norm2.normed_input(after_self), cache.memory_k, cache.memory_v, memory_mask)
    after_cross = layer.norm2.combine(after_self, cross)
    after_ffn = layer.norm3.combine(after_cross, layer.ffn(layer.norm3.normed_input(after_cross)))
    return after_ffn, LayerCache(k, v, cache.memory_k, cache.memory_v)


@torch.inference_mode()
def generate(model: Transformer, src: Int[Tensor, "B S"], bos_id: int, eos_id: int, max_len: int) -> Tensor:
    """Transformer.generate's greedy decoding (same stopping rule, pad after a row's eos), one position per step."""
    if model.decoder is None or model.generator is None:
        raise ValueError("this model is encoder-only: it has no decoder")
    pad = model.config.pad_id
    src_mask = padding_mask(src, pad)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask).output  # (B, S, D)
    caches = []
    for layer in model.decoder.layers:
        cross = layer.cross_attn
        empty = memory.new_zeros(src.size(0), cross.n_heads, 0, cross.d_head)  # (B, H, 0, Dh)
        memory_k = cross.split_heads(cross.w_k(memory))  # (B, H, S, Dh): once, not once per step
        caches.append(LayerCache(empty, empty, memory_k, cross.split_heads(cross.w_v(memory))))
    tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(min(max_len, model.config.max_len - 1)):
        # token embedding + position are per position: the newest row equals that row of the whole prefix's
        x = model.decoder.embeddings(tgt)[:, -1:]  # (B, 1, D)
        for i, layer in enumerate(model.decoder.layers):
            x, caches[i] = _step(layer, x, caches[i], src_mask)
        if model.decoder.final_norm is not None:
            x = model.decoder.final_norm(x)
        next_id = model.generator(x[:, -1]).argmax(-1).masked_fill(done, pad)  # (B,)
        tgt = torch.cat([tgt, next_id[:, None]], dim=1)
        done |= next_id == eos_id
        if done.all():
            break
    return tgt[:, 1:]


def greedy_decode(model: Transformer, src: Int[Tensor, "1 S"], bos_id: int, eos_id: int, max_len: int) -> list[int]:
    """One sentence's greedy decode with the cache: the new ids up to and including eos (no bos)."""
    return generate(model, src, bos_id, eos_id, max_len)[0].tolist()
