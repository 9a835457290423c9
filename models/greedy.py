"""Greedy decoding with a key/value cache: the tokens Transformer.generate picks, each step's work done once.

Transformer.generate runs the whole decoder over the whole prefix at every step (and projects the encoder's memory
to keys and values again in every layer), which at 512 source tokens and 64 output tokens takes seconds. Under the
causal mask no position sees a later one, so the keys and values of the positions already written never change:
each step here runs the decoder on the newest position only, reading the earlier keys and values from a cache that
is passed along by value (the shared model is never changed). Nothing here is drawn: the explorer runs the decoder
once more, teacher-forced on these tokens, to capture every internal (explorer/run/trace.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attention_explorer.models.attention import HeadPatch, MultiHeadAttention
from attention_explorer.models.transformer import (
    Ablation,
    DecoderLayer,
    Patches,
    Transformer,
    padding_mask,
    run_sublayers,
)


@dataclass(frozen=True)
class LayerCache:
    """One decoder layer's keys and values so far: its masked self-attention's, then the memory's (fixed; None in a
    decoder-only model)."""

    self_k: Float[Tensor, "B H t Dh"]
    self_v: Float[Tensor, "B H t Dh"]
    memory_k: Float[Tensor, "B H S Dh"] | None = None
    memory_v: Float[Tensor, "B H S Dh"] | None = None
    # what self_k and self_v are the first t positions of, with room for the next (_grown); None: no room kept
    k_buffer: Tensor | None = None
    v_buffer: Tensor | None = None


@torch.inference_mode()
def prefix_caches(model: Transformer, inputs: list[Float[Tensor, "B T D"]]) -> list[LayerCache]:
    """A decoder-only model's key/value caches of a prefix from the states that entered its layers (a run keeps
    them): each layer's keys and values by the operations its forward ran on that input, so the same numbers, without
    running the layers again."""
    assert model.decoder is not None and model.encoder is None
    caches = []
    for layer, x in zip(model.decoder.layers, inputs, strict=True):
        self_attn = next(sub for sub in layer.sublayers if sub.module == "self_attn")
        k, v, _ = layer.self_attn.keys_values(getattr(layer, self_attn.norm).normed_input(x))  # (B, H, T, Dh)
        caches.append(LayerCache(k, v))
    return caches


def _attend(
    attention: MultiHeadAttention,
    x_q: Float[Tensor, "B 1 D"],
    k: Float[Tensor, "B H Tk Dh"],
    v: Float[Tensor, "B H Tk Dh"],
    mask: Bool[Tensor, "#B 1 1 Tk"] | None,
    patch: HeadPatch | None = None,
    offset: int = 0,
) -> Float[Tensor, "B 1 D"]:
    """MultiHeadAttention.forward for one query (at position `offset`) against given keys and values, by the same
    operations."""
    q, _ = attention.queries(x_q, offset)  # (B, H, 1, Dh)
    # the layer's own scale and window (a local layer's newest query reads its last w keys only)
    heads, _, _, _ = attention.attend(q, k, v, mask, offset)  # (B, H, 1, Dh)
    if patch is not None:  # heads turned off: replaced before W_O, as in MultiHeadAttention.forward
        heads = patch.apply(heads, offset)
    return attention.combine_heads(heads)  # (B, 1, D)


ROOM = 64  # positions a cache's buffers hold beyond what it has when it is first grown


def _grown(kept: Tensor, buffer: Tensor | None, new: Tensor) -> tuple[Tensor, Tensor]:
    """(kept + the newest position, its buffer): kept (B, H, t, Dh) and the newest position's (B, H, 1, Dh) as one
    (B, H, t + 1, Dh), the same numbers as torch.cat, a view of a buffer with room to spare. The next position is
    written into that room, not every position so far copied again (torch.cat copied 283 MB a token for SmolLM2 at
    2,048 tokens); a cache with no buffer (the first step's, perhaps shared by other runs) or a full one is copied
    once into a new buffer with ROOM more. A cache is grown once: decoding replaces it by what this returns (growing
    an older, shorter one again would write over the newer one's row)."""
    b, h, t, dh = kept.shape
    if buffer is None or buffer.size(2) <= t:
        buffer = kept.new_empty(b, h, t + 1 + ROOM, dh)
        buffer[:, :, :t] = kept
    buffer[:, :, t : t + 1] = new
    return buffer[:, :, : t + 1], buffer


def _step(
    layer: DecoderLayer,
    x: Float[Tensor, "B 1 D"],
    cache: LayerCache,
    memory_mask: Bool[Tensor, "#B 1 1 S"] | None,
    patches: Patches = None,
) -> tuple[Float[Tensor, "B 1 D"], LayerCache]:
    """DecoderLayer.forward's sub-layers (run_sublayers: the same order) for the newest position only, and the cache
    with its keys and values."""
    grown: list[LayerCache] = []

    def attend(name: str, attention: MultiHeadAttention, h: Tensor) -> tuple[Tensor, None]:
        patch = (patches or {}).get(name)
        if name == "self_attn":
            position = cache.self_k.size(2)  # the newest position's index: rotary turns its query and key by it
            new_k, new_v, _ = attention.keys_values(h, position)  # (B, H, 1, Dh)
            k, k_buffer = _grown(cache.self_k, cache.k_buffer, new_k)  # (B, H, t, Dh)
            v, v_buffer = _grown(cache.self_v, cache.v_buffer, new_v)
            grown.append(LayerCache(k, v, cache.memory_k, cache.memory_v, k_buffer, v_buffer))
            # the newest position is the last row of the causal mask: it may see every position so far, so no mask
            return _attend(attention, h, k, v, None, patch, position), None
        assert cache.memory_k is not None and cache.memory_v is not None
        # the newest position's index again: a patch given per position reads its row (cross-attention turns nothing)
        position = cache.self_k.size(2)
        return _attend(attention, h, cache.memory_k, cache.memory_v, memory_mask, patch, position), None

    states, _ = run_sublayers(layer, x, attend)
    return states["after_ffn"], grown[0]


@torch.inference_mode()
def generate(
    model: Transformer,
    src: Int[Tensor, "B S"],
    bos_id: int,
    eos_id: int,
    max_len: int,
    ablation: Ablation | None = None,
) -> Tensor:
    """Transformer.generate's greedy decoding (same stopping rule, pad after a row's eos), one position per step;
    `ablation`: with those heads turned off."""
    if model.decoder is None or model.generator is None:
        raise ValueError("this model is encoder-only: it has no decoder")
    if model.encoder is None:
        raise ValueError("this model is decoder-only: it continues its text (continue_text), it has no source")
    pad = model.config.pad_id
    assert pad is not None
    src_mask = padding_mask(src, pad)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask, ablation=ablation).output  # (B, S, D)
    caches = []
    for layer in model.decoder.layers:
        cross = layer.cross_attn
        empty = memory.new_zeros(src.size(0), cross.n_heads, 0, cross.d_head)  # (B, H, 0, Dh)
        memory_k, memory_v, _ = cross.keys_values(memory)  # (B, H, S, Dh): once, not once per step
        caches.append(LayerCache(empty, empty, memory_k, memory_v))
    tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(min(max_len, model.config.max_len - 1)):
        # token embedding + position are per position: the newest row equals that row of the whole prefix's
        next_id = next_logits(model, tgt, caches, src_mask, ablation).argmax(-1).masked_fill(done, pad)  # (B,)
        tgt = torch.cat([tgt, next_id[:, None]], dim=1)
        done |= next_id == eos_id
        if done.all():
            break
    return tgt[:, 1:]


def next_logits(
    model: Transformer,
    tokens: Int[Tensor, "B t"],
    caches: list[LayerCache],
    memory_mask: Tensor | None,
    ablation: Ablation | None = None,
) -> Float[Tensor, "B V"]:
    """The next-token logits after `tokens`, running the decoder on the newest position only (caches grow in place)."""
    assert model.decoder is not None and model.generator is not None
    # token embedding + position are per position: the newest row equals that row of the whole prefix's
    x = model.decoder.embeddings(tokens)[:, -1:]  # (B, 1, D)
    patches = ablation.stack_patches("decoder", len(model.decoder.layers)) if ablation else None
    for i, layer in enumerate(model.decoder.layers):
        x, caches[i] = _step(layer, x, caches[i], memory_mask, patches[i] if patches else None)
    if model.decoder.final_norm is not None:
        x = model.decoder.final_norm(x)
    return model.generator(x[:, -1])  # (B, V)


@dataclass(frozen=True)
class Sampling:
    """How a decoder-only model picks its next token: greedy (top_k 1), or seeded sampling from the top k and/or the
    smallest set of tokens whose probabilities reach top_p (nucleus sampling), after dividing logits by temperature."""

    top_k: int = 1
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top-k must be at least 1, not {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top-p must be in (0, 1], not {self.top_p}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be above 0, not {self.temperature}")

    @property
    def greedy(self) -> bool:
        return self.top_k == 1

    def candidates(self, logits: Float[Tensor, " V"]) -> tuple[Tensor, Tensor]:
        """(token ids, their renormalised probabilities) that this rule samples from, most probable first."""
        probabilities = (logits.double() / self.temperature).softmax(-1)
        top = probabilities.topk(min(self.top_k, probabilities.numel()))
        keep = int((top.values.cumsum(0) - top.values < self.top_p).sum())  # always at least the first
        values = top.values[:keep]
        return top.indices[:keep], values / values.sum()


@torch.inference_mode()
def continue_text(
    model: Transformer, ids: list[int], steps: int, sampling: Sampling, ablation: Ablation | None = None
) -> list[int]:
    """A decoder-only model's continuation of `ids` by `steps` new tokens (never past max_len), one position per
    step with a key/value cache; sampled with a generator seeded by `sampling.seed`, so a run can be repeated."""
    if model.encoder is not None or model.decoder is None:
        raise ValueError("continue_text is for decoder-only models")
    if not ids:
        raise ValueError("there is no text to continue")
    generator = torch.Generator().manual_seed(sampling.seed)
    # the prompt in one full forward: its keys and values are the cache the new positions read
    device = model.decoder.embeddings.token.weight.device  # the prompt goes where the model is
    out = model(torch.tensor([ids], device=device), ablation=ablation)
    assert out.decoder is not None and out.logits is not None
    caches = [LayerCache(layer.self_attn.k, layer.self_attn.v) for layer in out.decoder.layers]
    logits = out.logits[0, -1]
    written: list[int] = []
    for _ in range(max(0, min(steps, model.config.max_len - len(ids)))):
        if sampling.greedy:
            chosen = int(logits.argmax())
        else:
            options, probabilities = sampling.candidates(logits)
            # drawn on the CPU by the seeded CPU generator, wherever the logits are: the same draw on any device
            chosen = int(options[int(torch.multinomial(probabilities.cpu(), 1, generator=generator))])
        written.append(chosen)
        if len(ids) + len(written) >= model.config.max_len:
            break
        logits = next_logits(model, torch.tensor([[*ids, *written]], device=device), caches, None, ablation)[0]
    return written


def greedy_decode(
    model: Transformer,
    src: Int[Tensor, "1 S"],
    bos_id: int,
    eos_id: int,
    max_len: int,
    ablation: Ablation | None = None,
) -> list[int]:
    """One sentence's greedy decode with the cache: the new ids up to and including eos (no bos)."""
    return generate(model, src, bos_id, eos_id, max_len, ablation)[0].tolist()
