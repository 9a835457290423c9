"""The boxes of figure 1 for a model, from its config and the block models.anatomy describes: which boxes each stack
has, bottom to top, and where each stands (explorer.figures.overview draws them and their arrows)."""

from __future__ import annotations

from dataclasses import dataclass

from attention_explorer.models.anatomy import Anatomy, describe
from attention_explorer.models.config import TransformerConfig

# Geometry in axis units: a box is WIDTH x HEIGHT, rows ROW apart, bottom (the tokens) to top
WIDTH, HEIGHT, ROW = 3.4, 0.62, 1.0


@dataclass(frozen=True)
class Block:
    """One box of figure 1: its label (plain text), colour kind, centre, and the stem of the lesson step showing it."""

    label: str  # "\n" breaks a line
    kind: str
    x: float
    y: float
    stem: str
    width: float = WIDTH  # a parallel block's two sub-layers stand side by side, each half as wide


@dataclass(frozen=True)
class Column:
    """The encoder's or the decoder's boxes bottom to top, the residual side (-1 left, +1 right), and its stack:
    the layer's boxes from index `first` to `last`, repeated `n_layers` times (a parallel block's two sub-layers: two
    boxes in one row)."""

    name: str
    x: float
    side: int
    blocks: tuple[Block, ...]
    first: int
    last: int
    n_layers: int
    parallel: bool = False

    @property
    def bracket(self) -> tuple[float, float]:
        """(bottom, top) of the stack's dotted bracket: around the layer's boxes and its first residual branch."""
        return self.blocks[self.first].y - 0.65 * ROW, self.blocks[self.last].y + 0.45 * ROW

    @property
    def title(self) -> str:
        return f"{self.name}: N = {self.n_layers} layers"


def columns(config: TransformerConfig) -> list[Column]:
    """The encoder and, for an encoder-decoder, the decoder to its right, as figure 1 draws them."""
    block = describe(config)  # the layers as models.anatomy describes them
    position = "No position added (rotary: every layer turns q, k)"
    if len(block.positions.bases) > 1:  # a base for global layers and one for local ones (Gemma 3)
        whole, local = block.positions.bases
        position = f"No position added (rotary: bases {local:,.0f} local, {whole:,.0f} global)"
    if block.positions.added:
        position = f"+ {block.positions.kind} positions"
    norm = block.norm_name
    extra = ", token type, LayerNorm" if config.embedding_norm else ""
    scale = " × √d_model" if config.scale_embeddings else ""
    gated = f"Gated feed-forward ({block.ffn.name})" if block.ffn.gated else "Feed-forward"  # SwiGLU, GeGLU
    ffn = f"{gated} {config.d_model} → {config.d_ff} → {config.d_model}"
    h = f"(h = {block.n_heads})"
    if block.shared_kv:  # grouped-query attention
        h = f"({block.n_heads} query heads, {block.kv_heads} key/value head{'s' * (block.kv_heads > 1)})"
    if block.windowed:  # a sliding window on some layers (the caption under the map says which)
        h = f"{h[:-1]}; local or global)"

    def column(name: str, x: float, side: int, below: list, layer, above: list, n: int, stems: dict) -> Column:
        """The stack's boxes: `below` its layers, then each described sub-layer with its Add & Norm, then `above`."""
        names = {"self_attn": f"{'Masked self' if layer.stack == 'decoder' else 'Multi-head self'}-attention {h}"}
        names |= {"cross_attn": f"Cross-attention {h}", "ffn": ffn}
        kinds = {"self_attn": "attention", "cross_attn": "attention", "ffn": "ffn"}
        subs = [row for sub in layer.sublayers for row in ((names[sub.module], kinds[sub.module], stems[sub.module]),)]
        rows = [*below, *(row for sub in subs for row in (sub, (add_norm, "norm", "add_norm"))), *above]
        first, last = len(below), len(below) + 2 * len(subs) - 1
        blocks = [Block(label, kind, x, row_y(i, last + 1), stem) for i, (label, kind, stem) in enumerate(rows)]
        return Column(name, x, side, tuple(blocks), first, last, n)

    # pre-LN: each sub-layer reads LayerNorm(x) and its output is added to x (no norm after the addition)
    add_norm = f"Add ({block.pre_name}: the {norm} comes before the sub-layer)" if block.norm_first else "Add & Norm"
    if block.sandwich:  # Gemma 2/3: the sub-layer's output is normed again before it is added
        add_norm = f"Add (sandwich: an {norm} before the sub-layer and one after)"
    if block.parallel:
        return [parallel_column(config, block, scale, position, h)]
    reading = {"self_attn": "query_key_value", "ffn": "add_norm"}  # where the lesson shows each sub-layer
    if block.encoder is None:
        final = f"Final {norm}, then linear" if block.final_norm else "Linear"
        below = [
            ("Inputs: tokens (the text)", "tokens", "tokens"),
            (f"Token embedding{scale}", "embedding", "embedding"),
            (position, "embedding", "positional"),
        ]
        above = [
            (f"{final} ({config.d_model} → {config.target_vocab_size})", "output", "final_linear"),
            ("Softmax: next-token probabilities", "output", "final_linear"),
            ("Loss: each next token of the text", "loss", "loss"),
        ]
        return [column("Decoder-only", 0.0, -1, below, block.decoder, above, config.n_decoder_layers, reading)]
    encoder_x, decoder_x = 0.0, 4.9
    below = [
        ("Inputs: tokens", "tokens", "tokens"),
        (f"Input embedding{scale}", "embedding", "embedding"),
        (f"{position}{extra}", "embedding", "positional"),
    ]
    found = [column("Encoder", encoder_x, -1, below, block.encoder, [], config.n_encoder_layers, reading)]
    if block.decoder is not None:
        below = [
            ("Outputs, shifted right: tokens", "tokens", "tokens"),
            (f"Output embedding{scale}", "embedding", "embedding"),
            (position, "embedding", "positional"),
        ]
        above = [
            (f"Linear ({config.d_model} → {config.target_vocab_size})", "output", "final_linear"),
            ("Softmax: output probabilities", "output", "final_linear"),
            ("Loss: what training lowers", "loss", "loss"),
        ]
        decoding = {"self_attn": "decoding", "cross_attn": "decoding", "ffn": "add_norm"}  # after the decoder's step
        found.append(column("Decoder", decoder_x, +1, below, block.decoder, above, config.n_decoder_layers, decoding))
    return found


def parallel_column(config: TransformerConfig, block: Anatomy, scale: str, position: str, h: str) -> Column:
    """A decoder-only stack whose attention and feed-forward stand side by side: both read the same x, each through
    its own norm, and both outputs are added to x in one addition."""
    rows = [
        ("Inputs: tokens (the text)", "tokens", "tokens"),
        (f"Token embedding{scale}", "embedding", "embedding"),
        (position, "embedding", "positional"),
        (f"Add both ({block.pre_name}: each reads its own {block.norm_name})", "norm", "add_norm"),
        (
            f"Final {block.norm_name}, then linear ({config.d_model} → {config.target_vocab_size})",
            "output",
            "final_linear",
        ),
        ("Softmax: next-token probabilities", "output", "final_linear"),
        ("Loss: each next token of the text", "loss", "loss"),
    ]
    blocks = [Block(label, kind, 0.0, row_y(i + (i >= 3), 5), stem) for i, (label, kind, stem) in enumerate(rows)]
    half, y = WIDTH / 2 - 0.05, row_y(3, 5)  # the pair's row, below the addition
    attention = Block(f"Masked attention\n{h}", "attention", -WIDTH / 4 - 0.025, y, "query_key_value", half)
    ffn = f"{'Gated feed-forward' if block.ffn.gated else 'Feed-forward'}\n{config.d_model} → {config.d_ff}"
    pair = (attention, Block(ffn, "ffn", WIDTH / 4 + 0.025, y, "add_norm", half))
    return Column("Decoder-only", 0.0, -1, (*blocks[:3], *pair, *blocks[3:]), 3, 5, config.n_decoder_layers, True)


def row_y(i: int, linear: int) -> float:
    """Row i's centre: a little more room above the stack (its title; the linear layer is row `linear`) and above
    the softmax (the loss is not part of the model)."""
    return i * ROW + 0.3 * (i >= 3) + 0.5 * (i >= linear) + 0.2 * (i >= linear + 2)


def sub_layers(column: Column) -> list[tuple[Block, Block]]:
    """(sub-layer, its Add & Norm) for every sub-layer of the column's stack (a parallel block: one connection
    around both sub-layers into their one addition)."""
    stack = column.blocks[column.first : column.last + 1]
    if column.parallel:
        return [(stack[0], stack[-1])]
    return list(zip(stack[0::2], stack[1::2], strict=True))
