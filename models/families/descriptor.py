"""What kind of model a loaded model is, stated once as data: pages, wording, word merging, starting heads,
statistics and the Overview read this descriptor, never a model key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from attention_explorer.models import tasks
from attention_explorer.models.anatomy import Anatomy, describe
from attention_explorer.models.config import Shape, TransformerConfig
from attention_explorer.models.tokenize import Spelling

# "from a folder": weights read from a folder the user named (or the Hugging Face cache), which does not say whether
# they were ever trained (a folder of random weights looks the same)
Origin = Literal["pretrained", "random", "trained here", "from a folder"]


@dataclass(frozen=True)
class Family:
    """A model's family and shape, where its weights come from, and how its tokenizer spells tokens."""

    name: str  # "BERT family", "GPT-2 family", "the paper's Transformer"
    block: Anatomy  # what its layers are made of (models.anatomy), read from the config the engine is built from
    origin: Origin
    word_start: str = ""  # a token that starts a word begins with this mark (GPT-2's byte-level BPE: "Ġ")
    continuation: str = ""  # a token that continues the word before it begins with this mark (WordPiece: "##")
    specials: tuple[str, ...] = ()  # the tokenizer's own marker tokens
    tokenizer: str = ""  # what kind of tokenizer: WORDPIECE, BYTE_BPE, SENTENCEPIECE or WORD_LIST ("" where unsaid)
    # its marker tokens by role ("" where it has none): the one a text starts with ([CLS], <bos>; GPT-2's <|endoftext|>
    # and SmolLM2's <|im_start|> as their files name them), the one that ends a text (where a model stops writing),
    # the one that pads a batch, and the one that stands for what the vocabulary cannot spell
    start_token: str = ""
    end_token: str = ""
    pad_token: str = ""
    unknown_token: str = ""
    task: str = ""  # a toy model's task name ("translate", "reverse", "induction"); "" for the others
    # how a pretrained model's weights were trained, as its source says it ("" where nothing is said: a folder's)
    training: str = ""

    @property
    def shape(self) -> Shape:
        return self.block.shape

    # the block's choices, read through `block` (models/ and tests read these; the explorer reads `block` itself)
    @property
    def norm_first(self) -> bool:
        """pre-LN (GPT-2) or post-LN (the paper, BERT)."""
        return self.block.norm_first

    @property
    def norm(self) -> str:
        """ "layer" (LayerNorm: the paper, BERT, GPT-2) or "rms" (RMSNorm: the Llama family)."""
        return self.block.norm

    @property
    def positional(self) -> str:
        """ "sinusoidal" or "learned" (added to the embedding), or "rotary" (q, k turned)."""
        return self.block.positions.kind

    @property
    def causal(self) -> bool:
        """Whether some self-attention is masked so that no position sees a later one (every decoder's is)."""
        return self.shape != "encoder-only"

    @property
    def next_token_head(self) -> bool:
        """Whether the model ends in a final linear layer + softmax over its vocabulary (an output distribution)."""
        return self.shape != "encoder-only"

    @property
    def has_encoder(self) -> bool:
        return self.shape != "decoder-only"

    @property
    def has_source(self) -> bool:
        """Whether the model writes a separate output from a source text (an encoder-decoder translates); a
        decoder-only model predicts the next token of the text itself."""
        return self.shape == "encoder-decoder"

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.block.kinds

    @property
    def pretrained(self) -> bool:
        return self.origin == "pretrained"

    @property
    def trained_here(self) -> bool:
        return self.origin == "trained here"

    @property
    def learned(self) -> bool:
        """Whether the weights are known to be learned (pretrained or trained here): not random, not a folder's."""
        return self.origin in ("pretrained", "trained here")

    @property
    def from_folder(self) -> bool:
        """Whether the weights were read from a folder that does not say where they came from."""
        return self.origin == "from a folder"

    @property
    def spelling(self) -> Spelling:
        """How the tokenizer spells tokens, and each as readable text: models.tokenize.Spelling."""
        return Spelling(self.word_start, self.specials)

    @property
    def shape_name(self) -> str:
        """ "an encoder-only model (BERT family)", as a sentence names it."""
        article = "an" if self.shape[0] in "aeiou" else "a"
        return f"{article} {self.shape} model ({self.name})"


def for_config(config: TransformerConfig, name: str, origin: Origin, **marks) -> Family:
    """The descriptor of a model built from `config` (its shape and block described from the config)."""
    return Family(name, describe(config), origin, **marks)


# the kinds of tokenizer a descriptor names
WORDPIECE = "WordPiece"  # BERT's: common words whole, rarer ones from '##' pieces
BYTE_BPE = "byte-level BPE"  # GPT-2's: any text spelt from byte merges, 'Ġ' for the space before a word
SENTENCEPIECE = "SentencePiece BPE"  # Llama 2's vocabulary: '▁' for the space before a word
WORD_LIST = "word list"  # a toy task's fixed words, each one token (models.tasks)

# how each kind of tokenizer spells its tokens, and its marker tokens by role
WORDPIECE_MARKS = {
    "tokenizer": WORDPIECE,
    "continuation": "##",
    "specials": ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"),
    "start_token": "[CLS]",
    "end_token": "[SEP]",
    "pad_token": "[PAD]",
    "unknown_token": "[UNK]",
}
# GPT-2 names <|endoftext|> its start and end of text (config.json's bos_token_id and eos_token_id); it has no
# padding, and byte merges spell any text, so no token stands for an unknown one
BYTE_BPE_MARKS = {
    "tokenizer": BYTE_BPE,
    "word_start": "Ġ",
    "specials": ("<|endoftext|>",),
    "start_token": "<|endoftext|>",
    "end_token": "<|endoftext|>",
}
SENTENCEPIECE_MARKS = {
    "tokenizer": SENTENCEPIECE,
    "word_start": "▁",
    "specials": ("<s>", "</s>", "<unk>"),
    "start_token": "<s>",
    "end_token": "</s>",
    "unknown_token": "<unk>",
}
# a toy task's words: its source ends with <eos>, the decoder's input starts with <bos>, and an unknown word is refused
WORD_LIST_MARKS = {
    "tokenizer": WORD_LIST,
    "specials": tasks.SPECIALS,
    "start_token": tasks.SPECIALS[tasks.BOS_ID],
    "end_token": tasks.SPECIALS[tasks.EOS_ID],
    "pad_token": tasks.SPECIALS[tasks.PAD_ID],
}
ROLES = ("start_token", "end_token", "pad_token", "unknown_token")
# config.json's id of each role's token (a GGUF file's tokenizer.ggml.*_token_id, as models.gguf reads them)
ROLE_IDS = {"start_token": "bos_token_id", "end_token": "eos_token_id", "pad_token": "pad_token_id"}


@runtime_checkable
class Vocabulary(Protocol):
    """What a descriptor reads of a tokenizer: its tokens by id and back."""

    def token_to_id(self, token: str) -> int | None: ...

    def id_to_token(self, token_id: int) -> str: ...

    @property
    def vocab_size(self) -> int: ...


def spelt_by(vocabulary: Vocabulary, *kinds: dict) -> dict:
    """Which of these kinds' marks (BYTE_BPE_MARKS, SENTENCEPIECE_MARKS, ...) the vocabulary writes a word's start
    with ('Ġthe' or '▁the'); the first if it writes neither."""
    for marks in kinds:
        if vocabulary.token_to_id(marks["word_start"] + "the") is not None:
            return marks
    return kinds[0]


def with_roles(marks: dict, vocabulary: Vocabulary, hf: Mapping[str, object] | None = None) -> dict:
    """`marks` with each role's token as config.json names it by id (bos_token_id, eos_token_id, pad_token_id; the
    first of a list), else as the marks name it where the vocabulary has that token, else none ("")."""
    found = dict(marks)
    for role in ROLES:
        if found.get(role) and vocabulary.token_to_id(found[role]) is None:
            found[role] = ""
    for role, field in ROLE_IDS.items():
        token_id = (hf or {}).get(field)
        if isinstance(token_id, list):
            token_id = token_id[0] if token_id else None
        if isinstance(token_id, int) and 0 <= token_id < vocabulary.vocab_size:
            found[role] = vocabulary.id_to_token(token_id)
    return found
