"""Activation patching through app.py (AppTest): the name swap on SmolLM2 one click away, the induction model's
proposed corruption, the three grids drawn from explorer.experiments.patching, a click on a head, bad inputs said
plainly, and the lesson step's predict-then-reveal."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.app.state import PATCHING_ANSWER as ANSWER
from attention_explorer.explorer.app.state import PATCHING_CORRUPT as CORRUPT
from attention_explorer.explorer.app.state import PATCHING_HEAD as HEAD
from attention_explorer.explorer.app.state import PATCHING_WRONG as WRONG
from attention_explorer.explorer.experiments import patching
from attention_explorer.explorer.figures.labels import markdown_literal
from attention_explorer.explorer.views.patching import NAMES, SWAPPED
from attention_explorer.models import registry
from tests.app import new_app, reveal
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow

INDUCTION = "alpha bravo seven kilo alpha bravo seven"


def opened(page: str, model: str, text: str):
    at = new_app(page)
    at.query_params["model"] = model
    at.query_params["text"] = text
    return at.run()


def figure(at, suffix: str) -> dict:
    found = [c for c in at.get("plotly_chart") if c.key == suffix]
    assert found, [c.key for c in at.get("plotly_chart")]
    return spec(found[0])


def text_of(at) -> str:
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.success, *at.error, *at.subheader, *at.metric]
    return plain(" ".join(str(getattr(p, "value", "")) + " " + str(getattr(p, "label", "")) for p in parts))


def test_the_induction_model_is_offered_its_corruption_and_every_grid_is_the_models_own():
    at = opened("patching", "induction", INDUCTION)
    assert not at.exception, at.exception
    assert at.session_state[CORRUPT] == "alpha bravo seven charlie alpha bravo seven"
    assert (at.session_state[ANSWER], at.session_state[WRONG]) == ("kilo", "charlie")
    loaded = registry.load("induction")
    setup = patching.setup(loaded, INDUCTION, at.session_state[CORRUPT], "kilo", "charlie", 128)
    clean, corrupt = (patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    residual = patching.measure(loaded, setup, clean, corrupt, patching.residual_patches(loaded, setup))
    heads = patching.measure(loaded, setup, clean, corrupt, patching.head_patches(loaded))
    drawn = figure(at, "patching_residual")["data"][0]["z"]
    np.testing.assert_allclose(array(drawn), residual.reshape(3, -1), atol=1e-6)
    drawn = figure(at, "patching_heads_grid")["data"][0]["z"]
    np.testing.assert_allclose(array(drawn), heads.reshape(2, 4), atol=1e-6)
    best = np.unravel_index(np.argmax(heads), (2, 4))
    assert f"What head {best[0] + 1}.{best[1] + 1} looks at" in text_of(at)
    bars = figure(at, "patching_positions_chart")["data"][0]["y"]
    want = patching.measure(loaded, setup, clean, corrupt, patching.position_patches(setup, *map(int, best)))
    np.testing.assert_allclose(array(bars), want, atol=1e-6)
    assert "Patching convention: the metric is the logit difference" in text_of(at)
    said = f"clean run {clean.difference:+.2f}, corrupted run {corrupt.difference:+.2f}"
    assert said in text_of(at)
    from attention_explorer.explorer.run import trace

    run = trace.run(loaded, INDUCTION, 32)
    row = run.attention("decoder_self").weights[best[0]][best[1]][-1]
    looked = int(np.argmax(row))
    assert f"in the clean run to position {looked} {run.source_tokens[looked]!r} ({row.max():.2f})" in text_of(at)


def test_a_clicked_head_is_the_one_shown_and_bad_inputs_are_said_plainly():
    at = opened("patching", "induction", INDUCTION)
    at.session_state[HEAD] = ("decoder_self", 0, 2)
    at.run()
    assert "What head 1.3 looks at" in text_of(at)
    at.text_input(key="sidebar_" + CORRUPT).set_value("alpha bravo seven alpha bravo seven").run()
    assert not at.exception
    assert "the clean text has 8 tokens and the corrupted one 7" in text_of(at)
    at.text_input(key="sidebar_" + CORRUPT).set_value("alpha bravo seven charlie alpha bravo seven").run()
    at.text_input(key="sidebar_" + WRONG).set_value("kilo").run()
    assert "the same token" in text_of(at)


def test_an_encoder_is_offered_the_name_swap_on_smollm2_in_one_click():
    at = opened("patching", "minilm", "The animal didn't cross the street")
    assert "an encoder with no output layer" in text_of(at)
    at.button(key="patching_name_swap").click().run()
    assert not at.exception, at.exception
    assert at.session_state["model"] == "smollm2" and at.session_state["text"] == NAMES
    assert at.session_state[CORRUPT] == SWAPPED
    # the answers as every page shows a token, the space they carry marked, never the tokenizer's 'ĠMary'
    assert (at.session_state[ANSWER], at.session_state[WRONG]) == ("␣Mary", "␣John")
    assert "position 9 '␣John' -> '␣Mary'" in text_of(at)
    # a proposal's label and tooltip show the text's words literally (Streamlit renders markdown in both)
    button = at.button(key="patching_use_name swap")
    assert button.label == markdown_literal("name swap: Mary / John")
    assert button.help == markdown_literal(SWAPPED)


def test_the_lesson_step_asks_first_then_patches():
    at = opened("patch", "induction", INDUCTION)
    assert not at.exception
    assert not [c for c in at.get("plotly_chart") if c.key == "patch_residual"]
    (box,) = [s for s in at.selectbox if s.key.startswith("patch_predict_guess_")]
    assert list(box.options) == ["the first layer", "the last layer"]  # 2 layers: no thirds, which never say "last"
    at = reveal(at, "patch_predict", 1)
    assert not at.exception
    assert [c for c in at.get("plotly_chart") if c.key == "patch_residual"]
    best = figure(at, "patch_heads_grid")["data"][0]["z"]
    layer = int(np.unravel_index(np.nanargmax(array(best)), (2, 4))[0])
    sits = ("the first layer", "the last layer")[layer]
    assert f"sits in {sits}; your class picked the last layer: " in text_of(at)
    assert "third" not in text_of(at)
    # the corruption is named from what was changed, and denoising is said to show sufficiency, not necessity
    words = text_of(at)
    assert "The change: position 4" in words and "(changed word after repeated “seven”)." in words
    assert "a name swapped" not in words
    assert "everything the answer needs" not in words and "may still be needed" in words
    assert "into the corrupted run (denoising)" in words and "logit(wrong), at the last position;" in words


def test_the_translator_patches_its_encoder_and_every_attention_kind():
    at = opened("patching", "translate", "the small red cat sees a big dog")
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    corrupt, answer, wrong = (at.session_state[k] for k in (CORRUPT, ANSWER, WRONG))
    loaded = registry.load("translate")
    setup = patching.setup(loaded, "the small red cat sees a big dog", corrupt, answer, wrong, 128)
    clean, corrupted = (patching.read(loaded, ids, setup) for ids in (setup.clean_ids, setup.corrupt_ids))
    heads = patching.measure(loaded, setup, clean, corrupted, patching.head_patches(loaded))
    grid = figure(at, "patching_heads_grid")
    drawn = [array(trace["z"]) for trace in grid["data"] if trace["type"] == "heatmap"]
    assert len(drawn) == 3  # encoder self-attention, decoder masked self-attention, cross-attention
    np.testing.assert_allclose(np.concatenate([d.ravel() for d in drawn]), heads, atol=1e-6)
    assert "the decoder's last row (it reads <bos>" in text_of(at)
    # the convention names the decoder's last row, not "the last position" (the source's)
    assert "logit(wrong), at the decoder's last row;" in text_of(at) and "at the last position" not in text_of(at)
    # the proposed corruption is a sentence of the toy grammar: "a big rabbits" was proposed here
    assert corrupt == "the small red cat sees a big car" and loaded.task.expected(tuple(corrupt.split())) is not None
    assert [c for c in at.get("plotly_chart") if c.key == "patching_clean_map"]
