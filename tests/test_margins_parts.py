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
