"""The models the explorer offers, by key: how each is built and what it reads text with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from models.config import PAPER_BASE
from models.pretrained import load_bert_folder, minilm_folder
from models.tokenize import WordPieceTokenizer
from models.transformer import Transformer


@dataclass(frozen=True)
class LoadedModel:
    """A ready model (eval mode, no grad) with its tokenizer; shared read-only by every session."""

    key: str
    title: str
    description: str
    model: Transformer
    tokenizer: WordPieceTokenizer
    example: str
    bos_id: int | None = None  # encoder-decoder: the token that starts the target, and the one that ends it
    eos_id: int | None = None

    @property
    def max_tokens(self) -> int:
        return self.model.config.max_len

    @property
    def is_encoder_decoder(self) -> bool:
        return self.model.config.is_encoder_decoder


@dataclass(frozen=True)
class ModelSpec:
    title: str
    description: str
    build: Callable[[], LoadedModel]


RANDOM_SEED = 0


def _minilm() -> LoadedModel:
    model, tokenizer = load_bert_folder(minilm_folder())
    spec = MODELS["minilm"]
    example = "The animal didn't cross the street because it was too tired"
    return LoadedModel("minilm", spec.title, spec.description, model, tokenizer, example)


def _paper_random() -> LoadedModel:
    # MiniLM's WordPiece vocabulary, so any English sentence can be typed; weights drawn from a fixed seed
    tokenizer = load_bert_folder_tokenizer()
    config = replace(PAPER_BASE, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, dropout=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        model = Transformer(config)
    model.eval().requires_grad_(False)
    spec = MODELS["paper-random"]
    example = "The agreement on the European Economic Area was signed in August 1992"
    return LoadedModel(
        "paper-random", spec.title, spec.description, model, tokenizer, example, tokenizer.cls_id, tokenizer.sep_id
    )


def load_bert_folder_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_folder(minilm_folder())


MODELS: dict[str, ModelSpec] = {
    "minilm": ModelSpec(
        "all-MiniLM-L6-v2 (pretrained)",
        "Real pretrained weights (6 layers x 12 heads, d_model 384) loaded into the from-scratch encoder.",
        _minilm,
    ),
    "paper-random": ModelSpec(
        "Paper base, random weights",
        f"The paper's base encoder-decoder (6+6 layers x 8 heads, d_model 512), untrained (seed {RANDOM_SEED}).",
        _paper_random,
    ),
}


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return f"unknown model {self.args[0]!r}; choose from {', '.join(MODELS)}"


def load(key: str) -> LoadedModel:
    """Build the model named by key (slow: callers cache it)."""
    if key not in MODELS:
        raise UnknownModelError(key)
    return MODELS[key].build()
