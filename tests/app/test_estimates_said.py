"""Work that takes seconds says so before it starts (issue 50): the first visit of Ours vs transformers on SmolLM2
(transformers converts the GGUF file again: about 25 s, 0.5 GB) asks first with its time and memory, and the reveals
of steps 9 and 10 carry what they run at once in their labels, work already kept counted 0."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.app import waiting
from attention_explorer.explorer.run import cost, pace
from tests.app import new_app
from tests.figdata import plain


@pytest.mark.slow
def test_the_first_visit_of_the_reference_on_a_gguf_model_says_its_load_first(smollm2):
    at = new_app("reference")
    at.query_params["model"] = "smollm2"
    at.query_params["text"] = "The capital of Japan is the city of"
    pace.forget()  # Python's pace measured by this page now, and kept PYTHON_FOR seconds for the estimate below
    at.run()
    assert not at.exception
    said = " ".join(plain(i.value) for i in at.info)
    parameters = sum(p.numel() for p in smollm2.model.parameters())
    load = cost.reference_load_seconds(parameters, gguf=True)
    assert "First transformers loads its own copy of SmolLM2" in said
    assert "converts the GGUF file's weights again" in said
    assert cost.about(load) in said and "more of the server's memory" in said
    assert [b.key for b in at.button if b.key == "reference_run"] == ["reference_run"]  # nothing loads before a click
    assert not [c for c in at.get("plotly_chart") if c.key == "reference_grid"]


def test_a_reveal_that_runs_work_says_how_long():
    assert waiting.reveal_label(0.4) == "Reveal the model's answer"  # under a second: nothing to wait for
    assert waiting.reveal_label(6.2) == "Reveal the model's answer (about 6 s)"
    assert waiting.at_once(2.0, 1.0, 60.0) == 3.0  # a part that asks first says its own estimate beside its button
    assert waiting.at_once(2.0, 60.0, 1.0) == 2.0  # and the page stops there: what follows it waits for the click


def test_step_9s_reveal_carries_its_estimate(monkeypatch, minilm):
    from attention_explorer.explorer.run import admission

    pace.forget(calibrated=40.0)  # a busy machine: this process's runs take 40x their fitted estimate
    monkeypatch.setattr(admission, "observe", lambda *seen: None)  # and stays so while the page runs
    at = new_app("turn_off")
    at.query_params["model"] = "minilm"
    at.query_params["text"] = "The animal didn't cross the street because it was too tired"
    at.run()
    assert not at.exception
    label = at.button(key="turn_off_predict_reveal").label
    assert label.startswith("Reveal the model's answer (about ") and label.endswith(" s)"), label


def said_and_run(monkeypatch, page: str, key: str, model: str, text: str) -> tuple[float, list[float]]:
    """(the seconds the reveal's label was made from, the estimates of the runs its click admitted), each at the
    fitted rates (cost.fitted: the runs between them move the pace), so that the two are counted alike: the work's
    size, not this machine's speed. Every observed block's estimate keeps its two parts (pace.Seconds), so that the
    time it takes says both paces, never a plain number read as a run's."""
    from attention_explorer.explorer.run import admission

    said: list[float] = []
    label = waiting.reveal_label

    def recording(seconds: float, *rest) -> str:
        said.append(cost.fitted(seconds))  # the work's size: its estimate at the fitted rates
        return label(seconds, *rest)

    monkeypatch.setattr(waiting, "reveal_label", recording)  # the page imports it on every run
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    at.run(timeout=600)
    assert not at.exception
    (box,) = [s for s in at.selectbox if s.key.startswith(f"{key}_guess_")]
    box.set_value(0).run(timeout=600)  # the class's guess: the reveal's button as the class presses it
    estimate, admitted, lanes = said[-1], [], set()
    real = admission.Gate.admitted

    def counted(self, needs, *rest, **options):
        outer = getattr(self._held_here, "ticket", None) is None  # a run inside a run is covered by the outer one
        # a measurement's chunks are each admitted in its whole lane (not observed): that estimate once
        if outer and (needs.observed or ("lane", needs.seconds) not in lanes):
            assert isinstance(needs.seconds, pace.Seconds) or not needs.observed, needs
            admitted.append(cost.fitted(needs.seconds))
            lanes.add(("lane", needs.seconds))
        return real(self, needs, *rest, **options)

    monkeypatch.setattr(admission.Gate, "admitted", counted)
    at.button(key=f"{key}_reveal").click().run(timeout=600)
    assert not at.exception
    return estimate, admitted


def test_step_9s_reveal_says_what_its_click_runs(monkeypatch, minilm):
    """Issue 50: the reveal's estimate is the estimates of what its click runs at once, no more and no less (the
    times themselves: `python -m bench estimates`)."""
    text = "The animal didn't cross the street because it was too tired " * 12
    estimate, admitted = said_and_run(monkeypatch, "turn_off", "turn_off_predict", "minilm", text)
    assert admitted and estimate == pytest.approx(sum(admitted), rel=1e-6), (estimate, admitted)
    # another session on the same sentence finds that work kept in the shared store: its reveal runs nothing more
    said: list[float] = []
    label = waiting.reveal_label
    monkeypatch.setattr(waiting, "reveal_label", lambda seconds, *rest: said.append(seconds) or label(seconds, *rest))
    at = new_app("turn_off")
    at.query_params["model"] = "minilm"
    at.query_params["text"] = text
    at.run(timeout=600)
    assert not at.exception and said and said[-1] == 0, said


@pytest.mark.slow
def test_step_10s_reveal_says_what_its_click_runs(monkeypatch, smollm2):
    from attention_explorer.explorer.app import patching_runs

    heads_said: list[float] = []
    head_seconds = patching_runs.head_seconds

    def recording(*args) -> float:
        heads_said.append(cost.fitted(found := head_seconds(*args)))
        return found

    monkeypatch.setattr(patching_runs, "head_seconds", recording)
    text = "When Anna and Ben went to the park, Ben gave a ball to"
    estimate, admitted = said_and_run(monkeypatch, "patch", "patch_predict", "smollm2", text)
    # on this sentence no grid asks first: the click runs the residual grid, the heads' grid, the positions grid of
    # the head that restores most and the corrupted text's run for its maps
    residual, heads, positions, corrupted = admitted
    assert estimate == pytest.approx(residual + heads + heads_said[-1], rel=1e-6), (estimate, admitted)
    # which head is not known before its grid: its positions grid is said for a head in the middle layer, whose rows
    # run through more or fewer layers than the one found; the map's first run is said as admitted
    assert heads_said[-1] > corrupted and positions > 0
