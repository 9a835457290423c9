"""The margin report taken in parts (tests/margins.py): which tests an earlier configuration's log names, and a
rerun's records replacing only its own tests' in a kept log."""

from __future__ import annotations

import json

from tests import margins


def _log(path, records):
    path.write_text("".join(json.dumps({"test": t, "what": w, "margin": m}) + "\n" for t, w, m in records))


def test_from_an_earlier_log_only_the_tests_under_the_margin_given(tmp_path):
    log = tmp_path / "default.jsonl"
    _log(
        log,
        [
            ("tests/a.py::test_low", "x", 50.0),
            ("tests/a.py::test_low", "y", 5000.0),
            ("tests/a.py::test_high", "x", 2000.0),
            ("tests/b.py::test_equal[1]", "x", float("inf")),
            ("tests/b.py", "outside any test", 3.0),
        ],
    )
    assert margins.recorded(log) == ["tests/a.py::test_low", "tests/a.py::test_high", "tests/b.py::test_equal[1]"]
    assert margins.recorded(log, below=1000) == ["tests/a.py::test_low"]


def test_an_update_replaces_only_the_rerun_tests_records(tmp_path):
    log = tmp_path / "1-thread.jsonl"
    _log(
        log,
        [
            ("tests/a.py::test_one", "x", 2.0),
            ("tests/a.py::test_one_more", "x", 3.0),
            ("tests/a.py::test_two[p]", "x", 4.0),
            ("tests/c.py::test_three", "x", 5.0),
        ],
    )
    margins.forget(log, ["tests/a.py::test_one", "tests/a.py::test_two"])
    left = [json.loads(line)["test"] for line in log.read_text().splitlines()]
    assert left == ["tests/a.py::test_one_more", "tests/c.py::test_three"]
    margins.forget(log, ["tests/c.py"])
    assert [json.loads(line)["test"] for line in log.read_text().splitlines()] == ["tests/a.py::test_one_more"]


def test_a_worst_case_bound_is_listed_apart_and_not_counted_under_10x(tmp_path, capsys):
    log = tmp_path / "default.jsonl"
    records = [
        {"test": "tests/a.py::test_rows", "what": "rows", "worst": 2e-7, "margin": 5.0, "bound": 1e-6, "scale": 1.0},
        {"test": "tests/a.py::test_x", "what": "x", "worst": 1e-7, "margin": 20.0, "bound": 2e-6, "scale": 1.0},
    ]
    records[0]["worst_case"] = True
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = margins.report({"default": log}, top=5)
    out = capsys.readouterr().out
    assert [r["what"] for r in rows] == ["rows", "x"] and "worst case: no machine crosses it" in out
    assert "under 10x" not in out.split("rows")[-1].splitlines()[0]
    records[1]["margin"] = 3.0  # an estimated bound at 3x is still flagged
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    margins.report({"default": log}, top=5)
    assert "<-- under 10x" in capsys.readouterr().out
