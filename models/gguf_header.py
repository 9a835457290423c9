"""GGUF's header read from the file's bytes with bounds: every count and length checked against what is left of the
file before it is used, so a malformed or hostile file is one GGUFError naming the file and the field, at once (a
count of 2**62 fields in a 24-byte file, an array of 2**60 items, a key 2**40 bytes long). models.gguf reads a file
through it before `gguf`'s own GGUFReader (which loops over counts as they are stored, reading zeros past the end)
or transformers' GGUF loader sees it."""

from __future__ import annotations

import math
import mmap
import os
import struct
from pathlib import Path
from typing import NamedTuple


class GGUFError(ValueError):
    """A GGUF file that cannot be read or describes a model the engine does not run."""


class Field(NamedTuple):
    """One metadata value as stored: its type, an array's item type (None for a scalar), and the value (a fixed-size
    array as its length: gguf's reader gives the items)."""

    kind: int
    inner: int | None
    value: object


# the sizes of GGUF's fixed-size metadata value types (uint8 .. float64, bool), by type code; 8 is a string, 9 an array
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, BOOL = 8, 9, 7
INTS = {0, 1, 2, 3, 4, 5, 10, 11}  # the integer types (bool, 7, is not a number here)
NUMBERS = INTS | {6, 12}
MAX_DIMS = 4  # GGML_MAX_DIMS: llama.cpp's tensors have at most four dimensions
MAX_NESTING = 8  # arrays of arrays of ...: llama.cpp writes none nested deeper than one


class _Header:
    """GGUF's header read from the file's bytes with every count and length checked against what is left of the file
    before it is used (a count of 2**62 fields in a 24-byte file is an error at once, not a loop over zeros): the
    metadata's keys in order with their types, then the tensor table, each tensor's data inside the file. One
    GGUFError names the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "rb")  # noqa: SIM115 -- closed by close(), after a walk that may stop early
        self.size = os.fstat(self.file.fileno()).st_size
        self.data = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        self.at = 0

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        self.file.close()

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"cannot read {self.path} as GGUF: {what}")

    def take(self, n: int, what: str) -> bytes:
        if n > self.size - self.at:
            raise self.fail(f"{what} needs {n} bytes at offset {self.at}, past the file's end ({self.size} bytes)")
        self.at += n
        return self.data[self.at - n : self.at]

    def number(self, size: int, what: str) -> int:
        return int.from_bytes(self.take(size, what), "little")

    def count(self, what: str, least: int) -> int:
        """A count whose items take at least `least` bytes each: no more of them than the rest of the file holds."""
        found = self.number(8, what)
        if found * least > self.size - self.at:
            raise self.fail(f"{what} is {found}, more than the {self.size - self.at} bytes left could hold")
        return found

    def string(self, what: str) -> str:
        raw = self.take(self.count(f"the length of {what}", 1), what)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def start(self) -> tuple[int, int]:
        """The magic and version; (the tensor count, the metadata count)."""
        magic, version = self.take(4, "the magic"), self.number(4, "the version")
        if magic != b"GGUF" or version not in (2, 3):
            raise self.fail(f"not a GGUF file of version 2 or 3 (magic {magic!r}, version {version})")
        tensors = self.count("the tensor count", 8 + 4 + 4 + 8)  # a name's length, dims, type, offset
        return tensors, self.count("the metadata count", 8 + 4)  # a key's length and its value's type

    def value(self, kind: int, what: str, depth: int = 0) -> object:
        """One metadata value of type `kind` (strings decoded; a fixed-size array skipped, its length returned)."""
        if kind == STRING:
            return self.string(what)
        if kind in _SIZES:
            raw = self.take(_SIZES[kind], what)
            if kind in (6, 12):
                return struct.unpack("<f" if kind == 6 else "<d", raw)[0]
            return int.from_bytes(raw, "little", signed=kind in (1, 3, 5, 11))
        if kind != ARRAY:
            raise self.fail(f"{what} has the unknown value type {kind}")
        if depth >= MAX_NESTING:
            raise self.fail(f"{what} nests arrays more than {MAX_NESTING} deep")
        inner = self.number(4, f"the type of {what}'s items")
        if inner not in _SIZES and inner not in (STRING, ARRAY):
            raise self.fail(f"{what} is an array of the unknown value type {inner}")
        length = self.count(f"the length of {what}", _SIZES.get(inner, 8 if inner == STRING else 12))
        if inner in _SIZES:
            self.take(_SIZES[inner] * length, what)
            return length
        for i in range(length):
            self.value(inner, f"{what}[{i}]", depth + 1)
        return length

    def metadata(self, count: int, until: str | None = None) -> dict[str, Field]:
        """Every metadata key with its type (an array's item type too) and value, up to the key `until` if given."""
        found: dict[str, Field] = {}
        for i in range(count):
            key = self.string(f"metadata key #{i}")
            if key in found:
                raise self.fail(f"the metadata key {key!r} appears twice")
            kind = self.number(4, f"the type of {key}")
            inner = int.from_bytes(self.data[self.at : self.at + 4], "little") if kind == ARRAY else None
            found[key] = Field(kind, inner, self.value(kind, key))
            if key == until:
                break
        return found

    def tensors(self, count: int, alignment: int) -> None:
        """The tensor table: each name once, at most MAX_DIMS dimensions, a storage type gguf knows, and its bytes
        inside the file after the header (aligned)."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        table, names = [], set()
        for i in range(count):
            name = self.string(f"tensor #{i}'s name")
            if name in names:
                raise self.fail(f"the tensor {name!r} appears twice")
            names.add(name)
            dims = self.number(4, f"{name}'s number of dimensions")
            if dims > MAX_DIMS:
                raise self.fail(f"{name} has {dims} dimensions, more than GGUF's {MAX_DIMS}")
            shape = [self.number(8, f"{name}'s dimension {d}") for d in range(dims)]
            code = self.number(4, f"{name}'s storage type")
            try:
                block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(code)]
            except (ValueError, KeyError):
                raise self.fail(f"{name} has the unknown storage type {code}") from None
            elements = math.prod(shape)
            if shape and shape[0] % block:
                raise self.fail(f"{name}'s first dimension {shape[0]} is not a multiple of its blocks of {block}")
            table.append((name, self.number(8, f"{name}'s offset"), elements // block * block_bytes))
        start = -(-self.at // alignment) * alignment
        for name, offset, size in table:
            if start + offset + size > self.size:
                raise self.fail(f"{name}'s {size} bytes at offset {offset} run past the file's end ({self.size} bytes)")


def header(path: Path, until: str | None = None) -> dict[str, Field]:
    """The metadata of a GGUF file read with bounds (_Header): every key with its type and value (fixed-size arrays
    as their length); up to `until` only if given, else the whole header, the tensor table checked too."""
    try:
        header = _Header(path)
    except OSError as e:
        raise GGUFError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        tensors, count = header.start()
        found = header.metadata(count, until)
        if until is None:
            kind, _, alignment = found.get("general.alignment", Field(4, None, 32))
            if kind != 4 or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
                raise header.fail(f"general.alignment {alignment!r} is not a power of two stored as uint32")
            header.tensors(tensors, alignment)
        return found
    finally:
        header.close()


def architecture(path: str | Path) -> str:
    """The architecture the file's metadata names ("llama"), read with bounds from the metadata in order up to that
    key (llama.cpp writes it first): GGUFReader parses every field, SmolLM2's 49,152-token vocabulary included (1-5 s).
    """
    path = Path(path)
    found = header(path, until="general.architecture")
    if "general.architecture" not in found:
        raise GGUFError(f"cannot read {path} as GGUF: it lacks general.architecture")
    kind, _, value = found["general.architecture"]
    if kind != STRING:
        raise GGUFError(f"cannot read {path} as GGUF: general.architecture is not a string")
    return value
