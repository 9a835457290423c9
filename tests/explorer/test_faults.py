"""The fault suite (bench/faults.py, `python -m bench faults` prints its figures): each fault met beside three other
visitors running sentences; after each the server keeps serving, the gate's books balance to 0, and no other visitor
saw an error. The GGUF whose cache fills the disk is a tiny one made here (the bench uses SmolLM2's)."""

from __future__ import annotations

import pytest

from bench import faults
from tests.folders import make_llama_folder
from tests.gguf_file import write_gguf

pytestmark = pytest.mark.slow  # MiniLM's real weights, a few sentences each


def held(found: faults.Figures) -> faults.Figures:
    assert found.others_errors == [], found.others_errors
    assert found.others_runs == faults.VISITORS * len(faults.SENTENCES)
    assert found.books == (0, 0, 0) and found.served_after and found.held
    return found


def test_a_visitor_who_leaves_mid_run_stops_it_there():
    assert held(faults.leaves_mid_run()).outcome == "stopped after layer 2 of 6"


def test_a_visitor_who_leaves_while_waiting_leaves_the_line():
    assert held(faults.leaves_while_waiting()).outcome == "left the line at place 0 (waiting for its turn)"


def test_a_run_that_raises_raises_to_its_visitor_alone():
    assert held(faults.run_raises()).outcome == "raised to its visitor alone: the run failed at layer 3"


def test_a_model_that_fails_to_load_is_said_in_one_line_and_not_kept():
    outcome = held(faults.load_fails()).outcome
    assert outcome.startswith("refused in one line: broken (local folder) could not be loaded: cannot read ")


def test_a_full_disk_for_the_gguf_cache_still_loads_the_model_and_leaves_nothing(tmp_path):
    folder = make_llama_folder(tmp_path / "llama", hidden_size=64, heads=4, kv_heads=2, intermediate=96, layers=2)
    gguf = write_gguf(folder, tmp_path / "tiny.gguf", kind="Q8_0")
    found = held(
        faults.gguf_cache_full(gguf, room=4096)
    )  # served_after includes: the write failed, and nothing was left
    assert "(local file) loaded from its file; cache write failed (" in found.outcome
    assert found.outcome.endswith("left: 0")


def test_a_budget_smaller_than_one_model_refuses_its_load_and_serves_the_rest():
    outcome = held(faults.budget_below_one_model()).outcome
    assert outcome.startswith("MiniLM's load refused: needs about 521 MB; this server lets a run have ")
