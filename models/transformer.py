"""Encoder, decoder and the full model after Vaswani et al. 2017, section 3.1 and figure 1; with no encoder, the
decoder alone (its layers without cross-attention) is a decoder-only model of the GPT-2 family."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from attention_explorer.models import anatomy
from attention_explorer.models.ablation import Ablation
from attention_explorer.models.attention import AttentionInternals, HeadPatch, MultiHeadAttention
from attention_explorer.models.blocks import (
    FeedForward,
    OutputLayer,
    Residual,
    attention_layer,
    norm_layer,
    residual_norm,
    rotary_positions,
)
from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.internals import (
    DecoderLayerInternals,
    EncoderLayerInternals,
    StackInternals,
    TransformerOutput,
)
from attention_explorer.models.positional import (
    LearnedPositionalEmbedding,
    RotaryPositions,
    SinusoidalPositionalEncoding,
)


def padding_mask(ids: Int[Tensor, "B T"], pad_id: int | None) -> Bool[Tensor, "B 1 1 T"]:
    """True where a key is a real token; broadcast over heads and queries. No pad id (GPT-2): every key is real."""
    if pad_id is None:
        return torch.ones_like(ids, dtype=torch.bool)[:, None, None, :]  # (B, 1, 1, Tk)
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, Tk)


def causal_mask(length: int, device: torch.device | None = None) -> Bool[Tensor, "1 1 T T"]:
    """True on and below the diagonal: position i may attend to positions <= i only (section 3.2.3)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, Tq, Tk)


class Embeddings(nn.Module):
    """Token embedding (times sqrt(d_model) in the paper, 3.4) plus position, optional token type and norm."""

    def __init__(self, config: TransformerConfig, vocab_size: int) -> None:
        super().__init__()
        self.d_model = config.d_model
        self.scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        self.token = nn.Embedding(vocab_size, config.d_model)
        # rotary positions add nothing here: they turn each layer's queries and keys instead
        self.position: nn.Module | None = None
        if config.positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(config.max_len, config.d_model)
        elif config.positional == "learned":
            self.position = LearnedPositionalEmbedding(config.max_len, config.d_model)
        self.token_type = nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size else None
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.embedding_norm else None
        self.dropout = nn.Dropout(config.dropout)
        self.max_len = config.max_len

    def forward(
        self, ids: Int[Tensor, "B T"], token_type_ids: Int[Tensor, "B T"] | None = None
    ) -> Float[Tensor, "B T D"]:
        length = ids.size(1)
        if length > self.max_len:
            raise ValueError(f"{length} tokens exceed this model's maximum of {self.max_len}")
        x = self.token(ids)
        if self.scale != 1.0:
            x = x * self.scale
        if self.token_type is not None:
            types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids
            x = x + self.token_type(types)
        if self.position is not None:
            x = x + self.position(length)  # (T, D) broadcast over B
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


# what a run keeps of each layer's internals (identity when None): a long text's run drops each layer's attention as
# soon as the next layer has its input, and recomputes one layer on demand (explorer/run/layers.py)
Keep = Callable[[object], object] | None

# one layer's heads turned off, by its sub-layer module name ("self_attn", "cross_attn"); one entry per layer of a stack
Patches = dict[str, HeadPatch] | None
StackPatches = list[dict[str, HeadPatch]] | None


# what an attention sub-layer is given: (its name, its module, the input it reads) -> (output, internals or None)
Attend = Callable[[str, MultiHeadAttention, Tensor], tuple[Tensor, AttentionInternals | None]]


def run_sublayers(layer: nn.Module, x: Float[Tensor, "B T D"], attend: Attend) -> tuple[dict, dict]:
    """A layer's sub-layers in the order models.anatomy describes (layer.sublayers), each inside its residual
    connection and norm (section 3.1): the one loop over them, driven by the full forward, greedy decoding with a
    key/value cache, and the Forward pass page (through Sublayer names). Returns (state after each sub-layer,
    attention internals), by field name."""
    states: dict[str, Tensor] = {}
    attentions: dict[str, AttentionInternals | None] = {}
    entering = x
    for sub in layer.sublayers:
        norm: Residual = getattr(layer, sub.norm)
        h = norm.normed_input(entering if sub.reads_layer_input else x)
        if sub.module == "ffn":
            out = layer.ffn(h)
        else:
            out, attentions[sub.module] = attend(sub.module, getattr(layer, sub.module), h)
        if sub.post_norm is not None:  # sandwich norms (Gemma 2/3): the sub-layer's output normed before it is added
            out = getattr(layer, sub.post_norm)(out)
        x = norm.combine(x, out)
        states[sub.state] = x
    return states, attentions


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the position-wise feed-forward network (figure 1, left)."""

    def __init__(self, config: TransformerConfig, rotary: RotaryPositions | None = None) -> None:
        super().__init__()
        self.sublayers = anatomy.layer(config, "encoder").sublayers  # the order, as models.anatomy describes it
        self.self_attn = attention_layer(config, rotary)
        self.ffn = FeedForward(config)
        self.norm1 = residual_norm(config)
        self.norm2 = residual_norm(config)

    def forward(
        self, x: Float[Tensor, "B T D"], mask: Bool[Tensor, "#B 1 #T T"] | None, patches: Patches = None
    ) -> EncoderLayerInternals:
        patch = (patches or {}).get("self_attn")
        states, attentions = run_sublayers(self, x, lambda _name, attention, h: attention(h, h, mask, patch))
        assert attentions["self_attn"] is not None
        return EncoderLayerInternals(attentions["self_attn"], **states)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention over the memory, then FFN (figure 1, right). In a
    decoder-only model (`cross=False`) the cross-attention and its norm2 are absent: norm3 is always the FFN's. With
    config.parallel_residual (decoder-only) both sub-layers read the layer's input x: x + Attn(Norm1(x)) + FFN(Norm3(x))
    (GPT-J, GPT-NeoX)."""

    def __init__(
        self,
        config: TransformerConfig,
        cross: bool = True,
        rotary: RotaryPositions | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = attention_layer(config, rotary, window)  # `window`: a local layer's (models.anatomy.Span)
        self.cross_attn = attention_layer(config) if cross else None
        self.ffn = FeedForward(config)
        self.norm1 = residual_norm(config)
        self.norm2 = residual_norm(config) if cross else None
        self.norm3 = residual_norm(config)
        self.sublayers = anatomy.layer(config, "decoder", cross).sublayers
        for sub in self.sublayers:  # sandwich norms: one more norm after each sub-layer (post_norm1, post_norm3)
            if sub.post_norm is not None:
                setattr(self, sub.post_norm, norm_layer(config))

    def forward(
        self,
        x: Float[Tensor, "B T D"],
        memory: Float[Tensor, "B S D"] | None,
        self_mask: Bool[Tensor, "#B 1 #Tq T"],  # Tq: rows start.. only
        memory_mask: Bool[Tensor, "#B 1 1 S"] | None,
        patches: Patches = None,
        start: int = 0,
    ) -> DecoderLayerInternals:
        """`start`: compute rows start.. of x only (self_mask: their rows), each reading every row's keys and values
        up to it: a window of a long text, by the same operations as the whole layer (the same numbers at start 0)."""

        def attend(name: str, attention: MultiHeadAttention, h: Tensor):
            patch = (patches or {}).get(name)
            if name == "self_attn":
                # the rows before the window are keys and values only: normed as the whole layer norms them
                keys = h if start == 0 else self.norm1.normed_input(x)  # (B, T, D)
                return attention(h, keys, self_mask, patch, start)
            # queries from the decoder, keys and values from the encoder's output (section 3.2.3)
            assert memory is not None
            return attention(h, memory, memory_mask, patch, start)  # `start`: a patch given per position reads its rows

        states, attentions = run_sublayers(self, x[:, start:] if start else x, attend)
        assert attentions["self_attn"] is not None
        return DecoderLayerInternals(
            attentions["self_attn"],
            attentions.get("cross_attn"),
            states["after_self_attn"],
            states.get("after_cross_attn"),
            states["after_ffn"],
        )


class Stack(nn.Module):
    """Embeddings, then N identical layers, each reading the one below (section 3.1): the encoder's and the
    decoder's shared loop."""

    def __init__(
        self, config: TransformerConfig, vocab_size: int, layer: Callable[[], nn.Module], n_layers: int
    ) -> None:
        super().__init__()
        self.embeddings = Embeddings(config, vocab_size)
        self.layers = nn.ModuleList(layer() for _ in range(n_layers))
        # pre-LN leaves the residual stream un-normalised, so the stack ends with one more norm
        self.final_norm = norm_layer(config) if anatomy.describe(config).final_norm else None

    def stack(
        self,
        embeddings: Float[Tensor, "B T D"],
        *context: Tensor | None,
        patches: StackPatches = None,
        keep: Keep = None,
    ) -> StackInternals:
        """Run every layer on the one below's output; `context` goes to each layer unchanged (masks, memory);
        `patches[i]`: layer i's heads turned off (an ablation), by sub-layer module name; `keep`: what is kept of
        each layer's internals once the next layer has its input."""
        x = embeddings
        layers = []
        for i, layer in enumerate(self.layers):
            internals = layer(x, *context, patches[i] if patches else None)
            x = internals.after_ffn
            layers.append(internals if keep is None else keep(internals))
            del internals  # with `keep`, this layer's attention is freed before the next one runs
        if self.final_norm is not None:
            x = self.final_norm(x)
        return StackInternals(embeddings, tuple(layers), x)


class Encoder(Stack):
    """N identical encoder layers over the source embeddings (section 3.1)."""

    def __init__(self, config: TransformerConfig) -> None:
        rotary = rotary_positions(config)
        super().__init__(config, config.vocab_size, lambda: EncoderLayer(config, rotary), config.n_encoder_layers)

    def forward(
        self,
        ids: Int[Tensor, "B S"],
        mask: Bool[Tensor, "#B 1 1 S"] | None,
        token_type_ids: Int[Tensor, "B S"] | None = None,
        patches: StackPatches = None,
        keep: Keep = None,
    ) -> StackInternals:
        return self.stack(self.embeddings(ids, token_type_ids), mask, patches=patches, keep=keep)


class Decoder(Stack):
    """N identical decoder layers over the shifted-right target embeddings (section 3.1); with no encoder, over the
    text itself, each layer without cross-attention (decoder-only)."""

    def __init__(self, config: TransformerConfig) -> None:
        cross = not config.is_decoder_only
        # one table a rotary base, shared by every layer that turns with it (buffers, not in the state dict); each
        # layer's span (its window and base) as models.anatomy describes it
        spans = anatomy.describe(config).spans or (anatomy.Span(None, config.rope_theta),) * config.n_decoder_layers
        tables = {base: rotary_positions(config, base) for base in {span.rotary_base for span in spans}}
        built = iter(spans)

        def layer() -> DecoderLayer:
            span = next(built)
            return DecoderLayer(config, cross, tables[span.rotary_base], span.window)

        super().__init__(config, config.target_vocab_size, layer, config.n_decoder_layers)

    def forward(
        self,
        ids: Int[Tensor, "B T"],
        memory: Float[Tensor, "B S D"] | None,
        self_mask: Bool[Tensor, "#B 1 #T T"],
        memory_mask: Bool[Tensor, "#B 1 1 S"] | None,
        patches: StackPatches = None,
        keep: Keep = None,
    ) -> StackInternals:
        return self.stack(self.embeddings(ids), memory, self_mask, memory_mask, patches=patches, keep=keep)


class Transformer(nn.Module):
    """The whole model of figure 1: encoder, decoder, final linear layer (softmax in the output); either stack may be
    absent (encoder-only: BERT; decoder-only: GPT-2)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = Encoder(config) if config.n_encoder_layers else None
        self.decoder = Decoder(config) if config.n_decoder_layers else None
        self.generator: nn.Linear | None = None
        if self.decoder is not None:
            self.generator = OutputLayer(
                config.d_model, config.target_vocab_size, config.output_bias, config.logit_softcap
            )
        self.tie()
        self.reset_parameters()

    def tie(self) -> None:
        """Share the matrices the config says are one (again after a load that assigned new tensors)."""
        if self.decoder is None or self.generator is None:
            return
        if self.config.tie_output:
            # section 3.4: the target embedding and the pre-softmax linear layer share one matrix
            self.generator.weight = self.decoder.embeddings.token.weight
        if self.config.share_embeddings and self.encoder is not None:
            # one matrix for both embedding layers (and the generator when tied)
            self.encoder.embeddings.token.weight = self.decoder.embeddings.token.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform for matrices (as in the reference implementations of the paper), zero biases."""
        for name, p in self.named_parameters():
            if p.dim() > 1 and "position" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def encode(
        self,
        src: Int[Tensor, "B S"],
        src_mask: Bool[Tensor, "#B 1 1 S"] | None = None,
        token_type_ids: Int[Tensor, "B S"] | None = None,
        ablation: Ablation | None = None,
        keep: Keep = None,
    ) -> StackInternals:
        """Run the encoder; src_mask defaults to the padding mask."""
        if self.encoder is None:
            raise ValueError("this model is decoder-only: it has no encoder")
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)
        patches = ablation.stack_patches("encoder", len(self.encoder.layers)) if ablation else None
        return self.encoder(src, src_mask, token_type_ids, patches, keep)

    def decoder_mask(self, tgt: Int[Tensor, "B T"]) -> Bool[Tensor, "B 1 T T"]:
        """Masked self-attention's mask: no looking ahead, and no attending to padding."""
        return causal_mask(tgt.size(1), tgt.device) & padding_mask(tgt, self.config.pad_id)  # (B, 1, T, T)

    def decode(
        self,
        tgt: Int[Tensor, "B T"],
        memory: Float[Tensor, "B S D"] | None,
        src_mask: Bool[Tensor, "#B 1 1 S"] | None,
        ablation: Ablation | None = None,
        keep: Keep = None,
        logits: bool = True,
    ) -> tuple[StackInternals, Float[Tensor, "B T V"] | None]:
        """Run the decoder over the target so far (decoder-only: over the text, with no memory); returns its
        internals and the next-token logits (None with `logits=False`: a caller that reads them in row blocks)."""
        if self.decoder is None or self.generator is None:
            raise ValueError("this model is encoder-only: it has no decoder")
        patches = ablation.stack_patches("decoder", len(self.decoder.layers)) if ablation else None
        internals = self.decoder(tgt, memory, self.decoder_mask(tgt), src_mask, patches, keep)
        return internals, self.generator(internals.output) if logits else None

    def forward(
        self,
        src: Int[Tensor, "B S"],
        tgt: Int[Tensor, "B T"] | None = None,
        src_mask: Bool[Tensor, "#B 1 1 S"] | None = None,
        token_type_ids: Int[Tensor, "B S"] | None = None,
        ablation: Ablation | None = None,
        keep: Keep = None,
        logits: bool = True,
    ) -> TransformerOutput:
        """Encode src; when tgt is given (encoder-decoder only), decode it with teacher forcing. A decoder-only model
        reads src through its decoder, each position predicting the next. `ablation`: heads turned off (their
        output replaced before W_O), per batch row. `keep`: what each layer's internals are reduced to. `logits`:
        False leaves out the final linear layer (the output's logits None): its (B, T, V) product is 2.1 GB at 2,048
        tokens of a 262,144-token vocabulary; explorer/run/logits.py reads it in row blocks from decoder.output."""
        if self.encoder is None:
            decoder, found = self.decode(src, None, None, ablation, keep, logits)
            return TransformerOutput(None, decoder, found)
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)
        encoder = self.encode(src, src_mask, token_type_ids, ablation, keep)
        if tgt is None:
            return TransformerOutput(encoder)
        decoder, found = self.decode(tgt, encoder.output, src_mask, ablation, keep, logits)
        return TransformerOutput(encoder, decoder, found)

    @torch.inference_mode()
    def generate(self, src: Int[Tensor, "B S"], bos_id: int, eos_id: int, max_len: int) -> Int[Tensor, "B N"]:
        """Greedy decoding of a batch: the most probable next token until every row has ended or max_len new
        tokens; returns the new tokens (no bos), pad after a row's eos (encoder-decoder only)."""
        src_mask = padding_mask(src, self.config.pad_id)
        memory = self.encode(src, src_mask).output
        tgt = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(min(max_len, self.config.max_len - 1)):
            _, logits = self.decode(tgt, memory, src_mask)
            next_id = logits[:, -1].argmax(-1).masked_fill(done, self.config.pad_id)  # (B,)
            tgt = torch.cat([tgt, next_id[:, None]], dim=1)
            done |= next_id == eos_id
            if done.all():
                break
        return tgt[:, 1:]

    def greedy_decode(self, src: Int[Tensor, "1 S"], bos_id: int, eos_id: int, max_len: int) -> list[int]:
        """One sentence's greedy decode: the new ids up to and including eos (no bos)."""
        return self.generate(src, bos_id, eos_id, max_len)[0].tolist()
