"""A corpus from what a person gives (explorer.run.corpus_input): each bad input one clear message, long lines cut with
a count and the rest run; and the three doors onto the corpus statistics, `python -m explorer corpus`,
`attention-explorer corpus` and `attention_explorer.corpus`, give the same numbers as explorer.run.corpus."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_explorer as ae
from attention_explorer import cli
from attention_explorer.explorer.__main__ import main
from attention_explorer.explorer.run import corpus, corpus_input
from attention_explorer.explorer.run.corpus_input import CorpusError

ROOT = Path(__file__).resolve().parents[2]
HEADER = [
    "layer",
    "head",
    "positions",
    "previous_token",
    "first_token",
    "self",
    "entropy",
    "mean_distance",
    "previous_positions",
    "induction",
    "induction_positions",
]
LINES = "The cat sat on the mat.\n\nA dog ran after the cat, and the cat ran after the dog.\nThinking Machines\n"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def lines_file(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text(LINES, encoding="utf-8")
    return path


# -- input


def test_lines_keep_their_line_numbers_and_leave_blank_lines_out():
    found = corpus_input.from_lines(LINES)
    assert found.texts == ("The cat sat on the mat.", LINES.splitlines()[2], "Thinking Machines")
    assert found.lines == (1, 3, 4) and found.source == "pasted lines"


def test_a_csv_reads_its_text_column_in_any_case(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('id,Text\n1,"One, with a comma"\n2,\n3,"two\nlines"\n', encoding="utf-8")
    found = corpus_input.from_file(path)
    assert found.texts == ("One, with a comma", "two\nlines") and found.lines == (2, 5)


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("empty.txt", b"", "empty.txt has no texts (every line is blank)"),
        ("blank.txt", b"\n  \n\t\n", "blank.txt has no texts (every line is blank)"),
        ("picture.txt", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "picture.txt is not a text file (it holds binary data)"),
        ("latin.txt", "caf\xe9\n".encode("latin-1"), "latin.txt is not UTF-8 text (byte 3 cannot be read)"),
        ("cols.csv", b"a,b\n1,2\n", "cols.csv has no 'text' column (its columns: 'a', 'b')"),
        ("none.csv", b"", "none.csv is empty"),
    ],
)
def test_each_bad_file_is_one_clear_message(tmp_path, name, data, message):
    with pytest.raises(CorpusError) as raised:
        corpus_input.from_bytes(data, name)
    assert str(raised.value) == message
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CorpusError, match="^" + re.escape(message) + "$"):
        corpus_input.from_file(path)


def test_a_file_too_large_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.txt"
    with path.open("wb") as f:
        f.truncate(50 * 2**20)  # 50 MiB of holes: refused by its size, never read
    with pytest.raises(CorpusError, match=r"^big.txt is 50.0 MiB; a corpus file may be at most 10.0 MiB$"):
        corpus_input.from_file(path)
    with pytest.raises(CorpusError, match="at most 10.0 MiB"):
        corpus_input.from_bytes(b"a\n" * (corpus_input.MAX_BYTES // 2 + 1), "upload.txt")


def test_texts_must_be_a_list_of_strings():
    with pytest.raises(CorpusError, match="not one string"):
        corpus_input.from_texts("one text")
    with pytest.raises(CorpusError, match="every text must be a string"):
        corpus_input.from_texts(["a", 3])
    with pytest.raises(CorpusError, match="no texts"):
        corpus_input.from_texts(["", "  "])


def test_long_lines_are_cut_with_a_count_and_the_rest_runs(minilm):
    texts = ["word " * 30, "short one", "word " * 12]
    ready = corpus_input.prepare(minilm, corpus_input.from_texts(texts), 10)
    assert [len(e) for e in ready.encodings] == [10, 4, 10]
    assert ready.cut == 2 and ready.tokens_cut == (32 - 10) + (14 - 10)
    assert ready.notes() == ["2 of 3 texts were cut to 10 tokens (26 tokens cut)"]
    stats = corpus.run(minilm, ready)
    assert stats.notes == tuple(ready.notes()) and len(stats.texts) == 3
    with pytest.raises(CorpusError, match="between 3 and 512 for minilm, not 600"):
        corpus_input.prepare(minilm, corpus_input.from_texts(texts), 600)


def test_texts_a_model_cannot_read_are_left_out_and_named(translate):
    texts = [translate.examples[0], "zzzz qqqq", translate.examples[1], "the zzzz"]
    readable = [t for t in texts if translate.can_read(t)]
    assert readable == [texts[0], texts[2]]  # the toy vocabulary reads its own words only
    ready = corpus_input.prepare(translate, corpus_input.from_texts(texts), 16)
    assert [texts[i] for i in ready.index] == readable
    (note,) = ready.notes()
    unread = [i + 1 for i, t in enumerate(texts) if t not in readable]
    assert note.startswith(f"{len(unread)} texts could not be read by this model and were left out (line ")
    assert str(unread[0]) in note
    stats = corpus.run(translate, ready)
    assert stats.texts == tuple(readable) and stats.lines == tuple(i + 1 for i in ready.index)
    with pytest.raises(CorpusError, match="can read none of the 1 texts"):
        corpus_input.prepare(translate, corpus_input.from_texts(["zzzz qqqq"]), 16)


# -- the command, the console command and the notebook API


def test_cli_writes_the_csv_with_the_exact_header(capsys, minilm, lines_file, tmp_path):
    out = tmp_path / "stats.csv"
    code, stdout, err = run_cli(capsys, "corpus", "--model", "minilm", "--file", str(lines_file), "--out", str(out))
    assert code == 0 and stdout == "" and err == ""
    rows = list(csv.reader(out.open(encoding="utf-8")))
    assert rows[0] == HEADER and len(rows) == 1 + 6 * 12
    expected = corpus.run(minilm, corpus_input.prepare(minilm, corpus_input.from_file(lines_file)))
    for row, want in zip(rows[1:], expected.rows(), strict=True):
        assert [int(row[0]), int(row[1]), int(row[2])] == [want["layer"], want["head"], want["positions"]]
        for column, cell in zip(HEADER[3:], row[3:], strict=True):
            # repr of a float64 reads back as the same number; a statistic that pooled nothing is an empty cell
            assert (None if cell == "" else float(cell)) == want[column]
    assert int(rows[1][2]) == 9 + 17 + 4  # every token of the three texts, [CLS] and [SEP] included
    assert int(rows[1][8]) == 8 + 16 + 3 and int(rows[1][10]) > 0  # the second text repeats "the", "cat", ...


def test_cli_json_format(capsys, minilm, lines_file):
    code, out, err = run_cli(capsys, "corpus", "--model", "minilm", "--file", str(lines_file), "--format", "json")
    assert code == 0 and err == ""
    document = json.loads(out)
    assert document["columns"] == HEADER and document["texts"] == 3 and document["kind"] == "encoder_self"
    assert document["model"] == "minilm" and document["max_tokens"] == 512 and document["notes"] == []
    first = document["rows"][0]
    assert list(first) == HEADER and (first["layer"], first["head"]) == (0, 0)
    stats = ae.corpus("minilm", [line for line in LINES.splitlines() if line.strip()])
    assert document["rows"] == stats.document()["rows"]


def test_cli_warns_of_cut_lines_and_still_runs(capsys, lines_file):
    code, out, err = run_cli(capsys, "corpus", "--model", "minilm", "--file", str(lines_file), "--max-tokens", "8")
    assert code == 0 and len(list(csv.reader(io.StringIO(out)))) == 73
    assert err == "warning: 2 of 3 texts were cut to 8 tokens (10 tokens cut)\n"  # 9 -> 8 and 17 -> 8


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--file", "{empty}"], "empty.txt has no texts (every line is blank)"),
        (["--file", "{binary}"], "binary.txt is not a text file (it holds binary data)"),
        (["--file", "{columns}"], "columns.csv has no 'text' column (its columns: 'id', 'body')"),
        (["--file", "{missing}"], "missing.txt: no such file"),
        (["--file", "{lines}", "--max-tokens", "2"], "max tokens must be between 3 and 512 for minilm, not 2"),
        (["--file", "{lines}", "--batch-size", "0"], "--batch-size must be at least 1, not 0"),
        (["--file", "{lines}", "--format", "xml"], "invalid choice"),
        (["--file", "{lines}", "--sample"], "not allowed with"),
        ([], "one of the arguments --file --sample is required"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(capsys, tmp_path, lines_file, argv, message):
    files = {"empty": b"", "binary": b"\0\1\2text", "columns": b"id,body\n1,hello\n"}
    names = {"empty": "empty.txt", "binary": "binary.txt", "columns": "columns.csv"}
    paths = {key: tmp_path / names[key] for key in files}
    for key, data in files.items():
        paths[key].write_bytes(data)
    paths |= {"missing": tmp_path / "missing.txt", "lines": lines_file}
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in argv]
    code, out, err = run_cli(capsys, "corpus", "--model", "minilm", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_the_console_command_is_the_same_door(capsys, lines_file):
    code = cli.main(["corpus", "--model", "minilm", "--file", str(lines_file), "--format", "json"])
    console = capsys.readouterr()
    assert code == 0 and console.err == ""
    _, direct, _ = run_cli(capsys, "corpus", "--model", "minilm", "--file", str(lines_file), "--format", "json")
    assert json.loads(console.out) == json.loads(direct)
    assert cli.main(["corpus", "--model", "minilm", "--file", str(lines_file) + ".nope"]) == 2
    assert capsys.readouterr().err.strip().endswith("texts.txt.nope: no such file")


def test_a_real_process_exits_2_with_one_line(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "explorer", "corpus", "--model", "minilm", "--file", str(empty)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: empty.txt has no texts (every line is blank)\n"


def test_the_api_takes_a_list_a_path_or_the_sample(lines_file, minilm):
    from attention_explorer.explorer.experiments import sample

    listed = ae.corpus("minilm", LINES.splitlines())
    from_path = ae.corpus("minilm", lines_file)
    np.testing.assert_array_equal(listed.means, from_path.means)
    assert listed.lines == (1, 3, 4) and listed.statistic("entropy").shape == (6, 12)
    assert listed.text_values("self").shape == (3, 6, 12)
    assert listed.tokens[2] == ("[CLS]", "thinking", "machines", "[SEP]")
    with pytest.raises(ValueError, match="not one string"):
        ae.corpus("minilm", str(lines_file))
    with pytest.raises(ValueError, match="no such file"):
        ae.corpus("minilm", lines_file.with_name("gone.txt"))
    with pytest.warns(UserWarning, match="2 of 3 texts were cut to 8 tokens"):
        ae.corpus("minilm", LINES.splitlines(), max_tokens=8)
    told = []
    with pytest.warns(UserWarning, match=r"texts were cut to 24 tokens"):  # the longest sample texts
        samples = ae.corpus("minilm", "sample", max_tokens=24, batch_size=64, progress=lambda d, n: told.append((d, n)))
    assert len(samples.texts) == len(sample.texts(minilm)) and told[-1] == (len(samples.texts),) * 2
    points = ae.corpus_points("minilm", LINES.splitlines(), layer=0, head=1)
    assert points.queries.shape == (30, 2) and points.tokens[:2] == ("[CLS]", "the")
