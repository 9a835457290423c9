"""Sentences whose truth depends on the model or the recipe, written from the model's key and models.train's data."""

from __future__ import annotations

import math

from models import train
from models.config import TransformerConfig

PAPER_WARMUP = 4000  # section 5.3
PAPER_STEPS = 100_000  # base model, section 5.2


def head_patterns(model_key: str) -> str:
    """What the heads of this model can be expected to show: learned patterns only where weights were learned."""
    if model_key == "minilm" or model_key.startswith("folder:"):
        return (
            "Pretrained heads learn different patterns: some look at the previous token, some at punctuation or "
            "[SEP], some spread broadly."
        )
    if model_key in ("translate", "reverse") or model_key.startswith("yours-"):
        return (
            "A toy model trained here: look for the task's alignment in the cross-attention (the anti-diagonal for "
            "reverse, adjectives crossing behind their noun for translate); the patterns pretrained language models "
            "learn need not appear."
        )
    return "Random, untrained weights: no head has learned anything, so any pattern here is chance, not meaning."


def recipe_departures(task: str) -> list[str]:
    """Where the training recipe of a toy task departs from the paper's (section 5), from its Recipe."""
    recipe = train.RECIPES[task]
    found = [
        f"gradient clipping at norm {recipe.clip_norm:g} (the paper has none: small post-LN models diverge here "
        "without it)",
        f"{recipe.warmup} warm-up steps instead of {PAPER_WARMUP:,} ({recipe.steps:,} steps in all instead of "
        f"{PAPER_STEPS:,})",
        f"batches of {recipe.batch_size} sentence pairs instead of about 25,000 source and 25,000 target tokens",
    ]
    if recipe.lr_factor != 1.0:
        found.append(f"the learning rate of eq. 3 times {recipe.lr_factor:g} (at the full rate it keeps oscillating)")
    return found


def embedding_sum(config: TransformerConfig, stack: str = "encoder") -> str:
    """What enters layer 1, in the order the model computes it (section 3.4; BERT adds token type and a LayerNorm)."""
    token = "target token embedding" if stack == "decoder" else "token embedding"
    if config.scale_embeddings:
        token += f" x sqrt(d_model) (= x {math.sqrt(config.d_model):.4g})"
    terms = [token, "sinusoid (eq. PE)" if config.positional == "sinusoidal" else "learned position embedding"]
    if config.type_vocab_size:
        terms.insert(1, "token type embedding (type 0)")
    summed = " + ".join(terms)
    return f"LayerNorm({summed})" if config.embedding_norm else summed


def attention_input(config: TransformerConfig, kind: str, layer: int) -> str:
    """The row x an attention sub-layer projects to q (and, for self-attention, k and v), named as the model
    computes it: post-LN layers hand on LayerNorm(h + sublayer(h)); pre-LN layers hand on h + sublayer(LayerNorm(h))."""
    stack = "encoder" if kind == "encoder_self" else "decoder"
    if kind == "cross":
        where = f"decoder layer {layer + 1} after masked self-attention"
        if config.norm_first:
            return f"{where}: h + SelfAttn(LayerNorm(h)) (pre-LN: not yet normalised)"
        return f"{where} and its Add & Norm: LayerNorm(h + SelfAttn(h)) (post-LN)"
    if layer == 0:
        return embedding_sum(config, stack)
    if config.norm_first:
        return f"output of {stack} layer {layer}: h + FFN(LayerNorm(h)) (pre-LN: not yet normalised)"
    return f"output of {stack} layer {layer}, after its last Add & Norm: LayerNorm(h + FFN(h)) (post-LN)"


def pre_ln_note(config: TransformerConfig) -> str:
    """Pre-LN sub-layers normalise their own input first, so q is projected from LayerNorm(x), not x."""
    if not config.norm_first:
        return ""
    return (
        "This model is pre-LN: the sub-layer first takes LayerNorm(x) with its own gamma and beta, and q, k and v are "
        "projected from that, not from x itself."
    )
