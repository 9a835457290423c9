"""How long a model's load will take, said before it starts, and how far it has got while it runs.

A GGUF file's first load is the slow one: a package that ships its file in chunks joins them into one file (once per
machine), the file is read (its metadata and vocabulary), dequantized to float32 and built into the engine, and that
float32 copy is written to the dequantized cache (models.cache); a later load reads the copy. The estimate comes from
the file's size and, for a SentencePiece vocabulary (Gemma's merges are rebuilt from its 262,144 tokens), the
vocabulary's size, read from the file's header alone. The loaders say how far they have got through `tell`; a caller
that shows it wraps the load in `telling(callback)`; nobody listening, `tell` does nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Measured on a 2-core machine (issue 51): SmolLM2's first load about 6 s and 2 s from the cache; Gemma 3 270M's chunks
# joined in about 32 s, its first read about 70 s, 17 s from the cache. The weights' share is counted from the file's
# size (at most size * 8 / 4.5 weights: models.footprint.GGUF_BITS), a SentencePiece vocabulary's from its tokens.
JOIN_BYTES_PER_SECOND = 8e6
READ_SECONDS_PER_WEIGHT = 3.4e-8
READ_SECONDS_PER_SENTENCEPIECE_TOKEN = 2.1e-4
CACHED_SECONDS_PER_WEIGHT = 1.1e-8
CACHED_SECONDS_PER_SENTENCEPIECE_TOKEN = 4.5e-5
GGUF_BITS = 4.5
# how far a first read has got after each of its parts (measured on Gemma 3 270M: its metadata and vocabulary read 45%,
# the dequantizing 20%, building the model 22%, writing the cache 13%): what the loaders `tell`
READ_SHARES = {"described": 0.45, "dequantized": 0.2, "built": 0.22}
SAY_AFTER_SECONDS = 5.0  # a load estimated shorter than this is a spinner, as any other model's

STEP_WORDS = {
    "join": "joining its package's chunks into one GGUF file",
    "read": "reading the file, dequantizing its weights to float32 and writing that copy to the cache",
    "cached": "reading its float32 copy from the cache",
}


@dataclass(frozen=True)
class Step:
    """One step of a load: its name (a key of STEP_WORDS) and its estimate."""

    name: str
    seconds: float

    @property
    def what(self) -> str:
        return STEP_WORDS[self.name]


@dataclass(frozen=True)
class Plan:
    """A load's steps in order, whether it is a first load (it writes what later loads read), and what a later load
    takes."""

    steps: tuple[Step, ...]
    first: bool
    later_seconds: float

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)

    @property
    def worth_saying(self) -> bool:
        return self.seconds >= SAY_AFTER_SECONDS

    def line(self, title: str) -> str:
        """The sentence a wait shows: the whole estimate, each step's, and what later loads take."""
        parts = ", then ".join(f"{step.what} (about {about(step.seconds)})" for step in self.steps)
        if not self.first:
            return f"Loading {title} takes about {about(self.seconds)}: {parts} (an estimate)."
        return (
            f"Loading {title} for the first time on this machine takes about {about(self.seconds)} (an estimate): "
            f"{parts}. Later loads read the cached copy, about {about(self.later_seconds)}."
        )

    def fraction(self, step: str, done: float) -> float:
        """How far the whole load is (0 to 1) when `step` is `done` (0 to 1) through, by the steps' estimates."""
        total, before = self.seconds or 1.0, 0.0
        for found in self.steps:
            if found.name == step:
                return min(1.0, (before + found.seconds * min(max(done, 0.0), 1.0)) / total)
            before += found.seconds
        return min(1.0, before / total)


def about(seconds: float) -> str:
    """'about 40 s', '1 min 40 s', as a wait says it (rounded to 10 s past a minute)."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    rounded = round(seconds / 10) * 10
    minutes, rest = divmod(rounded, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def _header_facts(path: Path) -> int:
    """A SentencePiece vocabulary's tokens (0 for byte-level BPE), from the header read up to them (models.gguf_header:
    with bounds; the first chunk of a package holds the whole header)."""
    from attention_explorer.models.gguf_header import header

    found = header(path, until="tokenizer.ggml.tokens")
    model, tokens = found.get("tokenizer.ggml.model"), found.get("tokenizer.ggml.tokens")
    if model is None or model.value != "llama" or tokens is None:
        return 0
    return int(tokens.value) if isinstance(tokens.value, int) else len(tokens.value)


def for_file(path: Path, join_from: tuple[Path, ...] = ()) -> Plan:
    """The plan of loading the GGUF file at `path`; `join_from`: the chunks it is first joined from (not yet there)."""
    from attention_explorer.models import cache

    joining = bool(join_from) and not path.is_file()
    size = sum(p.stat().st_size for p in join_from) if joining else path.stat().st_size
    weights = size * 8 / GGUF_BITS
    tokens = _header_facts(join_from[0] if joining else path)
    read = READ_SECONDS_PER_WEIGHT * weights + READ_SECONDS_PER_SENTENCEPIECE_TOKEN * tokens
    cached = CACHED_SECONDS_PER_WEIGHT * weights + CACHED_SECONDS_PER_SENTENCEPIECE_TOKEN * tokens
    if not joining and (cache.folder_for(path) / "model.safetensors").is_file():
        return Plan((Step("cached", cached),), False, cached)
    steps = (Step("join", size / JOIN_BYTES_PER_SECOND),) if joining else ()
    return Plan((*steps, Step("read", read)), True, cached)


def for_package(package: str) -> Plan | None:
    """The plan of loading the GGUF an installed package holds, or joins from its chunks (models.gguf.package_gguf);
    None where that cannot be told (the load itself says what is wrong)."""
    from attention_explorer.models.gguf import GGUFError, package_file

    try:
        return for_file(package_file(package))
    except GGUFError:
        pass
    try:
        if importlib.util.find_spec(package) is None:
            return None
        module = importlib.import_module(package)
        return for_file(Path(module.default_output_path()), tuple(Path(p) for p in module.chunk_paths()))
    except (AttributeError, ImportError, OSError, ValueError):
        return None


_TOLD: contextvars.ContextVar[Callable[[str, float], None] | None] = contextvars.ContextVar("load_told", default=None)


@contextlib.contextmanager
def telling(callback: Callable[[str, float], None]) -> Iterator[None]:
    """Within the block, every `tell(step, done)` of a load in this thread calls callback(step, done)."""
    token = _TOLD.set(callback)
    try:
        yield
    finally:
        _TOLD.reset(token)


def tell(step: str, done: float) -> None:
    """A loader's word on how far it has got: `step` (a key of STEP_WORDS) is `done` (0 to 1) through."""
    callback = _TOLD.get()
    if callback is not None:
        callback(step, done)


def for_spec(spec) -> Plan | None:
    """The plan of loading a catalogue entry (models.registry.ModelSpec): a GGUF package's, or a .gguf path's; None
    for the others (a folder, random or trained weights load in seconds at most)."""
    if spec.weights == "gguf":
        return for_package(spec.source)
    source = Path(spec.source or "").expanduser() if spec.weights == "folder" else None
    if source is not None and source.suffix.lower() == ".gguf" and source.is_file():
        try:
            return for_file(source)
        except (OSError, ValueError):
            return None
    return None
