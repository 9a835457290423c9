"""Every computation a visitor can start is admitted, and no page shows the server's disk (issue 52): a model whose
load could not fit the memory budget is not offered (the sidebar says how many; the log and `attention-explorer
models` say which and why); a load that cannot fit now is refused in one line while another session still runs; a
training run is admitted in its lane and refused when it cannot fit; no text on a page names a path of the server's
disk, a broken model's error included. The gate reads a fixed resident memory here, so every room is exact."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from attention_explorer import cli
from attention_explorer.explorer.app import corpus_runs, shelf, state, store, waiting
from attention_explorer.explorer.experiments import training
from attention_explorer.explorer.run import admission, caps, trace
from attention_explorer.models import footprint, registry
from tests.app import new_app
from tests.badfiles import bert_folder
from tests.figdata import array, plain, spec
from tests.models.test_hf_cache import cached_repo

pytestmark = pytest.mark.slow

MB = 10**6


def clear() -> None:
    for cleared in (caps.current.cache_clear, waiting.gate.clear, shelf.left_out.clear, shelf.shelf.clear):
        cleared()
    store.shared().clear()
    corpus_runs.prepared_corpora().clear()


@pytest.fixture
def served(monkeypatch):
    """start(budget, held): a server started with --memory-budget `budget` whose process holds `held` bytes besides
    its caches, with nothing loaded or kept yet."""

    def start(budget: int, held: int = 0) -> admission.Gate:
        monkeypatch.setattr(admission, "resident_bytes", lambda: held)
        monkeypatch.setenv(caps.MEMORY_BUDGET_ENV, f"{budget // MB}MB")
        clear()
        return waiting.gate()

    yield start
    monkeypatch.undo()
    clear()


def model_box(at):
    return at.sidebar.selectbox(key=state.widget(state.MODEL))


def offered(at) -> list[str]:
    """The sidebar's model list, as keys."""
    titles = {spec.title: key for key, spec in registry.MODELS.items()}
    return [titles[title] for title in model_box(at).options]


def test_a_model_whose_load_could_not_fit_the_budget_is_not_offered(served, caplog, capsys):
    budget = 1200 * MB
    smollm2 = footprint.of_spec(registry.MODELS["smollm2"])
    assert smollm2.load_bytes > budget > footprint.of_spec(registry.MODELS["minilm"]).load_bytes
    served(budget)
    with caplog.at_level(logging.WARNING):
        at = new_app().run()
    assert not at.exception and not at.error
    assert "smollm2" not in offered(at) and "minilm" in offered(at)
    assert shelf.left_out_note(1) in [c.value for c in at.sidebar.caption]  # how many and why; never which files
    said = footprint.left_out_line({"smollm2": smollm2}, budget)
    assert said in caplog.text and "smollm2 (its load needs about 1.6 GB)" in said  # which, to whoever started it
    assert cli.main(["models", "--memory-budget", "1200MB"]) == 0
    rows = {line.split("\t")[0]: line.split("\t") for line in capsys.readouterr().out.splitlines()}
    assert rows["smollm2"][3] == (
        f"not offered by serve: its load needs about {footprint.gigabytes(smollm2.load_bytes)}, more than the memory "
        "budget (1.2 GB)"
    )
    assert all(len(row) == 3 for key, row in rows.items() if key != "smollm2")


def test_a_load_that_cannot_fit_now_is_refused_in_one_line_and_another_session_runs(served, minilm):
    """SmolLM2's load fits the budget (so it is offered) but not the room the process leaves now: picking it says so
    in one line, the gate's books balance, and another visitor's sentence still runs and draws the model's numbers."""
    budget, held = 2700 * MB, 1500 * MB
    gate = served(budget, held)
    mine, other = new_app().run(), new_app("attention").run()
    assert "smollm2" in offered(mine)
    model_box(mine).set_value("smollm2").run()
    assert not mine.exception
    (said,) = [plain(e.value) for e in mine.error]
    needed = footprint.of_spec(registry.MODELS["smollm2"]).load_bytes
    assert said.startswith(
        f"Loading {registry.MODELS['smollm2'].title} needs about {admission.gigabytes(needed)} of memory, and this "
        "server lets one run have "
    )
    assert "smollm2" not in shelf.shelf() and gate.books() == (0, 0, 0)
    other.sidebar.text_area[0].set_value("The cat sat.").run()
    assert not other.exception and not other.error
    drawn = array(spec(other.get("plotly_chart")[0])["data"][0]["z"])
    kept = trace.run(minilm, "The cat sat.", 512, keep_all=True).encoder_self.weights
    assert any(np.array_equal(drawn, head) for layer in kept for head in layer)
    model_box(mine).set_value("minilm").run()  # and the one refused goes back
    assert not mine.error and not mine.exception and gate.books() == (0, 0, 0)


def test_a_training_run_that_cannot_fit_is_refused_and_nothing_trains(served):
    needs = training.Run("reverse", 20000, 5, "one two three", 0).needs()[1]
    budget = 300 * MB
    assert needs > budget > footprint.of_spec(registry.MODELS["reverse"]).load_bytes
    gate = served(budget)
    at = new_app().run()
    model_box(at).set_value("reverse").run()
    at.switch_page("explorer/pages/train.py").run()
    at.number_input(key="train_steps").set_value(20000).run()
    at.number_input(key="train_every").set_value(5).run()
    at.text_input(key="train_probe").set_value("one two three").run()
    at.button(key="train_start").click().run()
    assert not at.exception and "train_run" not in at.session_state
    (said,) = [plain(e.value) for e in at.error]
    assert said.startswith(f"This training run needs about {admission.gigabytes(needs)} of memory")
    assert gate.books() == (0, 0, 0)


def test_no_page_shows_a_path_of_the_server_s_disk(tmp_path, monkeypatch, served):
    served(20_000 * MB)
    cache = tmp_path / "hub"
    cached_repo(cache, "org/mini", bert_folder(tmp_path / "source", "none"))
    folders = f"mine={bert_folder(tmp_path / 'mine', 'none')};broken={bert_folder(tmp_path / 'broken', 'truncated')}"
    found = registry.catalogue({registry.FOLDERS_ENV: folders, "HF_HUB_CACHE": str(cache)})
    monkeypatch.setattr(registry, "MODELS", found)
    at = new_app().run()
    for key in ("hf:org/mini", "folder:mine", "folder:broken"):
        model_box(at).set_value(key).run()
        assert not at.exception
        shown = [
            plain(e.value)
            for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader")
            for e in getattr(at, kind)
        ]
        assert shown and not [line for line in shown if str(tmp_path) in line], key
    assert "model.safetensors in broken" in plain(at.error[0].value)  # the broken one names its file and folder


def test_a_corpus_is_tokenized_once_for_every_session_and_admitted(served, monkeypatch):
    """The Corpus page read the whole corpus with the tokenizer again on every widget change, outside the gate: now
    once per corpus, model and max tokens for every session, admitted by its estimate."""
    gate = served(20_000 * MB)
    prepared, asked = [], []
    real_prepare, real_admitted = corpus_runs.corpus_input.prepare, gate.admitted

    def prepare(loaded, corpus, max_tokens=None):
        prepared.append((loaded.key, corpus_runs.digest(corpus), max_tokens))
        return real_prepare(loaded, corpus, max_tokens)

    def admitted(cost, waiting=None):
        asked.append(cost)
        return real_admitted(cost, waiting)

    monkeypatch.setattr(corpus_runs.corpus_input, "prepare", prepare)
    monkeypatch.setattr(gate, "admitted", admitted)
    first, second = new_app("corpus").run(), new_app("corpus").run()
    first.run()  # a rerun of the page (a widget changed): nothing tokenized again
    assert not first.exception and not second.exception
    (key,) = set(prepared)
    assert prepared == [key]  # two sessions, three runs of the page: one preparation
    corpus = corpus_runs.samples("minilm")
    assert key == ("minilm", corpus_runs.digest(corpus), first.session_state[state.MAX_TOKENS])
    assert corpus_runs.prepare_cost(corpus, key[2]) in asked and gate.books() == (0, 0, 0)
