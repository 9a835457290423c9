"""A corpus from what a person gives: pasted lines, an uploaded or named .txt (one text a line) or .csv (a text column),
or the app's own sample texts; checked once, each problem one clear message (CorpusError), and then tokenized for a
model: a line past the model's length is cut (counted), a line it cannot read is left out (named), and the rest runs.
No streamlit, no torch."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.tokenize import Encoding, TokenizeError

MAX_BYTES = 10 * 2**20  # a corpus file past 10 MiB is refused before it is read (about 100,000 lines of prose)
MAX_TEXTS = 100_000  # texts a corpus may hold
TEXT_COLUMN = "text"  # the column of a .csv that holds the texts (any case)
_SNIFF = 8192  # bytes looked at for a NUL: a binary file has some near its start


class CorpusError(ValueError):
    """Input that is no corpus (empty, binary, too large, a .csv without a text column): one line that says why."""


@dataclass(frozen=True)
class Corpus:
    """Texts as given, in order, and where each came from (its line of the file or the paste, from 1)."""

    texts: tuple[str, ...]
    lines: tuple[int, ...]
    source: str = "texts"  # the file's name, "pasted lines", "sample texts"

    def __len__(self) -> int:
        return len(self.texts)


def texts(n: int) -> str:
    """'1 text', '1,200 texts': a count of texts as a page says it."""
    return f"{n:,} text" + ("" if n == 1 else "s")


def from_texts(texts: Sequence[str], source: str = "texts") -> Corpus:
    """A list of texts (the API's, the app's samples): blank ones left out; CorpusError when none is left."""
    if isinstance(texts, str):
        raise CorpusError("give a list of texts, not one string (split it into lines first)")
    if any(not isinstance(t, str) for t in texts):
        raise CorpusError(f"{source}: every text must be a string")
    return _corpus([(i + 1, t) for i, t in enumerate(texts) if t.strip()], source)


def from_lines(text: str, source: str = "pasted lines") -> Corpus:
    """One text a line (pasted, or a .txt file's contents); blank lines left out. At most MAX_BYTES characters: the
    paste box's max_chars, held here on the server too (a browser's limit can be bypassed)."""
    if len(text) > MAX_BYTES:
        said = f"{source[:1].upper()}{source[1:]} are {len(text):,} characters long"
        raise CorpusError(f"{said}; a corpus may be at most {MAX_BYTES:,} characters")
    return _corpus([(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()], source)


def from_csv(text: str, source: str = "the .csv file", column: str = TEXT_COLUMN) -> Corpus:
    """The `column` column (any case) of a .csv's rows, its first row the header; blank cells left out."""
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        header = next(rows, None)
        if header is None:
            raise CorpusError(f"{source} is empty")
        names = [h.strip().lower() for h in header]
        if column.lower() not in names:
            found = ", ".join(repr(h) for h in header) or "none"
            raise CorpusError(f"{source} has no {column!r} column (its columns: {found})")
        at = names.index(column.lower())
        # a row's line: the reader's line number once it has read the row (a quoted cell may span lines)
        kept = [(rows.line_num, row[at]) for row in rows if len(row) > at and row[at].strip()]
    except csv.Error as e:
        raise CorpusError(f"{source} is not a readable .csv: {e}") from None
    return _corpus(kept, source)


def from_bytes(data: bytes, name: str, column: str = TEXT_COLUMN) -> Corpus:
    """An uploaded file's contents: .csv by its name (its `column` column), else one text a line; refused when too
    large, binary or not UTF-8."""
    if len(data) > MAX_BYTES:
        raise CorpusError(f"{name} is {_size(len(data))}; a corpus file may be at most {_size(MAX_BYTES)}")
    if b"\0" in data[:_SNIFF]:
        raise CorpusError(f"{name} is not a text file (it holds binary data)")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as spreadsheets write it, is no part of the first text
    except UnicodeDecodeError as e:
        raise CorpusError(f"{name} is not UTF-8 text (byte {e.start} cannot be read)") from None
    return from_csv(text, name, column) if name.lower().endswith(".csv") else from_lines(text, name)


def from_file(path: str | Path, column: str = TEXT_COLUMN) -> Corpus:
    """A .txt (one text a line) or .csv (a 'text' column, or `column`) named on the command line; its size checked
    before it is read."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise CorpusError(f"{path}: no such file" if not path.exists() else f"{path}: is not a file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise CorpusError(f"{path.name} is {_size(size)}; a corpus file may be at most {_size(MAX_BYTES)}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CorpusError(f"{path}: cannot be read ({e.strerror})") from None
    return from_bytes(data, path.name, column)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _corpus(kept: list[tuple[int, str]], source: str) -> Corpus:
    if not kept:
        raise CorpusError(f"{source} has no texts (every line is blank)" if source else "no texts")
    if len(kept) > MAX_TEXTS:
        raise CorpusError(f"{source} has {len(kept):,} texts; a corpus may have at most {MAX_TEXTS:,}")
    return Corpus(tuple(t for _, t in kept), tuple(n for n, _ in kept), source)


@dataclass(frozen=True)
class Prepared:
    """A corpus tokenized for one model: the texts it reads (`index`: their places in the corpus), each cut at
    `max_tokens`, and what was cut or left out."""

    corpus: Corpus
    max_tokens: int
    index: tuple[int, ...]  # corpus positions of the texts that run
    encodings: tuple[Encoding, ...]  # one per text that runs
    left_out: tuple[tuple[int, str], ...] = ()  # (corpus position, why) of the texts the tokenizer could not read

    @property
    def cut(self) -> int:
        """Texts cut to fit max_tokens."""
        return sum(1 for e in self.encodings if e.truncated)

    @property
    def tokens_cut(self) -> int:
        return sum(e.truncated for e in self.encodings)

    def notes(self) -> list[str]:
        """What happened to the input, a line each (none when every text ran whole)."""
        found = []
        if self.cut:
            found.append(
                f"{self.cut:,} of {len(self.corpus):,} texts were cut to {self.max_tokens} tokens "
                f"({self.tokens_cut:,} tokens cut)"
            )
        if self.left_out:
            lines = ", ".join(str(self.corpus.lines[i]) for i, _ in self.left_out[:5])
            more = f" and {len(self.left_out) - 5:,} more" if len(self.left_out) > 5 else ""
            found.append(
                f"{len(self.left_out):,} texts could not be read by this model and were left out "
                f"(line {lines}{more}: {self.left_out[0][1]})"
            )
        return found


def prepare(loaded: LoadedModel, corpus: Corpus, max_tokens: int | None = None) -> Prepared:
    """Tokenize every text for `loaded`, cut at `max_tokens` (default: the model's maximum); CorpusError when the
    limit is out of range or the model can read none of the texts."""
    limit = loaded.max_tokens if max_tokens is None else max_tokens
    if not 3 <= limit <= loaded.max_tokens:
        raise CorpusError(f"max tokens must be between 3 and {loaded.max_tokens} for {loaded.key}, not {limit}")
    index, encodings, left_out = [], [], []
    for i, text in enumerate(corpus.texts):
        try:
            encodings.append(loaded.tokenizer.encode(text, limit))
            index.append(i)
        except TokenizeError as e:
            left_out.append((i, str(e)))
    if not encodings:
        raise CorpusError(f"{loaded.key} can read none of the {len(corpus):,} texts ({left_out[0][1]})")
    return Prepared(corpus, limit, tuple(index), tuple(encodings), tuple(left_out))
