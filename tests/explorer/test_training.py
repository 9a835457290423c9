"""Training in the app, without the page: a run advanced by the clock, its curve, and its snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.experiments.training import Run
from attention_explorer.models import tasks


class Clock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def run() -> Run:
    return Run("reverse", steps=6, every=2, probe=tasks.get("reverse").example)


def test_advance_for_trains_until_the_time_is_up_then_stops_at_the_end(run):
    run.advance_for(3.5, Clock())  # read at 1 (start), then 2, 3, 4 step; 5 is past 3.5 seconds
    assert run.step == 3
    steps, losses, accuracies = run.curve()
    assert steps == [1, 2, 3] and len(losses) == len(accuracies) == 3 and all(np.isfinite(losses))
    run.advance_for(100.0, Clock())
    assert run.finished and run.step == 6
    assert [s.step for s in run.snapshots] == [0, 2, 4, 6]


def test_a_snapshot_shows_the_last_layers_mean_cross_attention_and_the_output(run):
    snapshot = run.snapshots[0]
    result = snapshot.trace
    np.testing.assert_array_equal(snapshot.alignment, result.cross.weights[-1].mean(axis=0))
    assert snapshot.alignment.shape == (len(result.target_tokens), len(result.source_tokens))
    assert snapshot.output == " ".join(t for t in result.output_tokens if t != "<eos>")
