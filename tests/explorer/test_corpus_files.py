"""Corpora as people keep them (explorer.run.corpus_files): .txt and .csv as before, .jsonl by a field, .parquet by a
column read a batch of rows at a time (never the whole file, never another column), globs of many files in sorted
order; every bad file one CorpusError line; and the command line reads them all the same way."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from attention_explorer.explorer.__main__ import main
from attention_explorer.explorer.run import corpus_files, corpus_input
from attention_explorer.explorer.run.corpus_input import CorpusError


def write_jsonl(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


def test_jsonl_reads_the_text_field_line_by_line_and_leaves_blanks_out(tmp_path):
    path = tmp_path / "a.jsonl"
    write_jsonl(
        path, [{"text": "One text.", "id": 1}, "", {"text": "  "}, {"text": None}, {"text": "Two <b>texts</b>"}]
    )
    found = corpus_files.read(path)
    assert found.texts == ("One text.", "Two <b>texts</b>") and found.lines == (1, 5) and found.source == "a.jsonl"


def test_field_names_another_jsonl_field_csv_column_and_parquet_column(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"body": "From JSON lines."}])
    (tmp_path / "b.csv").write_text("id,Body\n1,From a CSV row.\n", encoding="utf-8")
    pq.write_table(pa.table({"body": ["From Parquet."], "n": [1]}), tmp_path / "c.parquet")
    found = corpus_files.read(tmp_path / "*", "body")
    assert found.texts == ("From JSON lines.", "From a CSV row.", "From Parquet.")
    assert found.source == f"3 files matching {tmp_path / '*'}"


def test_parquet_is_read_a_batch_of_rows_of_one_column_at_a_time(tmp_path, monkeypatch):
    rows = [f"Text number {i}." for i in range(2 * corpus_files.PARQUET_ROWS + 5)]
    rows[3] = None  # a missing value is no text
    table = pa.table({"text": rows, "other": ["x" * 100] * len(rows)})
    path = tmp_path / "many.parquet"
    pq.write_table(table, path, row_group_size=corpus_files.PARQUET_ROWS // 2)
    asked = []
    read_batches = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in read_batches(self, *args, **kwargs):
            asked.append((batch.num_rows, batch.schema.names))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    found = corpus_files.read(path)
    assert len(found) == len(rows) - 1 and found.texts[3] == "Text number 4." and found.lines[3] == 5
    assert len(asked) >= 3 and all(n <= corpus_files.PARQUET_ROWS and names == ["text"] for n, names in asked)


def test_a_glob_reads_every_matching_file_in_sorted_order(tmp_path):
    (tmp_path / "part").mkdir()
    for i in (2, 10, 1):
        write_jsonl(tmp_path / "part" / f"{i:02d}.jsonl", [{"text": f"file {i} text {j}"} for j in range(2)])
    found = corpus_files.read(str(tmp_path / "part" / "*.jsonl"))
    assert found.texts == tuple(f"file {i} text {j}" for i in (1, 2, 10) for j in range(2))
    assert found.lines == (1, 2) * 3


def test_txt_and_csv_read_as_before(tmp_path):
    (tmp_path / "a.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("text\nthree\n", encoding="utf-8")
    assert corpus_files.read(tmp_path / "a.txt") == corpus_input.from_file(tmp_path / "a.txt")
    assert corpus_files.read(tmp_path / "b.csv") == corpus_input.from_file(tmp_path / "b.csv")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"text": "fine"}\n{"text": \n', "bad.jsonl line 2 is not JSON"),
        ("bad.jsonl", '{"body": "x", "id": 3}\n', "bad.jsonl line 1 has no 'text' field (it holds 'body', 'id')"),
        ("bad.jsonl", '["text"]\n', "bad.jsonl line 1 has no 'text' field (it holds a list)"),
        ("bad.jsonl", '{"text": 3}\n', "bad.jsonl line 1: 'text' is int, not a text"),
        ("bad.jsonl", b'{"text": "\xff"}\n', "bad.jsonl is not UTF-8 text"),
        ("bad.parquet", b"PAR1 not really", "bad.parquet is not a readable .parquet file"),
        ("empty.jsonl", "\n\n", "has no texts"),
        ("texts.json", "[]", "a corpus is a .txt, .csv, .jsonl, .parquet file, not .json"),
    ],
)
def test_each_bad_file_is_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    with pytest.raises(CorpusError) as raised:
        corpus_files.read(path)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_parquet_without_the_column_or_with_numbers_in_it(tmp_path):
    pq.write_table(pa.table({"body": ["x"], "n": [1]}), tmp_path / "a.parquet")
    with pytest.raises(CorpusError, match=r"a.parquet has no 'text' column \(its columns: 'body', 'n'\)"):
        corpus_files.read(tmp_path / "a.parquet")
    with pytest.raises(CorpusError, match="the 'n' column holds int64, not text"):
        corpus_files.read(tmp_path / "a.parquet", "n")


def test_no_match_and_too_many_texts(tmp_path, monkeypatch):
    with pytest.raises(CorpusError, match="no files match"):
        corpus_files.read(str(tmp_path / "*.parquet"))
    monkeypatch.setattr(corpus_files, "MAX_TEXTS", 3)
    pq.write_table(pa.table({"text": ["a", "b"]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"text": ["c", "d"]}), tmp_path / "2.parquet")
    with pytest.raises(CorpusError, match="has more than 3 texts"):
        corpus_files.read(str(tmp_path / "*.parquet"))


def test_the_cli_reads_jsonl_and_parquet_globs_and_refuses_field_without_file(tmp_path, capsys, minilm):
    write_jsonl(tmp_path / "a.jsonl", [{"body": "The cat sat on the mat."}])
    pq.write_table(pa.table({"body": ["A dog ran after the cat."]}), tmp_path / "b.parquet")
    assert (
        main(["corpus", "--model", "minilm", "--file", str(tmp_path / "*"), "--field", "body", "--format", "json"]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["texts"] == 2 and document["model"] == "minilm"
    assert main(["corpus", "--model", "minilm", "--sample", "--field", "body"]) == 2
    assert "give --file too" in capsys.readouterr().err
    assert main(["corpus", "--model", "minilm", "--file", str(tmp_path / "*.none")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no files match {tmp_path / '*.none'}"
