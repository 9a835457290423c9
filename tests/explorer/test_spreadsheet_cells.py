"""Every CSV the app, the command line and the API write puts a ' before a text cell a spreadsheet would run as a
formula (=, +, -, @, a tab, a carriage return): the one function explorer.run.spreadsheet.cell, tested on each
writer; numbers stay numbers."""

from __future__ import annotations

import csv
import io

import numpy as np
import plotly.graph_objects as go
import pytest

from attention_explorer.explorer.app import downloads, export
from attention_explorer.explorer.run import corpus_stats, spreadsheet, trace

RUN_AS_FORMULA = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize("text", RUN_AS_FORMULA)
def test_a_text_a_spreadsheet_would_run_is_written_as_text(text):
    assert spreadsheet.cell(text) == "'" + text


@pytest.mark.parametrize("value", ["a=b", "token", "", " =x", "'=x", 1, -0.5, np.float32(-1.5), None])
def test_anything_else_is_written_as_it_is(value):
    assert spreadsheet.cell(value) is value


def test_the_app_figure_csv(tmp_path):
    figure = go.Figure(go.Bar(x=RUN_AS_FORMULA, y=[1.0, -0.5, 2.0, 3.0, 4.0, 5.0], name="=title"))
    rows = read(downloads.to_csv(figure))
    assert [row[1] for row in rows[1:]] == ["'" + text for text in RUN_AS_FORMULA]
    assert rows[2][2] == "-0.5"  # a negative number stays a number
    assert {row[0] for row in rows[1:]} == {"'=title"}
    heatmap = go.Figure(go.Heatmap(z=[[0.5, -0.25]], x=["-k", "k"], y=["@q"], name="h"))
    assert read(downloads.to_csv(heatmap))[1:] == [["h", "'@q", "'-k", "0.5"], ["h", "'@q", "k", "-0.25"]]


def test_the_command_line_export_csv(minilm):
    text = "=1+1 @home -5 +x"
    result = trace.run(minilm, text, 32)
    out = io.StringIO()
    export.write_csv(result, out, export.Selection(layers=(0,), heads=(0,)))
    rows = read(out.getvalue())
    header = rows[0]
    query, key = header.index("query_token"), header.index("key_token")
    tokens = list(result.source_tokens)
    assert [row[query] for row in rows[1 :: len(tokens)]] == [spreadsheet.cell(t) for t in tokens]
    assert {row[key] for row in rows[1:]} == {spreadsheet.cell(t) for t in tokens}
    assert {"'=", "'@", "'-", "'+"} <= {row[key] for row in rows[1:]}  # MiniLM splits the marks off as tokens
    weight = header.index("weight")
    np.testing.assert_array_equal(
        np.array([float(row[weight]) for row in rows[1:]], np.float32),
        result.encoder_self.weights[0, 0].ravel(),
    )


def test_the_corpus_statistics_csv(monkeypatch):
    """The corpus table (the app's download and `python -m explorer corpus --out stats.csv`) holds numbers only:
    they stay numbers; a text cell (a column name, here) goes through the same function."""
    n = len(corpus_stats.STATISTICS)
    stats = corpus_stats.CorpusStats(
        model_key="m",
        kind="encoder_self",
        causal=False,
        max_tokens=8,
        means=np.full((n, 1, 1), -0.5),
        counts=np.ones(n, np.int64),
        per_text=np.zeros((1, n, 1, 1), np.float32),
        strongest_at=np.zeros((1, n, 1, 1), np.int16),
        texts=("=x",),
        lines=(1,),
        tokens=(("=x",),),
        readable_tokens=(("=x",),),
    )
    rows = read(corpus_stats.to_csv(stats))
    assert rows[1][corpus_stats.COLUMNS.index("entropy")] == "-0.5"
    monkeypatch.setattr(corpus_stats, "COLUMNS", ("=layer", *corpus_stats.COLUMNS[1:]))
    monkeypatch.setattr(corpus_stats.CorpusStats, "rows", lambda self: [])
    assert read(corpus_stats.to_csv(stats))[0][0] == "'=layer"
