"""How a tokenizer split a text: each token's kind, the counts that explain why words and tokens differ, and what
this tokenizer's special tokens and marks are for (the lesson's step 1). No streamlit."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from attention_explorer.explorer.run.trace import UNKNOWN
from attention_explorer.models.tokenize import NEWLINE_MARK, SPACE_MARK

SPECIAL, WORD, PIECE, UNKNOWN_KIND = "special", "whole word", "piece of a word", "unknown"
KINDS = (SPECIAL, WORD, PIECE, UNKNOWN_KIND)
CONTINUES = "##"  # WordPiece writes a piece that continues the word before it with this mark
N_OPTIONS = 4
SPELT = "as the tokenizer spells it"  # step 1's table: the raw token beside the readable one


@dataclass(frozen=True)
class TokenRow:
    """One token as the table shows it: where it sits, its id, its kind and the characters it came from."""

    position: int
    token: str
    id: int
    kind: str
    text: str  # the span of the typed text it was read from; "" for a special token


def word_ids_of(tokens: Sequence[str], word_ids: Sequence[int | None]) -> list[int | None]:
    """The tokenizer's word of each token; read off the '##' spelling when a trace kept none (specials: None)."""
    if word_ids:
        return list(word_ids)
    found: list[int | None] = []
    word = -1
    for token in tokens:
        if token.startswith("[") and token.endswith("]") and token != UNKNOWN:
            found.append(None)
            continue
        if not token.startswith(CONTINUES) or word < 0:
            word += 1
        found.append(word)
    return found


def kinds(tokens: Sequence[str], word_ids: Sequence[int | None]) -> list[str]:
    """Each token's kind: a special token (no word of the text), unknown ([UNK]), a piece of a word the tokenizer
    split into several tokens (its first piece included), or a whole word."""
    words = word_ids_of(tokens, word_ids)
    sizes: dict[int, int] = {}
    for w in words:
        if w is not None:
            sizes[w] = sizes.get(w, 0) + 1
    found = []
    for token, w in zip(tokens, words, strict=True):
        if w is None:
            found.append(SPECIAL)
        elif token == UNKNOWN:
            found.append(UNKNOWN_KIND)
        else:
            found.append(PIECE if sizes[w] > 1 else WORD)
    return found


def rows(
    text: str,
    tokens: Sequence[str],
    ids: Sequence[int],
    offsets: Sequence[tuple[int, int]],
    word_ids: Sequence[int | None],
) -> list[TokenRow]:
    """Every token of the text as the model read it, in order."""
    found = kinds(tokens, word_ids)
    return [
        TokenRow(i, token, int(token_id), kind, "" if kind == SPECIAL else text[a:b])
        for i, (token, token_id, kind, (a, b)) in enumerate(zip(tokens, ids, found, offsets, strict=True))
    ]


@dataclass(frozen=True)
class Counts:
    """What turned the words a person counts into the tokens the model reads."""

    words: int  # words as a person counts them: split at spaces (those the kept tokens come from)
    units: int  # the tokenizer's words: punctuation split off
    tokens: int  # what the model read
    pieces: int  # tokens that are pieces of a split word
    split_words: int  # words split into pieces
    unknown: int
    special: int
    truncated: int  # tokens cut off the end (max tokens)

    @property
    def summary(self) -> str:
        """'N words became M tokens (k pieces, u unknown, s special).'"""
        words = f"{self.words} word{'s' * (self.words != 1)}"
        tokens = f"{self.tokens} token{'s' * (self.tokens != 1)}"
        line = f"{words} became {tokens} ({self.pieces} pieces, {self.unknown} unknown, {self.special} special)."
        if self.truncated:
            line += f" {self.truncated} more tokens were cut off the end (the sidebar's Max tokens)."
        return line

    @property
    def why(self) -> str:
        """How the word count became the token count, term by term (the terms add up to the tokens)."""
        terms = [f"{self.words} word{'s' * (self.words != 1)} split at spaces"]
        if self.units != self.words:
            marks = self.units - self.words
            terms.append(f"{marks} punctuation mark{'s' * (marks != 1)} or word part{'s' * (marks != 1)} split off")
        if self.pieces:
            extra = self.pieces - self.split_words
            split = f"{self.split_words} word{'s' * (self.split_words != 1)}"
            terms.append(f"{extra} more because {split} became {self.pieces} pieces")
        if self.special:
            terms.append(f"{self.special} special token{'s' * (self.special != 1)} the tokenizer adds")
        line = " + ".join(terms) + f" = {self.tokens} tokens."
        if self.unknown:
            line += f" {self.unknown} of them {'is' if self.unknown == 1 else 'are'} {UNKNOWN}, still one token each."
        return line


def counts(
    text: str, tokens: Sequence[str], offsets: Sequence[tuple[int, int]], word_ids: Sequence[int | None], truncated: int
) -> Counts:
    """The counts behind the tokens of a text (those the model read; `truncated` more were cut)."""
    found = kinds(tokens, word_ids)
    words = word_ids_of(tokens, word_ids)
    # where each token's own characters start: a byte-level BPE token's span begins on the space before its word
    starts = [
        a + len(text[a:b]) - len(text[a:b].lstrip())
        for (a, b), kind in zip(offsets, found, strict=True)
        if kind != SPECIAL
    ]
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    # the words a person counts that the kept tokens come from (a text cut at max tokens counts only those)
    read = sum(any(a <= s < b for s in starts) for a, b in spans)
    pieces = [w for w, kind in zip(words, found, strict=True) if kind == PIECE]
    return Counts(
        words=read,
        units=len({w for w in words if w is not None}),
        tokens=len(tokens),
        pieces=len(pieces),
        split_words=len(set(pieces)),
        unknown=found.count(UNKNOWN_KIND),
        special=found.count(SPECIAL),
        truncated=truncated,
    )


def count_options(found: Counts, seed: str) -> list[int]:
    """Four token counts to choose from: the right one, the word count and near misses, in an order fixed by `seed`
    (the sentence), so every run of the page asks the same question the same way."""
    right = found.tokens
    candidates = [found.words, found.words + found.special, found.units, right - found.special]
    candidates += [right + d for d in (1, -1, 2, -2, 3, -3, 4, 5, 6)]
    options = [right]
    for c in candidates:
        if c > 0 and c not in options and len(options) < N_OPTIONS:
            options.append(c)
    digest = hashlib.blake2b(seed.encode(), digest_size=8).digest()
    random.Random(int.from_bytes(digest, "big")).shuffle(options)
    return options


SPECIAL_NOTES = {
    "[CLS]": "[CLS] ('classification') is put before every text. BERT's pretraining read its sentence-level "
    "prediction from this position's vector, so a trained model can gather the whole sentence there.",
    "[SEP]": "[SEP] ('separator') ends the text; a model reading two texts at once puts one between them.",
    "<eos>": "<eos> ('end of sequence') ends the source, so the encoder can count back from the end.",
    "<bos>": "<bos> ('beginning of sequence') is never in the source: the decoder's input starts with it, and its "
    "first step reads it to write the first output word.",
    "<bos> text": "<bos> ('beginning of sequence') starts the text: under the causal mask the first word can attend "
    "only to itself and to <bos>, so <bos> gives every position somewhere to put weight it does not need.",
}


def notes(
    tokens: Sequence[str],
    word_piece: bool,
    vocab_size: int,
    decoder_marks: tuple[str, str] | None = None,
    word_start: str = "",
) -> list[str]:
    """What this tokenizer's special tokens and marks are for, only those it has: `word_piece` (pieces marked '##'),
    a byte-level BPE whose word-start mark is `word_start` ('Ġ'), or a fixed word list of `vocab_size` entries;
    `decoder_marks`: an encoder-decoder's (start, end) tokens."""
    found = set(tokens)
    lines = [SPECIAL_NOTES[t] for t in ("[CLS]", "[SEP]", "<eos>") if t in found]
    if decoder_marks is None and "<bos>" in found:  # a decoder-only model's text starts with it
        lines.append(SPECIAL_NOTES["<bos> text"])
    if decoder_marks is not None:
        start, end = decoder_marks
        if start == "<bos>":
            lines.append(SPECIAL_NOTES["<bos>"])
        else:
            lines.append(f"The decoder starts its input with {start} and stops when it writes {end}.")
    if word_piece:
        lines.append(
            f"{CONTINUES} starts a piece that continues the word before it: the vocabulary ({vocab_size:,} entries) "
            "holds common words whole and spells rarer ones from pieces; a split word's first piece has no "
            f"{CONTINUES}."
        )
        if UNKNOWN in found:
            lines.append(
                f"{UNKNOWN} stands for a word even the pieces cannot spell (an emoji, a rare script): the model "
                "reads the same token for all of them."
            )
    elif word_start:
        lines.append(
            f"{word_start} stands for the space before a word: this tokenizer writes the space as part "
            f"of the word's first token. Its {vocab_size:,} entries hold common words whole and spell anything else "
            "from pieces, down to single bytes, so no text is refused and no token is unknown; "
            + (
                "<s> is put before the text as its start marker (the Llama tokenizer adds it)."
                if tokens and tokens[0] == "<s>"
                else "no marker tokens are added around the text."
            )
        )
        lines.append(
            f"Every page shows a token as text: {SPACE_MARK} for that space ({word_start}capital is shown "
            f"{SPACE_MARK}capital), {NEWLINE_MARK} for a line break, the bytes decoded into their characters, and "
            "<0xE2> for a byte that is only part of a character (a character can be split over two tokens). The "
            f"table's column '{SPELT}' keeps each token as the tokenizer writes it."
        )
    else:
        lines.append(
            f"This model's tokenizer is a fixed list of {vocab_size:,} entries (whole words and its special tokens): "
            "every word is one token (lower-cased), and a word outside the list is refused, never split into pieces."
        )
    return lines
