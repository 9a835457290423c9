"""The local Hugging Face cache, read without the hub: where it is, and which of its snapshots hold a whole model of a
family the engine has (models.registry offers those as "hf:org/name"). Nothing is downloaded here."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from attention_explorer.models.pretrained import FAMILIES, ModelFolderError, weight_files

# Models already in the local Hugging Face cache (downloaded earlier by any program; never downloaded here) whose
# config.json names a family the engine has are offered as "hf:org/name"; EXPLORER_HF_CACHE=0 turns this off.
HF_CACHE_ENV = "EXPLORER_HF_CACHE"
TOKENIZER_FILES = (("tokenizer.json",), ("vocab.txt",), ("vocab.json", "merges.txt"))  # any one of these sets
CONFIG_BYTES = 2**20  # a config.json past this is not a model's


def hf_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """The hub cache folder as huggingface_hub.constants.HF_HUB_CACHE finds it, read from `environ`: HF_HUB_CACHE,
    else HF_HOME/hub, else $XDG_CACHE_HOME or $HOME/.cache, then huggingface/hub; None when the environment names
    no home at all."""
    if explicit := environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(explicit).expanduser()
    if home := environ.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    cache = environ.get("XDG_CACHE_HOME") or (str(Path(environ["HOME"]) / ".cache") if environ.get("HOME") else "")
    return Path(cache).expanduser() / "huggingface" / "hub" if cache else None


def usable_snapshot(snapshot: Path) -> bool:
    """Whether a snapshot folder holds a whole model of a family the engine has: config.json naming its model_type,
    its weights (one file, or an index and every shard it names) and a tokenizer (a link into blobs/ whose download
    never finished is not a file)."""
    config = snapshot / "config.json"
    try:
        if not config.is_file() or config.stat().st_size > CONFIG_BYTES:
            return False
        hf = json.loads(config.read_text())
    except (OSError, ValueError):  # unreadable, not UTF-8 (UnicodeDecodeError) or not JSON
        return False
    if not (isinstance(hf, dict) and hf.get("model_type") in FAMILIES):
        return False
    try:
        weight_files(snapshot)
    except ModelFolderError:
        return False
    return any(all((snapshot / name).is_file() for name in names) for names in TOKENIZER_FILES)


def snapshots(repo: Path) -> Iterator[Path]:
    """A cached repo's snapshots, the one refs/main names first, then the most recently written."""
    try:
        main = (repo / "refs" / "main").read_text().strip()
    except (OSError, ValueError):
        main = ""
    found = [p for p in (repo / "snapshots").iterdir() if p.is_dir()]
    found.sort(key=lambda p: (p.name != main, -p.stat().st_mtime))
    yield from found


def cached_models(environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """(org/name, its snapshot) of every model in the cache the engine can read, by name; the snapshot refs/main names
    first, else the newest usable one. Anything unreadable in the cache is passed over."""
    if environ.get(HF_CACHE_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return []
    cache = hf_cache_dir(environ)
    try:
        repos = sorted(p for p in cache.iterdir() if p.name.startswith("models--")) if cache else []
    except OSError:  # no cache yet, or not a folder we may read
        repos = []
    found = []
    for repo in repos:
        name = repo.name.removeprefix("models--").replace("--", "/")  # models--org--name holds org/name
        try:
            snapshot = next((s for s in snapshots(repo) if usable_snapshot(s)), None)
        except OSError:
            continue
        if snapshot is not None and name:
            found.append((name, snapshot))
    return found
