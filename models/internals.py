"""What a forward returns besides its logits (models.transformer): every layer's attention internals and the hidden
state after each sub-layer, per stack."""

from __future__ import annotations

from dataclasses import dataclass

from jaxtyping import Float
from torch import Tensor

from attention_explorer.models.attention import AttentionInternals


@dataclass(frozen=True)
class EncoderLayerInternals:
    """One encoder layer: its self-attention and the hidden state after each sub-layer."""

    self_attn: AttentionInternals | None  # None once a run has let it go (models.transformer.Keep)
    after_attn: Float[Tensor, "B T D"]  # LayerNorm(x + SelfAttention(x)) (post-LN)
    after_ffn: Float[Tensor, "B T D"]  # LayerNorm(x + FFN(x)): the layer's output


@dataclass(frozen=True)
class DecoderLayerInternals:
    """One decoder layer: masked self-attention, cross-attention (none in a decoder-only model) and the state after
    each sub-layer."""

    self_attn: AttentionInternals | None  # None once a run has let it go (Keep)
    cross_attn: AttentionInternals | None  # None in a decoder-only model, or let go
    # the residual stream with masked self-attention's output added. In a parallel block (GPT-NeoX) it is x +
    # Attn(Norm1(x)): the layer's input plus attention's write, the feed-forward's not yet added; the feed-forward did
    # not read it (it read Norm2(x)), so after_ffn - after_self_attn is the feed-forward's write, as in a sequential one
    after_self_attn: Float[Tensor, "B T D"]
    after_cross_attn: Float[Tensor, "B T D"] | None
    after_ffn: Float[Tensor, "B T D"]


@dataclass(frozen=True)
class StackInternals:
    """A stack's input (embedding + position) and every layer's internals."""

    embeddings: Float[Tensor, "B T D"]
    layers: tuple[EncoderLayerInternals, ...] | tuple[DecoderLayerInternals, ...]  # one per layer, bottom first
    output: Float[Tensor, "B T D"]  # last layer's output (after the final norm when pre-LN)


@dataclass(frozen=True)
class TransformerOutput:
    """The encoder's internals (None for a decoder-only model) and, when the model has a decoder, the decoder's and
    the output logits."""

    encoder: StackInternals | None
    decoder: StackInternals | None = None
    logits: Float[Tensor, "B T V"] | None = None  # final linear layer; softmax gives next-token probabilities

    @property
    def memory(self) -> Float[Tensor, "B S D"]:
        if self.encoder is None:
            raise ValueError("a decoder-only model has no encoder memory")
        return self.encoder.output

    @property
    def probabilities(self) -> Float[Tensor, "B T V"]:
        """softmax of the final linear layer's output (figure 1, top)."""
        if self.logits is None:
            raise ValueError("an encoder-only model has no output distribution")
        return self.logits.softmax(dim=-1)
