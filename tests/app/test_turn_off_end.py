"""Turn heads off on a decoder-only model (AppTest via app.py, a tiny random GPT-2 folder) shows what the model answers
after the text, before and after: its last row, which reads the whole text, scores the model's own top next token
(the text says nothing of what follows), in the sentence and as the charts' last bars."""

from __future__ import annotations

import html

import numpy as np
import pytest

from attention_explorer.explorer.experiments import ablate
from attention_explorer.explorer.run import trace
from attention_explorer.models import registry
from attention_explorer.models.ablation import Head
from tests.app import new_app
from tests.app.test_decoder_only import KEY, TEXT
from tests.figdata import array, plain, spec

pytestmark = pytest.mark.slow


@pytest.fixture
def gpt2(gpt2_folder, monkeypatch):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny-gpt2={gpt2_folder}"}))
    return registry.load(KEY)


def test_an_outcome_scores_the_models_answer_after_the_text(gpt2):
    clean = trace.run(gpt2, TEXT, gpt2.max_tokens)
    outcome = ablate.outcome(gpt2, clean, [Head("decoder_self", 0, h) for h in range(4)], "zero")
    n = len(clean.source_tokens)
    assert len(outcome.before.targets) == len(outcome.after.targets) == n  # every row, the last one too
    assert outcome.before.targets[-1] == clean.top_tokens[-1][0]  # the model's own answer after the text
    assert outcome.answer.text_end and not outcome.answer.counted[-1]  # no right answer is known there: not counted
    # the same forward's last row: its probability is the trace's own, to float32 rounding of a softmax over V
    p = outcome.before.right_probabilities()[-1]
    assert abs(p - float(clean.top_probabilities[-1][0])) <= 1e-5
    ablated = trace.run(gpt2, TEXT, gpt2.max_tokens, ablation=ablate.make(gpt2, outcome.heads, "zero", None))
    assert outcome.predicted[-1] == ablated.output_tokens[-1]
    assert outcome.after.right_probabilities()[-1] != p  # the heads off move it


def test_turn_heads_off_shows_the_answer_before_and_after(gpt2):
    at = new_app("ablation")
    at.query_params["model"] = KEY
    at.query_params["text"] = TEXT
    at.query_params["off"] = "1.1,1.2"
    at.run()
    assert not at.exception
    clean = trace.run(gpt2, TEXT, gpt2.max_tokens)
    answer = clean.readable(clean.top_tokens[-1][:1])[0]
    words = plain(" ".join(m.value for m in at.markdown))
    before = float(clean.top_probabilities[-1][0])
    assert f"After the text the model answers {answer}: probability {before:.1%} with every head on" in words
    bars = next(spec(c) for c in at.get("plotly_chart") if c.key.endswith("_probability"))
    n = len(clean.source_tokens)
    assert len(bars["data"][0]["x"]) == n and bars["data"][0]["x"][-1].endswith(f"\u2192 {html.escape(answer)}")
    np.testing.assert_allclose(array(bars["data"][0]["y"])[-1], before, atol=1e-5)
