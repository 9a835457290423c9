"""Tokenizers: WordPiece for the BERT family (via the `tokenizers` library), with offsets back to the text."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer


class TokenizeError(ValueError):
    """Text that cannot be tokenized for this model (empty, whitespace only, or a bad limit)."""


@dataclass(frozen=True)
class Encoding:
    """Token ids with the tokens as the tokenizer spells them and where each came from in the text."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]  # (start, end) character span in the text; (0, 0) for specials
    word_ids: tuple[int | None, ...]  # which word each token belongs to; None for specials
    truncated: int = 0  # how many tokens were cut to fit max_tokens

    def __len__(self) -> int:
        return len(self.ids)


# the marks a readable token shows for what a tokenizer folds into its tokens: the same on every page
SPACE_MARK = "\u2423"  # ␣ (open box): the space a token carries before its word; no text types it
NEWLINE_MARK = "\u21b5"  # ↵: a line break
TAB_MARK = "\u21e5"  # ⇥: a tab
# how a vocabulary spells the space a token carries before its word: byte-level BPE's 'Ġ', SentencePiece's '▁'; and
# with the pages' readable mark, every way a token can be written with it
VOCABULARY_SPACE_MARKS = ("\u0120", "\u2581")
WORD_START_MARKS = (*VOCABULARY_SPACE_MARKS, SPACE_MARK)
_WHITESPACE = {" ": SPACE_MARK, "\n": NEWLINE_MARK, "\t": TAB_MARK}
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback: "<0x0A>" is a line break


@functools.cache
def _gpt2_bytes() -> dict[str, int]:
    """GPT-2's byte-to-unicode table reversed (Radford et al. 2019, encoder.py's bytes_to_unicode): printable Latin-1
    bytes stand for themselves, the other 68 (space, control characters, ...) for U+0100 onwards ('Ġ' is the space)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    table, moved = {chr(b): b for b in kept}, 0
    for b in range(256):
        if b not in kept:
            table[chr(256 + moved)] = b
            moved += 1
    return table


def _byte(b: int) -> str:
    """A byte that is no whole character on its own (part of a multi-byte character, or a control character)."""
    return f"<0x{b:02X}>"


def _decoded(data: bytes) -> str:
    """UTF-8 bytes as text; a byte that does not make a whole character here (a token may hold part of one) as
    <0xE2>, as SentencePiece's byte tokens are spelt."""
    out, start = [], 0
    while start < len(data):
        try:
            out.append(data[start:].decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            out.append(data[start : start + e.start].decode("utf-8"))
            out.extend(_byte(b) for b in data[start + e.start : start + e.end])
            start += e.end
    return "".join(out)


def _marked(text: str) -> str:
    """Spaces, line breaks and tabs as visible marks; other control characters as their byte."""
    return "".join(_WHITESPACE.get(c) or (_byte(ord(c)) if c < " " or c == "\x7f" else c) for c in text)


@dataclass(frozen=True)
class Spelling:
    """How a tokenizer spells its tokens (models.families.descriptor's marks), and each token as text a class can read:
    byte-level BPE ('Ġ') decoded from GPT-2's byte alphabet, SentencePiece's '▁' as the space it stands for, a space
    and a line break shown as SPACE_MARK and NEWLINE_MARK; WordPiece (its '##' kept) and marker tokens as written."""

    word_start: str = ""  # "Ġ" (byte-level BPE), "▁" (SentencePiece) or "" (WordPiece, a toy's word list)
    specials: tuple[str, ...] = ()

    @property
    def marks(self) -> bool:
        """Whether readable tokens show SPACE_MARK and NEWLINE_MARK (tokens that carry their spaces)."""
        return self.word_start in ("Ġ", "▁")

    @functools.cached_property
    def _marker_tokens(self) -> frozenset[str]:
        """The specials as a set: a vocabulary may hold thousands (6,249 in one with its <unused...> tokens), and the
        tuple's `in` read them all for every token (0.14 s for 2,048 labels)."""
        return frozenset(self.specials)

    def readable(self, token: str) -> str:
        """'Ġcapital' -> '␣capital', 'Ċ' -> '↵', 'ĠâĢĵ' -> '␣–', 'âĢ' (part of '–') -> '<0xE2><0x80>'; '▁the' ->
        '␣the', '<0x0A>' -> '↵'; a marker token ('<|endoftext|>', '[CLS]') and a WordPiece token unchanged."""
        if not self.marks or token in self._marker_tokens:
            return token
        if self.word_start == "▁":
            byte = _BYTE_TOKEN.fullmatch(token)
            if byte:
                found = int(byte.group(1), 16)
                return _marked(chr(found)) if found < 0x80 else _byte(found)
            return _marked(token.replace("▁", " "))
        table = _gpt2_bytes()
        if not all(c in table for c in token):  # an added token outside the byte alphabet: as written
            return token
        return _marked(_decoded(bytes(table[c] for c in token)))

    def labels(self, tokens: Sequence[str]) -> tuple[str, ...]:
        """Every token readable (Spelling.readable), in order."""
        return tuple(self.readable(t) for t in tokens)

    def legend(self) -> str:
        """The marks readable tokens use, in one line (empty where tokens show none)."""
        if not self.marks:
            return ""
        return (
            f"Tokens as text: {SPACE_MARK} is the space a token carries before its word, {NEWLINE_MARK} a line "
            "break, <0xE2> a byte that is only part of a character (a character split over two tokens)."
        )


class _FileTokenizer:
    """A `tokenizers.Tokenizer` read from a model folder, its padding and truncation off (tokenizer.json files often
    switch them on: MiniLM's pads to 128; we cut by hand); read-only, so one instance serves every thread."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def _read(self, text: str, max_tokens: int, least: int, which: str, unreadable: str, markers: bool = False):
        """The text's tokens without markers (the shared tokenizer's settings untouched), after the checks every
        tokenizer makes: a text to read, `least` tokens allowed (`which` names them), and at least one token."""
        if not isinstance(text, str) or not text.strip():
            raise TokenizeError("the text is empty: type a sentence")
        if max_tokens < least:
            raise TokenizeError(f"max tokens must be at least {least}{which}, not {max_tokens}")
        enc = self._tokenizer.encode(text, add_special_tokens=markers)
        if not enc.ids:
            raise TokenizeError(f"the text has no tokens this model knows{unreadable}")
        return enc

    def token_to_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def save(self, path: Path) -> None:
        """Write the tokenizer as a tokenizer.json file."""
        self._tokenizer.save(str(path))

    def id_to_token(self, token_id: int) -> str:
        token = self._tokenizer.id_to_token(token_id)
        return token if token is not None else f"[{token_id}]"


class WordPieceTokenizer(_FileTokenizer):
    """BERT's WordPiece with [CLS] ... [SEP] around the text."""

    def __init__(self, tokenizer: Tokenizer, cls_token: str = "[CLS]", sep_token: str = "[SEP]") -> None:
        super().__init__(tokenizer)
        ids = {t: tokenizer.token_to_id(t) for t in (cls_token, sep_token, "[PAD]")}
        missing = [t for t, i in ids.items() if i is None]
        if missing:
            raise TokenizeError(f"the vocabulary lacks {', '.join(missing)}")
        self.cls_token, self.sep_token = cls_token, sep_token
        self.cls_id, self.sep_id, self.pad_id = ids[cls_token], ids[sep_token], ids["[PAD]"]

    @classmethod
    def from_folder(cls, folder: Path) -> WordPieceTokenizer:
        """tokenizer.json when present, else vocab.txt with tokenizer_config.json's lower-casing."""
        if (folder / "tokenizer.json").is_file():
            return cls(Tokenizer.from_file(str(folder / "tokenizer.json")))
        if (folder / "vocab.txt").is_file():
            settings_file = folder / "tokenizer_config.json"
            settings = json.loads(settings_file.read_text()) if settings_file.is_file() else {}
            lowercase = bool(settings.get("do_lower_case", True))
            return cls(BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=lowercase)._tokenizer)
        raise FileNotFoundError(f"{folder} has neither tokenizer.json nor vocab.txt")

    def encode(self, text: str, max_tokens: int) -> Encoding:
        """[CLS] text [SEP], cut to max_tokens (specials included) with the number of tokens cut recorded."""
        # specials added by hand so truncation never touches the shared tokenizer's settings
        enc = self._read(text, max_tokens, 3, " ([CLS], one token, [SEP])", " (only control or unknown characters)")
        keep = max_tokens - 2
        cut = max(0, len(enc.ids) - keep)
        return Encoding(
            ids=(self.cls_id, *enc.ids[:keep], self.sep_id),
            tokens=(self.cls_token, *enc.tokens[:keep], self.sep_token),
            offsets=((0, 0), *(tuple(o) for o in enc.offsets[:keep]), (0, 0)),
            word_ids=(None, *enc.word_ids[:keep], None),
            truncated=cut,
        )


class ByteLevelTokenizer(_FileTokenizer):
    """GPT-2's byte-level BPE: no marker tokens around the text, a word's first token starts with 'Ġ' (its space).
    with_markers: the markers the tokenizer's own template adds (a Llama folder's <s>), as transformers adds them."""

    def __init__(self, tokenizer: Tokenizer, with_markers: bool = False) -> None:
        super().__init__(tokenizer)
        self.with_markers = with_markers

    @property
    def specials(self) -> tuple[str, ...]:
        """The tokenizer's own marker tokens (<|endoftext|>, <s>, <|im_start|>, ...)."""
        added = self._tokenizer.get_added_tokens_decoder().values()
        return tuple(token.content for token in added if token.special)

    @classmethod
    def from_vocabulary(
        cls,
        tokens: list[str],
        merges: list[str],
        specials: list[int],
        with_markers: bool = False,
        split: str | None = None,
    ) -> ByteLevelTokenizer:
        """A byte-level BPE from its tokens (id order), merges ("a b", in rank order) and the ids of its marker
        tokens, as a GGUF file stores them; GPT-2's decoder, and its pre-tokenizer unless `split` gives the regex
        that cuts the text into words before the merges (Qwen2's keeps every digit apart)."""
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers

        vocab = {token: i for i, token in enumerate(tokens)}
        pairs = [tuple(merge.split(" ", 1)) for merge in merges]
        built = Tokenizer(models.BPE(vocab, pairs, fuse_unk=False, byte_fallback=False))
        if split is None:
            built.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        else:  # as transformers builds a GGUF file's tokenizer: the regex's words, then bytes spelt as GPT-2 does
            built.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(split), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
        built.decoder = decoders.ByteLevel()
        built.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in specials])
        return cls(built, with_markers)

    @classmethod
    def from_sentencepiece(cls, tokens: list[str], kinds: list[int], bos: int | None) -> ByteLevelTokenizer:
        """Gemma's SentencePiece BPE from a GGUF file's tokens (id order) and token types, as transformers builds the
        same file's (GemmaTokenizer): spaces spelt '▁', bytes outside the vocabulary as <0x..> tokens, the merges
        every token's two known halves imply, ranked by the token's place in the file (the file has no merges);
        control (3) and user-defined (4) tokens kept whole; `bos` put before every text where the file says so."""
        from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, processors

        # a token of two or more spaces is stored as spaces; the merges read it as '▁'s
        tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
        vocab = {token: i for i, token in enumerate(tokens)}
        merges = []
        for rank, token in enumerate(tokens):
            halves = [(token[:i], token[i:]) for i in range(1, len(token))]
            found = [(vocab[a], vocab[b], a, b) for a, b in halves if a in vocab and b in vocab]
            merges.extend((rank, len(a), len(b), a, b) for _, _, a, b in sorted(found))
        # transformers' generate_merges: by score (-rank) then the halves' lengths, best first (a stable sort)
        merges.sort(key=lambda m: (-m[0], m[1], m[2]), reverse=True)
        unknown = next((t for t, k in zip(tokens, kinds, strict=False) if k == 2), tokens[0])
        built = Tokenizer(
            models.BPE(vocab, [(a, b) for *_, a, b in merges], unk_token=unknown, fuse_unk=True, byte_fallback=True)
        )
        built.normalizer = normalizers.Replace(" ", "\u2581")
        built.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
        built.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
        specials = [i for i, kind in enumerate(kinds) if kind == 3]
        user = [i for i, kind in enumerate(kinds) if kind == 4]
        built.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in specials])
        built.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i in user])
        if bos is not None:
            single = f"{tokens[bos]} $A"
            built.post_processor = processors.TemplateProcessing(single=single, special_tokens=[(tokens[bos], bos)])
        return cls(built, with_markers=bos is not None)

    @classmethod
    def from_folder(cls, folder: Path, with_markers: bool = False) -> ByteLevelTokenizer:
        """tokenizer.json when present, else vocab.json + merges.txt."""
        if (folder / "tokenizer.json").is_file():
            return cls(Tokenizer.from_file(str(folder / "tokenizer.json")), with_markers)
        if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            from tokenizers.implementations import ByteLevelBPETokenizer

            built = ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), trim_offsets=False)
            return cls(built._tokenizer)
        raise FileNotFoundError(f"{folder} has neither tokenizer.json nor vocab.json and merges.txt")

    def encode(self, text: str, max_tokens: int) -> Encoding:
        """The text's tokens, cut to max_tokens with the number of tokens cut recorded (no markers added, as
        transformers' GPT-2 tokenizer adds none)."""
        enc = self._read(text, max_tokens, 1, "", "", self.with_markers)
        return Encoding(
            ids=tuple(enc.ids[:max_tokens]),
            tokens=tuple(enc.tokens[:max_tokens]),
            offsets=tuple(tuple(o) for o in enc.offsets[:max_tokens]),
            word_ids=tuple(enc.word_ids[:max_tokens]),
            truncated=max(0, len(enc.ids) - max_tokens),
        )

    def decode(self, ids: list[int] | tuple[int, ...]) -> str:
        """Token ids back to text (the bytes the 'Ġ'-spelt tokens stand for)."""
        return self._tokenizer.decode(list(ids))
