"""Sentences whose truth depends on the model or the recipe, written from the model's key and models.train's data."""

from __future__ import annotations

from models import train

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
