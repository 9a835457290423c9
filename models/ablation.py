"""Turning heads off (ablation): which heads, in which batch row, and what replaces their output before W_O.

An `Ablation` is passed to `Transformer.forward` (and greedy decoding) by value; each attention layer gets a
`models.attention.HeadPatch` for the heads it must replace. Zero ablation writes 0 where the head's output was;
mean ablation writes the head's mean output over a sample of texts the model reads (explorer.experiments.replacements
computes it); resample ablation and activation patching write the head's output on another run, position by
position. One batch row per head turns every head off in turn in one batched
forward (`each_head`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attention_explorer.models.attention import HeadPatch
from attention_explorer.models.config import TransformerConfig

# where each attention kind lives: (stack, the layer's module)
LOCATION = {
    "encoder_self": ("encoder", "self_attn"),
    "decoder_self": ("decoder", "self_attn"),
    "cross": ("decoder", "cross_attn"),
}
# what a head address may start with, naming its attention kind ("cross:2.1")
KIND_PREFIXES = {
    "encoder_self": "encoder_self",
    "encoder": "encoder_self",
    "enc": "encoder_self",
    "decoder_self": "decoder_self",
    "decoder": "decoder_self",
    "dec": "decoder_self",
    "cross": "cross",
}


class AblationError(ValueError):
    """A request to turn heads off that cannot be run: no head, a head the model does not have, every head."""


@dataclass(frozen=True, order=True)
class Head:
    """One head of one attention kind, counted from 0 (shown from 1: `address`)."""

    kind: str
    layer: int
    head: int

    @property
    def address(self) -> str:
        """L.H counted from 1, as the pages and the command line write it."""
        return f"{self.layer + 1}.{self.head + 1}"


def shapes(config: TransformerConfig) -> dict[str, tuple[int, int]]:
    """(layers, heads) of every attention kind the model has, in the order pages offer them."""
    found = {}
    if config.n_encoder_layers:
        found["encoder_self"] = (config.n_encoder_layers, config.n_heads)
    if config.n_decoder_layers:
        found["decoder_self"] = (config.n_decoder_layers, config.n_heads)
        if config.n_encoder_layers:
            found["cross"] = (config.n_decoder_layers, config.n_heads)
    return found


@dataclass(frozen=True)
class Ablation:
    """Heads turned off: per attention kind, a (B, L, H) mask (True: off in that batch row), and per kind the values
    that replace them: (L, H, Dh), one a head (mean ablation), or (L, H, T, Dh), one a head and position (resample
    ablation: the head's output on another text), or None (zero ablation)."""

    off: Mapping[str, Bool[Tensor, "B L H"] | Bool[Tensor, "B L H T"]]  # (B, L, H, T): at the positions marked only
    values: Mapping[str, Float[Tensor, "L H Dh"] | Float[Tensor, "L H T Dh"]] | None = None
    rows: int = field(default=1)

    def stack_patches(self, stack: str, n_layers: int) -> list[dict[str, HeadPatch]]:
        """Each layer's patches in one stack, by the layer's module name; a layer with no head off gets none."""
        patches: list[dict[str, HeadPatch]] = [{} for _ in range(n_layers)]
        for kind, off in self.off.items():
            where, module = LOCATION[kind]
            if where != stack:
                continue
            for layer in range(n_layers):
                if bool(off[:, layer].any()):
                    value = None if self.values is None else self.values[kind][layer]
                    patches[layer][module] = HeadPatch(off[:, layer], value)  # (B, H)
        return patches


def _check(head: Head, model_shapes: Mapping[str, tuple[int, int]]) -> None:
    if head.kind not in model_shapes:
        kinds = ", ".join(model_shapes)
        raise AblationError(f"this model has no {head.kind} attention (it has {kinds})")
    n_layers, n_heads = model_shapes[head.kind]
    if not (0 <= head.layer < n_layers and 0 <= head.head < n_heads):
        raise AblationError(
            f"head {head.address} does not exist: this model's {head.kind} attention has layers 1-{n_layers} and "
            f"heads 1-{n_heads}"
        )


def heads_off(
    heads: Iterable[Head],
    model_shapes: Mapping[str, tuple[int, int]],
    values: Mapping[str, Tensor] | None = None,
) -> Ablation:
    """One batch row with `heads` turned off (AblationError for none, a head the model lacks, or every head)."""
    chosen = sorted(set(heads))
    if not chosen:
        raise AblationError("pick at least one head to turn off")
    for head in chosen:
        _check(head, model_shapes)
    total = sum(n_layers * n_heads for n_layers, n_heads in model_shapes.values())
    if len(chosen) == total:
        raise AblationError(
            f"that turns off all {total} heads: no attention is left, so no token can read another; keep one on"
        )
    off = {kind: torch.zeros(1, *shape, dtype=torch.bool) for kind, shape in model_shapes.items()}
    for head in chosen:
        off[head.kind][0, head.layer, head.head] = True
    return Ablation(off, values, 1)


def each_head(
    model_shapes: Mapping[str, tuple[int, int]], values: Mapping[str, Tensor] | None = None
) -> tuple[Ablation, list[Head]]:
    """One batch row per head, that head alone turned off: (the ablation, the head of each row)."""
    heads = [
        Head(kind, layer, head)
        for kind, (n_layers, n_heads) in model_shapes.items()
        for layer in range(n_layers)
        for head in range(n_heads)
    ]
    off = {kind: torch.zeros(len(heads), *shape, dtype=torch.bool) for kind, shape in model_shapes.items()}
    for row, head in enumerate(heads):
        off[head.kind][row, head.layer, head.head] = True
    return Ablation(off, values, len(heads)), heads


def each_layer(
    model_shapes: Mapping[str, tuple[int, int]], values: Mapping[str, Tensor] | None = None
) -> tuple[Ablation, list[tuple[str, int]]]:
    """One batch row per layer of each attention kind, every head of that layer turned off together: (the ablation,
    the (kind, layer) of each row)."""
    layers = [(kind, layer) for kind, (n_layers, _) in model_shapes.items() for layer in range(n_layers)]
    off = {kind: torch.zeros(len(layers), *shape, dtype=torch.bool) for kind, shape in model_shapes.items()}
    for row, (kind, layer) in enumerate(layers):
        off[kind][row, layer, :] = True
    return Ablation(off, values, len(layers)), layers


def rows(ablation: Ablation, start: int, stop: int) -> Ablation:
    """Batch rows [start, stop) of an ablation (a batched forward in chunks)."""
    return Ablation({kind: off[start:stop] for kind, off in ablation.off.items()}, ablation.values, stop - start)


ADDRESS = re.compile(r"^(?:(?P<kind>[a-z_]+):)?(?P<layer>\d+)\.(?P<head>\d+)$")


def parse(text: str, model_shapes: Mapping[str, tuple[int, int]]) -> list[Head]:
    """Heads written as `L.H[,L.H...]`, counted from 1 as shown; a model with several attention kinds needs the kind
    first (`cross:2.1`, `encoder:1.3`, `decoder:2.4`). AblationError names what is wrong."""
    kinds = list(model_shapes)
    found = []
    for part in (p.strip() for p in text.split(",")):
        match = ADDRESS.match(part)
        if match is None:
            raise AblationError(f"{part!r} is not a head: write layer.head counted from 1, e.g. 2.1")
        prefix = match["kind"]
        if prefix is None:
            if len(kinds) > 1:
                raise AblationError(
                    f"this model has {len(kinds)} attention kinds: name one before the head, e.g. cross:{part} "
                    "(encoder, decoder or cross)"
                )
            kind = kinds[0]
        elif prefix in KIND_PREFIXES:
            kind = KIND_PREFIXES[prefix]
        else:
            raise AblationError(f"unknown attention kind {prefix!r}: use encoder, decoder or cross")
        head = Head(kind, int(match["layer"]) - 1, int(match["head"]) - 1)
        _check(head, model_shapes)
        found.append(head)
    return found
