"""What loading a model asks of memory, from its files' sizes alone (nothing is read but config.json): its parameters
x 4 bytes (the engine holds float32), plus the conversion's peak, so the app's admission gate can admit a load, and
leave out a model whose load could not fit the server's budget, before a byte of it is read.

Measured on this machine (resident memory sampled every 5 ms during registry.load, in a new process): MiniLM 108 MB
at its peak (90 MB of float32 weights), SmolLM2 from its GGUF file 1,395 MB with the dequantized cache empty (697 MB
from the cache), paper-random 390 MB (239 MB of weights), the toy translator 13 MB. The estimate (`load_bytes`) is
above each: 521 MB (MiniLM's config names no dtype, so its file is read as float16: twice its weights), 1,564, 545
and 73 MB."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from attention_explorer.models import train
from attention_explorer.models.config import PAPER_BASE
from attention_explorer.models.gguf import package_file
from attention_explorer.models.pretrained import minilm_folder, read_config, weight_files
from attention_explorer.models.transformer import Transformer

FLOAT = 4  # bytes of a float32 weight: every model is converted to float32
# A GGUF file's weights are quantized: Q4_0, the smallest kind the engine reads, stores 4.5 bits a weight (a float16
# scale per 32), so a file holds at most size x 8 / 4.5 weights (SmolLM2's 98 MB: 175M, for its 135M)
GGUF_BITS = 4.5
STORED_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}  # config.json's torch_dtype
SMALLEST_STORED = 2  # a folder whose config does not say: float16 or bfloat16, the most weights its files can hold
# Beyond the weights: the tokenizer, the descriptor, Python's objects (the toy translator's load: 13 MB for 2 MB)
OVERHEAD = 64 * 2**20
LOAD_BYTES_PER_SECOND = 200e6  # about how fast a load goes on two cores (SmolLM2's 1.4 GB peak: about 7 s)


@dataclass(frozen=True)
class Footprint:
    """A load's estimate: the weights' count, the files read, and the memory the load adds at its peak."""

    parameters: int
    file_bytes: int

    @property
    def held_bytes(self) -> int:
        """What the loaded model holds: its float32 weights."""
        return self.parameters * FLOAT

    @property
    def load_bytes(self) -> int:
        """At the load's peak: the float32 state dict the conversion builds beside the model's own weights (two
        copies), the files as read, and the rest (OVERHEAD)."""
        return 2 * self.held_bytes + self.file_bytes + OVERHEAD

    @property
    def seconds(self) -> float:
        return self.load_bytes / LOAD_BYTES_PER_SECOND


def _sizes(paths) -> int:
    return sum(Path(p).stat().st_size for p in paths)


def of_gguf(path: Path) -> Footprint:
    size = path.stat().st_size
    return Footprint(int(size * 8 / GGUF_BITS), size)


def of_folder(folder: Path) -> Footprint:
    """A model folder: its weight files' sizes, read as the dtype its config.json names."""
    size = _sizes(weight_files(folder))
    try:
        dtype = json.loads((folder / "config.json").read_text()).get("torch_dtype")
    except (OSError, ValueError, AttributeError):
        dtype = None
    stored = STORED_BYTES.get(dtype, SMALLEST_STORED) if isinstance(dtype, str) else SMALLEST_STORED
    return Footprint(size // stored, size)


def of_path(path: str | Path) -> Footprint:
    path = Path(path).expanduser()
    return of_gguf(path) if path.suffix.lower() == ".gguf" else of_folder(path)


def of_random(source: str) -> Footprint:
    """Random weights: counted on torch's meta device (nothing allocated), in the shape registry.build gives them."""
    config = read_config(minilm_folder())
    if source == "paper":
        config = replace(PAPER_BASE, vocab_size=config.vocab_size)
    with torch.device("meta"):
        model = Transformer(config)
    return Footprint(sum(p.numel() for p in model.parameters()), 0)


def of_spec(spec) -> Footprint:
    """A catalogue entry's (registry.ModelSpec) load. OSError, ModelFolderError or GGUFError where its files cannot
    be found: the load itself would fail the same way."""
    if spec.weights == "gguf":
        return of_gguf(package_file(spec.source))
    if spec.weights == "folder":
        return of_path(spec.source) if spec.source else of_folder(minilm_folder())
    if spec.weights == "random":
        return of_random(spec.source)
    weights, meta = train.checkpoint_paths(spec.source)
    return Footprint(weights.stat().st_size // FLOAT, _sizes((weights, meta)))


def too_big(specs, budget: int) -> dict[str, Footprint]:
    """Of the catalogue entries (key -> registry.ModelSpec), those whose load could not fit `budget` bytes even with
    nothing else in memory: not offered to visitors. An entry whose files cannot be found is not among them (its load
    says what is wrong)."""
    found = {}
    for key, spec in specs.items():
        try:
            estimate = of_spec(spec)
        except (OSError, ValueError):
            continue
        if estimate.load_bytes > budget:
            found[key] = estimate
    return found


def gigabytes(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


def left_out_line(found: dict[str, Footprint], budget: int) -> str:
    """One line for whoever started the server: which models are not offered, and why."""
    each = ", ".join(f"{key} (its load needs about {gigabytes(f.load_bytes)})" for key, f in found.items())
    return (
        f"{len(found)} model{'s' if len(found) > 1 else ''} not offered to visitors: {each}; more than this "
        f"server's memory budget, {gigabytes(budget)} (serve --memory-budget)"
    )
