"""Every value the shared store holds is named by one builder: what it is, the model and its revision, the inputs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attention_explorer.explorer.app import cached, compare_runs, shelf, store
from attention_explorer.explorer.app.state import Choice


class Recording:
    """A store that computes every time and keeps the keys it was asked for."""

    def __init__(self) -> None:
        self.keys: list[tuple] = []

    def get(self, key, compute):
        self.keys.append(key)
        return compute()

    def peek(self, key):
        return None  # keeps nothing

    def computing(self, key):
        return False  # nobody else computes


def admitted_freely(monkeypatch) -> None:
    """Every computation runs at once, estimated free (admission itself: tests/explorer/test_admission.py)."""
    free = store.admission.Cost(0.0, 0)
    monkeypatch.setattr(store, "compute", lambda message, work, needs, advice=None: work())
    monkeypatch.setattr(store, "tokens_of", lambda *args: 2)
    monkeypatch.setattr(store, "text_cost", lambda *args: free)
    monkeypatch.setattr(store, "first_run_cost", lambda *args: free)
    monkeypatch.setattr(store, "fits", lambda *args: None)
    monkeypatch.setattr(compare_runs, "reference_cost", lambda *args: free)


@pytest.fixture
def recorded(monkeypatch) -> Recording:
    recording = Recording()
    loaded = SimpleNamespace(revision="rev-1", family=SimpleNamespace(kinds=("encoder_self",)))
    monkeypatch.setattr(store, "shared", lambda: recording)
    monkeypatch.setattr(shelf, "model", lambda key: loaded)
    monkeypatch.setattr(shelf, "get_model", lambda key: loaded)
    admitted_freely(monkeypatch)
    monkeypatch.setattr(store.reduced, "for_model", lambda loaded: None)
    result = SimpleNamespace(attention=lambda kind: SimpleNamespace(weights="ours"))
    monkeypatch.setattr(store, "trace", SimpleNamespace(run=lambda *args, **options: result))
    monkeypatch.setattr(shelf, "get_reference", lambda folder="": "reference")
    view = SimpleNamespace(compare=lambda *args, **options: ("difference", "theirs"), folder_of=lambda key: "")
    monkeypatch.setattr(compare_runs, "reference_view", view)
    return recording


def test_the_key_names_the_model_its_revision_and_the_inputs(recorded, monkeypatch):
    assert store.key("trace", "minilm", "some text", 128) == ("trace", "minilm", "rev-1", "some text", 128)
    assert store.key("trace", Choice("minilm", "some text", 128)) == ("trace", "minilm", "rev-1", "some text", 128)
    monkeypatch.setattr(shelf, "model", lambda key: SimpleNamespace(revision="rev-2"))
    assert store.key("trace", "minilm", "some text", 128)[2] == "rev-2"


def test_trace_and_reference_keys_all_carry_the_revision(recorded):
    cached.get_trace(Choice("minilm", "hi", 8))
    assert compare_runs.get_reference_difference(Choice("minilm", "hi", 8), 2, 3) == ("difference", "theirs")
    assert [key[:3] for key in recorded.keys] == [
        ("trace", "minilm", "rev-1"),
        ("trace", "minilm", "rev-1"),
        ("difference", "minilm", "rev-1"),
        ("reference_head", "minilm", "rev-1"),
    ]
    assert all(key[3:5] == ("hi", 8) for key in recorded.keys) and recorded.keys[-1][5:] == (2, 3)


def test_one_reference_run_gives_both_the_grid_and_the_head(recorded, monkeypatch):
    runs = []

    def compare(*args, **options):
        runs.append(args[-2:])
        return "difference", "theirs"

    monkeypatch.setattr(compare_runs, "reference_view", SimpleNamespace(compare=compare, folder_of=lambda key: ""))
    assert compare_runs.get_reference_difference(Choice("minilm", "hi", 8), 2, 3) == ("difference", "theirs")
    assert runs == [(2, 3)]


def test_an_encoder_view_reuses_the_whole_trace_when_the_store_holds_it(monkeypatch):
    from attention_explorer.explorer.run import memo  # noqa: PLC0415

    kept = memo.BoundedCache(2**30)
    runs = []
    monkeypatch.setattr(store, "shared", lambda: kept)
    monkeypatch.setattr(shelf, "model", lambda key: SimpleNamespace(revision="", is_encoder_decoder=True))
    admitted_freely(monkeypatch)
    monkeypatch.setattr(store.reduced, "for_model", lambda loaded: None)
    monkeypatch.setattr(
        store,
        "trace",
        SimpleNamespace(run=lambda *args, encoder_only=False, **options: runs.append(encoder_only) or object()),
    )
    hi_8, hi_9 = Choice("paper-random", "hi", 8), Choice("paper-random", "hi", 9)
    alone = cached.get_trace_for(hi_8, "encoder_self")  # nothing kept: the encoder alone runs
    whole = cached.get_trace_for(hi_8, "cross")
    assert runs == [True, False] and alone is not whole
    assert cached.get_trace_for(hi_9, "cross") is not None  # another sentence: a whole run
    assert cached.get_trace_for(hi_9, "encoder_self") is cached.get_trace(hi_9)
    assert runs == [True, False, False]  # the whole trace served the encoder view: no second encoder run
