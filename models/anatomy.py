"""What a model's layers are made of, said once: the sub-layers in order, where the norm sits, what each sub-layer
reads and adds to the residual stream, the norm, the positions, the feed-forward and the attention heads. Built from
the same config fields the engine builds itself from (models.blocks, models.transformer: the layers take their
sub-layers from here), so pages, wording, figures and experiments read this description, never a config flag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attention_explorer.models.config import Shape, TransformerConfig

Stack = Literal["encoder", "decoder"]
SublayerKind = Literal["self-attention", "masked self-attention", "cross-attention", "feed-forward"]

# the attention kinds each shape has, in the order pages offer them
KINDS: dict[str, tuple[str, ...]] = {
    "encoder-only": ("encoder_self",),
    "decoder-only": ("decoder_self",),
    "encoder-decoder": ("encoder_self", "decoder_self", "cross"),
}

# how a sub-layer's module is named in formulas
FORMULA_NAMES = {"self_attn": "SelfAttention", "cross_attn": "CrossAttention", "ffn": "FFN"}


@dataclass(frozen=True)
class Sublayer:
    """One sub-layer of a layer, by attribute names: its module ("self_attn", "cross_attn" or "ffn": the keys
    models.transformer.run_sublayers gives its attentions), the norm of its residual connection ("norm1"..), and the
    field of the layer's internals that holds the stream after it; what kind it is and what it reads."""

    module: str
    norm: str
    state: str
    kind: SublayerKind = "feed-forward"
    reads_normed: bool = False  # it reads Norm(x) (pre-norm), or the stream x itself (post-LN: the norm comes after)
    reads_layer_input: bool = False  # it reads the layer's input (parallel block), not the stream after the one before

    @property
    def is_attention(self) -> bool:
        return self.module != "ffn"

    def reads(self, norm_name: str) -> str:
        """What it reads, as a formula: "x" or "LayerNorm(x)"."""
        return f"{norm_name}(x)" if self.reads_normed else "x"

    def adds(self, norm_name: str) -> str:
        """What it adds to the residual stream, as a formula: "SelfAttention(LayerNorm(x))"."""
        return f"{FORMULA_NAMES[self.module]}({self.reads(norm_name)})"


@dataclass(frozen=True)
class Layer:
    """One layer of a stack: its sub-layers in order, where the norm sits, and whether they run side by side."""

    stack: Stack
    sublayers: tuple[Sublayer, ...]
    norm_first: bool  # pre-norm: x + Sublayer(Norm(x)); post-LN (the paper): Norm(x + Sublayer(x))
    parallel: bool = False  # every sub-layer reads the layer's input: x + Attn(Norm1(x)) + FFN(Norm2(x))

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(sub.module for sub in self.sublayers)

    def sublayer(self, module: str) -> Sublayer:
        """The sub-layer whose module is `module` ("self_attn", "cross_attn", "ffn")."""
        return next(sub for sub in self.sublayers if sub.module == module)

    def formula(self, norm_name: str) -> str:
        """The layer as one line: "x = x + SelfAttention(LayerNorm(x)); x = x + FFN(LayerNorm(x))"."""
        if self.parallel:
            return "x = x + " + " + ".join(sub.adds(norm_name) for sub in self.sublayers)
        if self.norm_first:
            return "; ".join(f"x = x + {sub.adds(norm_name)}" for sub in self.sublayers)
        return "; ".join(f"x = {norm_name}(x + {sub.adds(norm_name)})" for sub in self.sublayers)


@dataclass(frozen=True)
class Positions:
    """Where a model's positions enter: added at the embedding (sinusoids, learned rows), or rotary: every query and
    key turned by an angle that grows with the position, on `fraction` of each head's dimensions."""

    kind: Literal["sinusoidal", "learned", "rotary"]
    base: float = 10000.0  # rotary's base
    fraction: float = 0.0  # the share of each head's dimensions rotary turns (0 when nothing is turned)

    @property
    def added(self) -> bool:
        """Whether a position vector is added to the embedding (sinusoidal or learned)."""
        return self.kind != "rotary"

    @property
    def rotary(self) -> bool:
        return self.kind == "rotary"


@dataclass(frozen=True)
class FeedForwardKind:
    """The feed-forward: eq. (2) with its activation, or gated (SwiGLU: down(act(gate x) * up x))."""

    activation: str  # the config's name (models.config.ACTIVATIONS)
    gated: bool = False


@dataclass(frozen=True)
class Anatomy:
    """A model's layers as data: its shape, each stack's layer, the norm and where it sits, positions, feed-forward,
    attention kinds and heads, and whether a final norm comes before the output."""

    shape: Shape
    encoder: Layer | None
    decoder: Layer | None
    norm: Literal["layer", "rms"]
    norm_first: bool
    positions: Positions
    ffn: FeedForwardKind
    n_heads: int
    kv_heads: int
    final_norm: bool  # pre-norm leaves the stream un-normalised, so each stack ends with one more norm
    parallel: bool = False  # attention and feed-forward side by side, both reading the layer's input

    @property
    def kinds(self) -> tuple[str, ...]:
        """The attention kinds the model has: encoder_self, decoder_self, cross."""
        return KINDS[self.shape]

    @property
    def layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in (self.encoder, self.decoder) if layer is not None)

    @property
    def norm_name(self) -> str:
        """The norm as formulas name it: LayerNorm or RMSNorm."""
        return "RMSNorm" if self.norm == "rms" else "LayerNorm"

    @property
    def pre_name(self) -> str:
        """What the literature calls the placement before the sub-layer: pre-LN (LayerNorm) or pre-norm (RMSNorm)."""
        return "pre-norm" if self.norm == "rms" else "pre-LN"

    @property
    def norm_parameters(self) -> str:
        """What each norm learns: RMSNorm a gain, LayerNorm a gain and a bias."""
        return "gain" if self.norm == "rms" else "gain and bias"

    @property
    def parallel_reading(self) -> str:
        """How a parallel block's sub-layers read the layer's input x, from the norms they name: each through its own
        norm, with its own parameters (GPT-NeoX builds two), or through one norm they share (GPT-J's design)."""
        layer = self.decoder or self.encoder
        own = layer is not None and len({sub.norm for sub in layer.sublayers}) == len(layer.sublayers)
        if own:
            return f"each reads x through its own {self.norm_name}, with its own {self.norm_parameters}"
        return f"both read the same {self.norm_name}(x), one norm shared"

    @property
    def shared_kv(self) -> bool:
        """Grouped-query attention: fewer key/value heads than query heads, each shared."""
        return self.kv_heads < self.n_heads

    @property
    def gated_ffn(self) -> bool:
        return self.ffn.gated


def layer(config: TransformerConfig, stack: Stack, cross: bool | None = None) -> Layer:
    """One layer of `stack` as the engine builds it from `config`; `cross`: whether a decoder layer has
    cross-attention (default: when the model has an encoder)."""
    first, parallel = config.norm_first, config.parallel_residual
    cross = not config.is_decoder_only if cross is None else cross
    if stack == "encoder":
        attentions = [Sublayer("self_attn", "norm1", "after_attn", "self-attention")]
        ffn = Sublayer("ffn", "norm2", "after_ffn")
    else:
        attentions = [Sublayer("self_attn", "norm1", "after_self_attn", "masked self-attention")]
        if cross:
            attentions.append(Sublayer("cross_attn", "norm2", "after_cross_attn", "cross-attention"))
        ffn = Sublayer("ffn", "norm3", "after_ffn")  # norm3 is always the decoder's FFN's, with or without cross
    subs = tuple(
        Sublayer(sub.module, sub.norm, sub.state, sub.kind, first, parallel or i == 0)
        for i, sub in enumerate((*attentions, ffn))
    )
    return Layer(stack, subs, first, parallel)


def describe(config: TransformerConfig) -> Anatomy:
    """What a model built from `config` is made of (pure: the config's own fields, read as the engine reads them)."""
    rotary = config.positional == "rotary"
    return Anatomy(
        shape=config.shape,
        encoder=layer(config, "encoder") if config.n_encoder_layers else None,
        decoder=layer(config, "decoder") if config.n_decoder_layers else None,
        norm=config.norm,
        norm_first=config.norm_first,
        positions=Positions(config.positional, config.rope_theta, config.rotary_fraction if rotary else 0.0),
        ffn=FeedForwardKind(config.activation, config.gated_ffn),
        n_heads=config.n_heads,
        kv_heads=config.key_value_heads,
        final_norm=config.norm_first,
        parallel=config.parallel_residual,
    )
