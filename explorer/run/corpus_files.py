"""Corpora as people keep them, named on the command line or in a notebook: a .txt (one text a line), a .csv (a text
column), a .jsonl (one JSON object a line, its text in a field) or a .parquet file (a text column, read a row group's
batch at a time, never whole into memory), or a glob of many such files (`corpus/*.parquet`, `**/*.jsonl`), read in
the order of their sorted names. Each problem one CorpusError line; at most corpus_input.MAX_TEXTS texts in all, the
reading stopped as soon as that is passed. No streamlit, no torch."""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator
from pathlib import Path

from attention_explorer.explorer.run.corpus_input import MAX_TEXTS, TEXT_COLUMN, Corpus, CorpusError, from_file

SUFFIXES = (".txt", ".csv", ".jsonl", ".parquet")
PARQUET_ROWS = 8192  # rows of a .parquet file's text column read at a time


def read(where: str | Path, field: str = TEXT_COLUMN) -> Corpus:
    """The texts of the file at `where`, or of every file a glob pattern matches; `field`: the .csv column, .jsonl
    field or .parquet column that holds them (default 'text')."""
    paths = files(where)
    kept: list[tuple[int, str]] = []
    for path in paths:
        for line, text in _texts(path, field):
            if len(kept) == MAX_TEXTS:
                raise CorpusError(f"{where} has more than {MAX_TEXTS:,} texts; a corpus may have at most {MAX_TEXTS:,}")
            kept.append((line, text))
    if not kept:
        raise CorpusError(f"{where} has no texts (every line is blank)")
    source = paths[0].name if len(paths) == 1 else f"{len(paths)} files matching {where}"
    return Corpus(tuple(t for _, t in kept), tuple(n for n, _ in kept), source)


def files(where: str | Path) -> list[Path]:
    """The file a path names, or the files a glob matches (sorted); CorpusError when there are none or one is of a
    kind no corpus is read from."""
    path = Path(where).expanduser()
    if path.exists() or not glob.has_magic(str(where)):
        found = [path]
    else:
        found = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not found:
            raise CorpusError(f"no files match {where}")
    for p in found:
        if not p.is_file():
            raise CorpusError(f"{p}: no such file" if not p.exists() else f"{p}: is not a file")
        if p.suffix.lower() not in SUFFIXES:
            raise CorpusError(f"{p.name}: a corpus is a {', '.join(SUFFIXES)} file, not {p.suffix or 'no suffix'}")
    return found


def _texts(path: Path, field: str) -> Iterator[tuple[int, str]]:
    """(line or row from 1, text) of one file, blank texts left out."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _jsonl(path, field)
    elif suffix == ".parquet":
        yield from _parquet(path, field)
    else:  # .txt and .csv as the app reads them (their size checked before they are read)
        corpus = from_file(path, field)
        yield from zip(corpus.lines, corpus.texts, strict=True)


def _jsonl(path: Path, field: str) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8-sig") as stream:
            for n, line in enumerate(stream, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CorpusError(f"{path.name} line {n} is not JSON ({e.msg})") from None
                if not isinstance(row, dict) or field not in row:
                    found = ", ".join(map(repr, row)) if isinstance(row, dict) else f"a {type(row).__name__}"
                    raise CorpusError(f"{path.name} line {n} has no {field!r} field (it holds {found or 'none'})")
                text = row[field]
                if text is None:
                    continue
                if not isinstance(text, str):
                    raise CorpusError(f"{path.name} line {n}: {field!r} is {type(text).__name__}, not a text")
                if text.strip():
                    yield n, text
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path.name} is not UTF-8 text (byte {e.start} cannot be read)") from None
    except OSError as e:
        raise CorpusError(f"{path}: cannot be read ({e.strerror})") from None


def _parquet(path: Path, field: str) -> Iterator[tuple[int, str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise CorpusError(f"{path.name} is not a readable .parquet file ({e})") from None
    names = table.schema_arrow.names
    if field not in names:
        raise CorpusError(f"{path.name} has no {field!r} column (its columns: {', '.join(map(repr, names)) or 'none'})")
    kind = table.schema_arrow.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise CorpusError(f"{path.name}: the {field!r} column holds {kind}, not text")
    row = 0
    try:
        for batch in table.iter_batches(batch_size=PARQUET_ROWS, columns=[field]):  # one column, a batch at a time
            for text in batch.column(0).to_pylist():
                row += 1
                if text is not None and text.strip():
                    yield row, text
    except pa.ArrowException as e:
        raise CorpusError(f"{path.name} could not be read past row {row} ({e})") from None
