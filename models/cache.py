"""The dequantized cache: a GGUF file, once read, is kept as a model folder of float32 weights (config.json,
model.safetensors, tokenizer.json) so that a new process reads that folder instead (seconds faster). It lives in
$EXPLORER_CACHE, else ~/.cache/attention-explorer; it only saves time, so deleting it (clear(), or the folder itself)
is always safe. It stays under $EXPLORER_CACHE_MAX_GB (DEFAULT_MAX_GB): before a new folder is written, the folders
used least recently go until it fits, and a model bigger than the whole bound is not kept at all."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

CACHE_ENV = "EXPLORER_CACHE"
MAX_GB_ENV = "EXPLORER_CACHE_MAX_GB"
DEFAULT_MAX_GB = 4.0  # SmolLM2-135M dequantized is 0.54 GB; a 1B model in float32 is about 4 GB
CACHE_FORMAT = 2  # bump whenever what models.gguf reads changes: cache folders written before are then not read
# a folder this cache wrote: the file's name, "-", 16 hex digits of its hash; a half-written one starts with "."
ENTRY = re.compile(r"[^.].*-[0-9a-f]{16}")
PARTIAL = re.compile(r"\..+-[0-9a-f]{16}\..+")
STALE_PARTIAL_S = 3600  # a half-written folder older than this was left by a process that died while writing


def root() -> Path:
    """Where dequantized weights are kept between processes: $EXPLORER_CACHE, else ~/.cache/attention-explorer."""
    return Path(os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "attention-explorer"))


def max_bytes(environ: Mapping[str, str] = os.environ) -> int:
    """The bound on the cache's size, from $EXPLORER_CACHE_MAX_GB (gigabytes; 0 keeps nothing); DEFAULT_MAX_GB when
    it is unset or not a number from 0 up (a wrong setting must not stop a model from loading)."""
    try:
        gb = float(environ.get(MAX_GB_ENV, DEFAULT_MAX_GB))
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int((gb if gb >= 0 else DEFAULT_MAX_GB) * 1e9)


def key(path: Path) -> str:
    """Changes whenever the file's content does (a hash of all of it: 0.1 s for SmolLM2's 98 MB), or the format."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
    digest.update(f"format {CACHE_FORMAT}".encode())
    return digest.hexdigest()[:16]


def folder_for(path: Path) -> Path:
    """The cache folder of a GGUF file: named by its file name and a hash of its content."""
    return root() / f"{path.stem}-{key(path)}"


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def entries(cache: Path | None = None) -> list[Path]:
    """The folders this cache wrote (and half-written ones a dead process left), least recently used first; nothing
    else in the folder is ever counted or removed."""
    cache = root() if cache is None else cache
    try:
        found = [p for p in cache.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    now = time.time()
    ours = [
        p
        for p in found
        if (ENTRY.fullmatch(p.name) and (p / "model.safetensors").is_file())
        or (PARTIAL.fullmatch(p.name) and now - p.stat().st_mtime > STALE_PARTIAL_S)
    ]
    return sorted(ours, key=lambda p: p.stat().st_mtime)


def used(folder: Path) -> None:
    """Mark a cache folder as just used (least-recently-used order is the folders' modification times)."""
    with contextlib.suppress(OSError):  # a cache folder another process just removed
        os.utime(folder)


def _make_room(cache: Path, needed: int, keep: set[Path]) -> bool:
    """Remove the least recently used folders until `needed` more bytes fit under the bound; False, removing
    nothing, when they never can (the model alone is bigger than the bound)."""
    bound = max_bytes()
    if needed > bound:
        return False
    sized = [(p, _size(p)) for p in entries(cache) if p not in keep]
    total = sum(size for _, size in sized)
    for folder, size in sized:
        if total + needed <= bound:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
    return True


def write(folder: Path, config: dict, state: dict[str, Tensor], tokenizer) -> bool:
    """Write what a GGUF file held as a model folder (config.json, model.safetensors, tokenizer.json), all at once:
    into a new folder that is renamed into place, so no reader sees half of it; before the rename, the least recently
    used folders go until it fits under the bound. False, and nothing left behind, when it cannot be written or is
    bigger than the bound: the cache only saves time. The same file's older versions (another content, another
    format) are read no more and go."""
    from safetensors.torch import save_file

    folder = Path(folder)
    stem, _, _ = folder.name.rpartition("-")
    same_file = re.compile(re.escape(stem) + "-[0-9a-f]{16}")
    for old in entries(folder.parent):
        if old != folder and same_file.fullmatch(old.name):
            shutil.rmtree(old, ignore_errors=True)
    partial = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        (partial / "config.json").write_text(json.dumps(config, indent=1))
        save_file({k: v.contiguous() for k, v in state.items()}, str(partial / "model.safetensors"))
        tokenizer.save(partial / "tokenizer.json")
        if not _make_room(folder.parent, _size(partial), {folder, partial}):
            shutil.rmtree(partial, ignore_errors=True)
            return False
        shutil.rmtree(folder, ignore_errors=True)  # one that could not be read (the caller read the file instead)
        partial.rename(folder)
    except Exception:  # noqa: BLE001 -- a full disk raises OSError, SafetensorError or tokenizers' bare Exception
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        return False
    return True


def clear() -> int:
    """Remove every folder this cache wrote (always safe: a model is read from its file again); the bytes freed."""
    freed = 0
    for folder in entries():
        freed += _size(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return freed
