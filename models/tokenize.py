"""Tokenizers: WordPiece for the BERT family (via the `tokenizers` library), with offsets back to the text."""

from __future__ import annotations

import json
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
