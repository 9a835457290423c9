"""The teacher's caps on a served app: how many tokens each visitor may run, which models they are offered, and how
much memory the server may use. `attention-explorer serve --max-tokens/--models/--memory-budget` sets them as
environment variables (EXPLORER_MAX_TOKENS, EXPLORER_MODELS, EXPLORER_MEMORY_BUDGET), which `make run` passes on from
its own environment; the app reads them once per process (`current`). No streamlit here."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_TOKENS_ENV = "EXPLORER_MAX_TOKENS"
MODELS_ENV = "EXPLORER_MODELS"
MEMORY_BUDGET_ENV = "EXPLORER_MEMORY_BUDGET"
FEWEST_TOKENS = 3  # the sidebar's Max tokens starts here: a cap below it would leave nothing to choose

# A size's unit, case ignored: GB is 10^9 bytes, GiB 2^30, and a bare G 2^30 as `docker --memory 12g` and `free -g`
# read it; no unit is bytes
UNITS = {
    "": 1,
    "b": 1,
    **{f"{p}b": 1000**n for n, p in enumerate("kmgt", 1)},
    **{p: 1024**n for n, p in enumerate("kmgt", 1)},
    **{f"{p}ib": 1024**n for n, p in enumerate("kmgt", 1)},
}
SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*|%)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Caps:
    """What the teacher allows; None: no cap."""

    max_tokens: int | None = None  # tokens a visitor's sentence may run at most
    models: tuple[str, ...] | None = None  # the model keys offered to visitors, in the teacher's order
    memory_budget: int | None = None  # bytes the server may use

    def tokens(self, model_max: int) -> int:
        """The most tokens a visitor may run on a model that reads at most `model_max`."""
        return model_max if self.max_tokens is None else min(model_max, self.max_tokens)

    def stops_at(self, model_max: int) -> str | None:
        """Why Max tokens stops below what the model reads, in a line under it (None when it does not)."""
        if self.tokens(model_max) == model_max:
            return None
        return (
            f"At most {self.max_tokens:,} tokens here: this server's cap for each visitor (serve --max-tokens); the "
            f"model itself reads up to {model_max:,}."
        )

    def offered(self, keys: Collection[str]) -> list[str]:
        """Of the catalogue's keys, those a visitor is offered, in the teacher's order (all of them without a list)."""
        return list(keys) if self.models is None else [key for key in self.models if key in keys]


def parse_tokens(text: str) -> int:
    """A token cap: a whole number from FEWEST_TOKENS up."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < FEWEST_TOKENS:
        raise ValueError(f"{text[:40]!r} is not a whole number of tokens from {FEWEST_TOKENS} up")
    return int(text)


def parse_models(text: str, known: Collection[str]) -> tuple[str, ...]:
    """Comma-separated model keys, each one of `known` (as `attention-explorer models` lists them), repeats dropped."""
    keys = tuple(dict.fromkeys(key.strip() for key in text.split(",") if key.strip()))
    if not keys:
        raise ValueError("names no model; give keys separated by commas, e.g. minilm,translate")
    for key in keys:
        if key not in known:
            raise ValueError(f"unknown model {key[:60]!r}; choose from {', '.join(known)}")
    return keys


def parse_memory(text: str, total_bytes: int) -> int:
    """A memory size in bytes: 12GB (10^9 bytes each), 12G or 1.5GiB (2^30), 8000MB, or 50% of `total_bytes`."""
    found = SIZE.fullmatch(text)
    unit = found.group(2).lower() if found else ""
    if found is None or (unit != "%" and unit not in UNITS):
        raise ValueError(f"{text[:40]!r} is not a memory size like 12GB, 12G, 8000MB, 1.5GiB or 50%")
    number = float(found.group(1))
    if unit == "%" and not 0 < number <= 100:
        raise ValueError(f"{text.strip()!r} is not a share of the memory from above 0% to 100%")
    size = int(total_bytes * number / 100) if unit == "%" else int(number * UNITS[unit])
    if size <= 0:
        raise ValueError(f"{text.strip()!r} is no memory at all")
    return size


def total_memory() -> int:
    """The memory this process may have in bytes: the machine's (MemTotal), or its container's limit where lower."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
        total = int(next(line for line in lines if line.startswith("MemTotal:")).split()[1]) * 1024  # in kB
    except (OSError, StopIteration, ValueError, IndexError):  # not Linux
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:  # a cgroup v2 limit ("max" when there is none): 50% must mean half of what the container may use
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        return min(total, int(limit)) if limit.isdigit() else total
    except OSError:
        return total


def from_environ(
    environ: Mapping[str, str], known: Collection[str] | None = None, total_bytes: int | None = None
) -> Caps:
    """The caps the environment sets; `known`: the model keys there are (default: the catalogue this environment
    builds), `total_bytes`: what a percentage is of (default: total_memory()). ValueError, one line naming the
    variable, for a bad value."""
    found = {}
    for name, field in ((MAX_TOKENS_ENV, "max_tokens"), (MODELS_ENV, "models"), (MEMORY_BUDGET_ENV, "memory_budget")):
        text = environ.get(name, "")
        if not text.strip():
            continue
        try:
            if field == "max_tokens":
                found[field] = parse_tokens(text)
            elif field == "models":
                if known is None:  # the registry only when a list needs checking: it scans the model folders
                    from attention_explorer.models import registry

                    known = registry.catalogue(environ)
                found[field] = parse_models(text, known)
            else:
                found[field] = parse_memory(text, total_memory() if total_bytes is None else total_bytes)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    return Caps(**found)


@functools.cache
def current() -> Caps:
    """This process's caps, read from os.environ once against the registry's models (current.cache_clear() reads
    them again, as tests do). ValueError for a bad value: not cached, so every run says so."""
    from attention_explorer.models import registry

    return from_environ(os.environ, registry.MODELS)
