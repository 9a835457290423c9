"""Every page (AppTest via app.py, a tiny random GPT-2 folder: byte-level BPE, 'Ġcat') writes a token one way and a
position one way. No page shows a token as the tokenizer writes it: every sentence, caption, metric, choice and chart
label names tokens as models.tokenize.Spelling.readable does ('␣cat'); only step 1 shows the tokenizer's spelling on
purpose (its table's second column, and the sentence that explains the marks), and a chart's hover may keep it. And
a row is numbered by the position it reads, as the heatmaps' ticks are ('3: ␣on'): "position 3: reads '3: ␣on'",
never "position 4: reads '3: ␣on'"."""

from __future__ import annotations

import json
import re

import pytest

from attention_explorer.explorer import navigation
from attention_explorer.models import registry
from tests.app import new_app
from tests.app.test_decoder_only import EVERY_PAGE, KEY, TEXT
from tests.figdata import plain

pytestmark = pytest.mark.slow

RAW = ("\u0120", "\u010a")  # 'Ġ' (the space before a word) and 'Ċ' (a line break) in GPT-2's byte alphabet
# figure keys that hold what is drawn as text (not hovers, not data): labels, titles, ticks, annotations
DRAWN = {"text", "ticktext", "title", "name", "x", "y", "labels"}


@pytest.fixture
def gpt2(gpt2_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    return registry.load(KEY)


def drawn_strings(node, key: str = "") -> list[str]:
    """Every string a figure draws: under DRAWN keys, or in the layout's annotations; never hover templates or
    customdata (the hover may keep the tokenizer's spelling beside the readable one)."""
    if isinstance(node, str):
        return [node] if key in DRAWN else []
    if isinstance(node, list):
        return [s for item in node for s in drawn_strings(item, key)]
    if isinstance(node, dict):
        return [
            s
            for k, v in node.items()
            if k not in ("customdata", "hovertemplate", "hovertext", "meta")
            for s in drawn_strings(v, k if k in DRAWN or key not in DRAWN else key)
        ]
    return []


def shown(at) -> list[str]:
    """What a class reads on the page: every message, heading, metric label, widget label and choice, and every
    chart's drawn text."""
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error, *at.subheader, *at.header]
    found = [plain(str(p.value)) for p in [*parts, *at.text]]
    found += [m.label for m in at.metric] + [str(m.value) for m in at.metric]
    for widget in [*at.selectbox, *at.radio, *at.multiselect, *at.select_slider]:
        found.append(widget.label)
        found += [str(o) for o in widget.options]
    for chart in at.get("plotly_chart"):
        found += drawn_strings(json.loads(chart.proto.spec))
    return found


def on_purpose(page: str, line: str) -> bool:
    """Step 1 shows the tokenizer's own spelling to explain the marks."""
    return page == "tokens" and ("stands for the space" in line or "is shown" in line)


@pytest.mark.parametrize("page", [p for p in EVERY_PAGE if p != "train"])
def test_no_page_shows_a_raw_token(gpt2, page):
    at = new_app(page)
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.run()
    assert not at.exception, (page, at.exception)
    for box in [s for s in at.selectbox if "_guess_" in s.key]:  # answer every question: what the reveal says too
        box.set_value(0).run()
        at.button(key=box.key.split("_guess_")[0] + "_reveal").click().run()
    assert not at.exception, (page, at.exception)
    lines = shown(at)
    raw = [line for line in lines if any(mark in line for mark in RAW) and not on_purpose(page, line)]
    assert not raw, (page, raw[:5])
    for line in lines:
        for said, label in ROW_READS.findall(line):
            assert said == label, (page, line)
    for frame in at.dataframe:
        table = frame.value
        if "position" in table.columns and "reads" in table.columns:  # the loss's table: one numbering too
            assert [int(r.split(":")[0]) for r in table["reads"]] == list(table["position"]), page


# "position 7: reads '7: ␣of'" and "Position 7 (0 to 13): reads '7: ␣of'": the row and the label it reads
ROW_READS = re.compile(r"[Pp]osition (\d+)[^'\n]{0,20}: reads '(\d+): ")


def test_a_row_is_named_by_the_position_it_reads(gpt2):
    """Step 12 on its last position and step 13's position picker: the number said is the heatmaps' tick number."""
    at = new_app("decoding")
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.run()
    n = len(gpt2.tokenizer.encode(TEXT, gpt2.max_tokens).ids)
    heading = plain(at.subheader[0].value)
    assert heading.startswith(f"Position {n - 1} (0 to {n - 1}): reads '{n - 1}: "), heading
    at.select_slider(key="decoding_position").set_value(3).run()  # stored from 1: the third step reads position 2
    assert plain(at.subheader[0].value).startswith("Position 2 (0 to "), at.subheader[0].value
    at = new_app("final_linear")
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.run()
    options = at.selectbox(key="output_position").options
    assert options[2].startswith("position 2: reads '2: ") and options[-1].startswith(f"position {n - 1}: reads")
    assert ROW_READS.findall(options[2]) == [("2", "2")]


def test_the_text_has_raw_tokens_to_find(gpt2):
    """The check above can fail: the text's tokens carry the mark the pages must not show."""
    tokens = gpt2.tokenizer.encode(TEXT, gpt2.max_tokens).tokens
    assert sum(t.startswith(RAW[0]) for t in tokens) >= 5
    assert navigation.BY_STEM["tokens"].step == 1
