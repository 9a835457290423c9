"""Readable tokens on the pages (AppTest via app.py) for SmolLM2's byte-level BPE: charts label '␣capital', never
'Ġcapital'; step 1 shows both spellings and says what the marks mean; the logit lens names a special token as one;
Head statistics speak of the markers the model has (none: its first token), never of [CLS]."""

from __future__ import annotations

import pytest

from attention_explorer.explorer.run import analysis
from attention_explorer.models.tokenize import NEWLINE_MARK, SPACE_MARK
from tests.app import new_app, reveal
from tests.app.test_decoder_only import text_of
from tests.figdata import spec

pytestmark = pytest.mark.slow

TEXT = "The Eiffel Tower – in\nParis"  # a dash of three bytes, a line break
CAPITAL = "The capital of France is"  # the embedding row's top token at ' France' is <filename> (tied weights)


def opened(page: str, text: str = TEXT):
    at = new_app(page)
    at.query_params["model"] = "smollm2"
    at.query_params["text"] = text
    return at.run()


def test_attention_heatmap_labels_tokens_as_text(smollm2):
    at = opened("attention")
    assert not at.exception
    heatmap = spec(at.get("plotly_chart")[0])
    ticks = [*heatmap["layout"]["xaxis"]["ticktext"], *heatmap["layout"]["yaxis"]["ticktext"]]
    assert ticks and not any("Ġ" in t or "Ċ" in t or "âĢ" in t for t in ticks)
    assert f"{SPACE_MARK}Tower" in ticks and f"{SPACE_MARK}–" in ticks and NEWLINE_MARK in ticks
    assert "The" in ticks  # the first word carries no space: no mark
    assert any(SPACE_MARK in c.value and NEWLINE_MARK in c.value for c in at.caption)  # the legend under it


def test_step_one_shows_both_spellings_and_explains_the_marks(smollm2):
    at = reveal(opened("tokens"), "tokens_predict")
    assert not at.exception
    boxes = spec(at.get("plotly_chart")[0])["data"][0]
    assert f"{SPACE_MARK}Tower" in boxes["text"] and not any("Ġ" in t for t in boxes["text"])
    assert any(row[4] == "ĠTower" for row in boxes["customdata"])  # the hover keeps the tokenizer's spelling
    table = at.dataframe[0].value
    assert f"{SPACE_MARK}–" in list(table["token"]) and "ĠâĢĵ" in list(table["as the tokenizer spells it"])
    words = text_of(at)
    assert f"Ġcapital is shown {SPACE_MARK}capital" in words and f"{NEWLINE_MARK} for a line break" in words


def test_logit_lens_names_a_special_token_as_one(smollm2):
    at = opened("logit_lens", CAPITAL)
    assert not at.exception
    lens = spec(at.get("plotly_chart")[0])["data"][0]
    embedding_row = lens["customdata"][0]
    assert ["&lt;filename&gt;", " (a special token of the vocabulary: a marker, not text)"] in embedding_row
    assert ["␣of", ""] in embedding_row  # the position's own token, readable, no note
    assert not any("Ġ" in t for t in lens["x"])
    assert "<filename> in the embedding row: a special token of this vocabulary" in text_of(at)


def test_head_statistics_on_smollm2_never_speak_of_cls(smollm2):
    at = opened("statistics", CAPITAL)
    assert not at.exception
    box = at.selectbox(key="stats_statistic")
    names = list(box.options)  # as the page labels them
    assert analysis.FIRST_TOKEN in names and not any("CLS" in n or "SEP" in n or "bos" in n for n in names)
    box.set_value("cls").run()
    words = text_of(at) + " ".join(map(str, at.dataframe[0].value.columns))
    assert "[CLS]" not in words and "[SEP]" not in words and "first token" in words
    grid = spec(at.get("plotly_chart")[0])
    assert grid["data"][0]["colorbar"]["title"]["text"] == analysis.FIRST_TOKEN
    # the share is the first token's, an attention sink: well above 0 for the heads that park weight there
    assert at.dataframe[0].value[analysis.FIRST_TOKEN].max() > 50
    assert "delimiter sink" not in " ".join(map(str, at.dataframe[0].value["label"]))
