"""The models the explorer offers, by key: how each is built and what it reads text with."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch

from models import tasks, train
from models.config import PAPER_BASE
from models.convert_bert import ConversionError
from models.pretrained import ModelFolderError, load_bert_folder, minilm_folder, read_config
from models.tokenize import TokenizeError, WordPieceTokenizer
from models.transformer import Transformer

# the MiniLM and paper-random examples; the toy tasks bring their own
ENGLISH_EXAMPLES = (
    "The animal didn't cross the street because it was too tired",
    "Bark is very cute and he is a dog",
    "Thinking Machines",
    "The agreement on the European Economic Area was signed in August 1992",
)


@dataclass(frozen=True)
class LoadedModel:
    """A ready model (eval mode, no grad) with its tokenizer; shared read-only by every session."""

    key: str
    title: str
    description: str
    model: Transformer
    tokenizer: WordPieceTokenizer | tasks.Vocabulary  # reads the source text
    examples: tuple[str, ...]  # sentences this model can read; the first is its example
    bos_id: int | None = None  # encoder-decoder: the token that starts the target, and the one that ends it
    eos_id: int | None = None
    target_tokenizer: tasks.Vocabulary | None = None  # None: the target shares the source's vocabulary
    revision: str = ""  # changes whenever the weights behind this key change (models trained in the app)
    task: tasks.Task | None = None  # toy models: the task, which knows the right answer for a source

    @property
    def example(self) -> str:
        return self.examples[0]

    @property
    def target_vocabulary(self) -> WordPieceTokenizer | tasks.Vocabulary:
        return self.tokenizer if self.target_tokenizer is None else self.target_tokenizer

    def can_read(self, text: str) -> bool:
        """Whether the tokenizer takes this text (every word known, not empty)."""
        try:
            self.tokenizer.encode(text, self.max_tokens)
        except TokenizeError:
            return False
        return True

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
    return LoadedModel("minilm", spec.title, spec.description, model, tokenizer, ENGLISH_EXAMPLES)


def _paper_random() -> LoadedModel:
    # MiniLM's WordPiece vocabulary, so any English sentence can be typed; weights drawn from a fixed seed
    tokenizer = load_bert_folder_tokenizer()
    config = replace(PAPER_BASE, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, dropout=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        model = Transformer(config)
    model.eval().requires_grad_(False)
    spec = MODELS["paper-random"]
    examples = (ENGLISH_EXAMPLES[3], *ENGLISH_EXAMPLES[:3])
    return LoadedModel(
        "paper-random", spec.title, spec.description, model, tokenizer, examples, tokenizer.cls_id, tokenizer.sep_id
    )


def _minilm_random() -> LoadedModel:
    # all-MiniLM-L6-v2's shape and tokenizer, weights drawn from a fixed seed: the pretrained model's untrained twin
    folder = minilm_folder()
    tokenizer = WordPieceTokenizer.from_folder(folder)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        model = Transformer(replace(read_config(folder), dropout=0.0))
    model.eval().requires_grad_(False)
    spec = MODELS["minilm-random"]
    return LoadedModel("minilm-random", spec.title, spec.description, model, tokenizer, ENGLISH_EXAMPLES)


def from_task(
    key: str, title: str, description: str, model: Transformer, task: tasks.Task, revision: str = ""
) -> LoadedModel:
    """A model trained on a toy task, reading the task's source words and writing its target words."""
    return LoadedModel(
        key,
        title,
        description,
        model,
        task.source,
        task.examples,
        tasks.BOS_ID,
        tasks.EOS_ID,
        task.target,
        revision,
        task,
    )


def _trained(task_name: str) -> LoadedModel:
    model, task, record = train.load(task_name)
    spec = MODELS[task_name]
    return from_task(task_name, spec.title, spec.description, model, task)


def load_bert_folder_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_folder(minilm_folder())


MODELS: dict[str, ModelSpec] = {
    "minilm": ModelSpec(
        "all-MiniLM-L6-v2 (pretrained)",
        "Real pretrained weights (6 layers x 12 heads, d_model 384) loaded into the from-scratch encoder.",
        _minilm,
    ),
    "minilm-random": ModelSpec(
        "all-MiniLM-L6-v2 shape, random weights",
        f"The same encoder and tokenizer as the pretrained MiniLM, with untrained weights (seed {RANDOM_SEED}): "
        "what attention looks like before any learning.",
        _minilm_random,
    ),
    "paper-random": ModelSpec(
        "Paper base, random weights",
        f"The paper's base encoder-decoder (6+6 layers x 8 heads, d_model 512), untrained (seed {RANDOM_SEED}).",
        _paper_random,
    ),
    "translate": ModelSpec(
        "Toy translation (trained here)",
        "English-like to French-like with adjectives after the noun (2+2 layers x 4 heads, d_model 96), "
        "trained from scratch by python -m models.train --task translate.",
        lambda: _trained("translate"),
    ),
    "reverse": ModelSpec(
        "Reverse words (trained here)",
        "Writes the words backwards: the cross-attention should be the anti-diagonal (2+2 layers x 4 heads, "
        "d_model 64), trained from scratch by python -m models.train --task reverse.",
        lambda: _trained("reverse"),
    ),
}


# Your own BERT-family folders (config.json, model.safetensors or pytorch_model.bin, tokenizer.json or vocab.txt):
# EXPLORER_MODEL_FOLDERS="name=/path/to/folder;other=/path/to/another" adds "folder:name" to the model list.
FOLDERS_ENV = "EXPLORER_MODEL_FOLDERS"


def _folder_model(key: str, folder: str) -> LoadedModel:
    model, tokenizer = load_bert_folder(folder)
    spec = MODELS[key]
    return LoadedModel(key, spec.title, spec.description, model, tokenizer, ENGLISH_EXAMPLES)


def _add_folders(value: str) -> None:
    for entry in filter(None, (e.strip() for e in value.split(";"))):
        name, _, folder = entry.partition("=")
        key = f"folder:{name.strip()}"
        description = f"BERT-family weights from the local folder {folder.strip()}, in the from-scratch encoder."
        MODELS[key] = ModelSpec(
            f"{name.strip()} (local folder)", description, partial(_folder_model, key, folder.strip())
        )


_add_folders(os.environ.get(FOLDERS_ENV, ""))


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return f"unknown model {self.args[0]!r}; choose from {', '.join(MODELS)}"


class ModelLoadError(RuntimeError):
    """A model whose files are missing, truncated, corrupt or do not fit: the message names the file and why."""


def load(key: str) -> LoadedModel:
    """Build the model named by key (slow: callers cache it)."""
    if key not in MODELS:
        raise UnknownModelError(key)
    try:
        return MODELS[key].build()
    except (ModelFolderError, ConversionError, train.CheckpointError, OSError) as e:
        raise ModelLoadError(f"{MODELS[key].title} could not be loaded: {e}") from e
