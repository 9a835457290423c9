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
    # sandwich norms (Gemma 2/3): the norm its output passes through before it is added ("post_norm1"..); None: added
    # as it is
    post_norm: str | None = None

    @property
    def is_attention(self) -> bool:
        return self.module != "ffn"

    def reads(self, norm_name: str) -> str:
        """What it reads, as a formula: "x" or "LayerNorm(x)"."""
        return f"{norm_name}(x)" if self.reads_normed else "x"

    def adds(self, norm_name: str) -> str:
        """What it adds to the residual stream, as a formula: "SelfAttention(LayerNorm(x))", or with a norm after it
        (sandwich): "RMSNorm(SelfAttention(RMSNorm(x)))"."""
        added = f"{FORMULA_NAMES[self.module]}({self.reads(norm_name)})"
        return added if self.post_norm is None else f"{norm_name}({added})"


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
    base: float = 10000.0  # rotary's base (the global layers' where local ones have their own)
    fraction: float = 0.0  # the share of each head's dimensions rotary turns (0 when nothing is turned)
    local_base: float | None = None  # the local (sliding-window) layers' own rotary base (Gemma 3: 10,000); None: base

    @property
    def bases(self) -> tuple[float, ...]:
        """Every rotary base the model turns with: one, or the global layers' then the local ones' (Gemma 3)."""
        if self.kind != "rotary":
            return ()
        return (self.base,) if self.local_base in (None, self.base) else (self.base, self.local_base)

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

    @property
    def name(self) -> str:
        """Its name in the literature: SwiGLU (gated SiLU), GeGLU (gated GELU, Gemma), or its activation's."""
        if not self.gated:
            return self.activation
        return "SwiGLU" if self.activation in ("silu", "swish") else "GeGLU" if "gelu" in self.activation else "GLU"


@dataclass(frozen=True)
class Span:
    """Which keys one layer's self-attention reads: every earlier one (global, as in the paper), or the last `window`
    only (local: key j visible to query i when i - w < j <= i), and the rotary base its queries and keys turn by."""

    window: int | None = None  # None: global
    rotary_base: float | None = None  # None: no rotary positions

    @property
    def local(self) -> bool:
        return self.window is not None

    @property
    def kind(self) -> Literal["local", "global"]:
        return "local" if self.local else "global"


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
    d_head: int = 0  # a head's width (d_model / n_heads in the paper; Gemma 3 270M: 256 over d_model 640)
    qk_norm: bool = False  # an RMSNorm over each head's q and k before rotary (Gemma 3, Qwen3)
    sandwich: bool = False  # a norm after each sub-layer too: x + Norm(Sublayer(Norm(x))) (Gemma 2/3)
    norm_offset: float = 0.0  # RMSNorm's gain is (offset + w): 1 for Gemma's (1 + w)
    embedding_scale: float = 1.0  # the token embedding's factor: sqrt(d_model) in the paper and Gemma, 1 elsewhere
    query_scale: float = 0.0  # the scores' factor: 1/sqrt(d_head) (eq. 1), or Gemma's query_pre_attn_scalar^-1/2
    logit_softcap: float | None = None  # final logits as cap * tanh(logits / cap); None: none
    spans: tuple[Span, ...] = ()  # a decoder-only model's layers' spans, bottom first (() for other shapes: global)

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

    def span(self, layer: int) -> Span:
        """Layer `layer`'s (from 0) span: its window (None: global) and rotary base."""
        if self.spans:
            return self.spans[layer]
        return Span(None, self.positions.base if self.positions.rotary else None)

    @property
    def windowed(self) -> bool:
        """Whether any layer reads a sliding window of keys."""
        return any(span.local for span in self.spans)

    @property
    def scale_is_paper(self) -> bool:
        """Whether the scores are scaled by 1/sqrt(d_head), as eq. (1)."""
        return self.query_scale == self.d_head**-0.5


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
    # sandwich norms: each sub-layer's output normed again before it is added (post_norm1 after attention, ...)
    post = (lambda sub: "post_" + sub.norm) if config.sandwich_norm else (lambda _sub: None)
    subs = tuple(
        Sublayer(sub.module, sub.norm, sub.state, sub.kind, first, parallel or i == 0, post(sub))
        for i, sub in enumerate((*attentions, ffn))
    )
    return Layer(stack, subs, first, parallel)


def spans(config: TransformerConfig) -> tuple[Span, ...]:
    """A decoder-only model's layers' spans as the engine builds them: a local layer's window and rotary base (its
    own where the config gives local layers one), a global layer's every key."""
    if not config.is_decoder_only:
        return ()
    rotary = config.positional == "rotary"
    found = []
    for i in range(config.n_decoder_layers):
        local = config.local(i)
        base = (config.rope_local_theta or config.rope_theta) if local else config.rope_theta
        found.append(Span(config.sliding_window if local else None, base if rotary else None))
    return tuple(found)


def describe(config: TransformerConfig) -> Anatomy:
    """What a model built from `config` is made of (pure: the config's own fields, read as the engine reads them)."""
    rotary = config.positional == "rotary"
    local_base = config.rope_local_theta if rotary and config.sliding_window is not None else None
    return Anatomy(
        shape=config.shape,
        encoder=layer(config, "encoder") if config.n_encoder_layers else None,
        decoder=layer(config, "decoder") if config.n_decoder_layers else None,
        norm=config.norm,
        norm_first=config.norm_first,
        positions=Positions(
            config.positional, config.rope_theta, config.rotary_fraction if rotary else 0.0, local_base
        ),
        ffn=FeedForwardKind(config.activation, config.gated_ffn),
        n_heads=config.n_heads,
        kv_heads=config.key_value_heads,
        final_norm=config.norm_first,
        parallel=config.parallel_residual,
        d_head=config.d_head,
        qk_norm=config.qk_norm,
        sandwich=config.sandwich_norm,
        norm_offset=config.norm_offset,
        embedding_scale=config.d_model**0.5 if config.scale_embeddings else 1.0,
        query_scale=config.d_head**-0.5 if config.query_scale is None else config.query_scale,
        logit_softcap=config.logit_softcap,
        spans=spans(config),
    )
