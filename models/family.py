"""What kind of model a loaded model is, stated once as data: pages, wording, word merging, starting heads,
statistics and the Overview read this descriptor, never a model key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


# how each tokenizer family spells its tokens
WORDPIECE_MARKS = {"continuation": "##", "specials": ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")}
BYTE_BPE_MARKS = {"word_start": "Ġ", "specials": ("<|endoftext|>",)}
