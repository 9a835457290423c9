"""Property tests over the whole path below the app: tokenize -> model -> trace -> every figure builder -> the
downloads, on hostile text. Nothing may raise but a clear TokenizeError, and every figure shows tokens literally."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
from hypothesis import HealthCheck, given, settings

from attention_explorer.explorer.app import downloads
from attention_explorer.explorer.figures.head_view import head_view
from attention_explorer.explorer.figures.heatmap import head_heatmap
from attention_explorer.explorer.figures.model_view import layer_heads, model_view
from attention_explorer.explorer.figures.statistics import statistic_grid
from attention_explorer.explorer.figures.walkthrough import per_key_bars, vector_strip
from attention_explorer.explorer.run import analysis, trace, walkthrough
from attention_explorer.models.tokenize import TokenizeError
from tests import tolerance
from tests.hostile import NAMED, TEXT, assert_literal

pytestmark = pytest.mark.slow
MAX_TOKENS = 24  # enough for every kind of token; small enough for a thousand examples


def every_figure(result: trace.Trace):
    tokens = result.source_tokens
    weights = result.encoder_self.weights
    stats = analysis.head_statistics(weights, tokens)
    labels = analysis.head_labels(stats, len(tokens))
    s = walkthrough.steps(result, "encoder_self", 1, 2, len(tokens) - 1)
    groups = analysis.word_groups(result.source_word_ids)
    words = analysis.merge_tokens(tokens, groups)
    yield head_heatmap(weights[0, 0], tokens, tokens, "one head")
    yield head_heatmap(analysis.merge_words(weights[0, 0], groups, groups), words, words, "words")
    yield head_heatmap(weights[0, 0] - weights[0, 1], tokens, tokens, "difference", diverging=True)
    yield layer_heads(weights[0])
    yield model_view(weights, selected=(0, 0))
    yield head_view(weights[0], tokens, tokens, [0, 1], None)
    yield head_view(weights[0], tokens, tokens, [0], len(tokens) - 1)
    yield statistic_grid(stats["entropy"], labels, "entropy")
    yield per_key_bars(s.weights, tokens, "weights", s.mask)
    yield vector_strip(s.k, tokens, "K")


def check(loaded, text: str) -> None:
    try:
        result = trace.run(loaded, text, MAX_TOKENS)
    except TokenizeError as e:
        assert not text.strip() or "no tokens" in str(e), (text, e)  # only empty or unusable text is refused
        return
    assert 3 <= len(result.source_tokens) <= MAX_TOKENS
    # each softmax weight within its own rounding (reordered over n + 3 terms, of the weight), summed over n keys:
    # within reordered(2n + 3) of 1 (tests/tolerance.py). A worst case of IEEE roundings, nothing estimated (the
    # shift's and exp's errors even cancel: each row's same exp values are both its numerators and its sum), so a
    # row of a few keys stands at a few times its difference on any machine and none can cross it
    n = result.encoder_self.weights.shape[-1]
    rows = result.encoder_self.weights.sum(-1)
    tolerance.assert_within(
        rows, np.ones(rows.shape), tolerance.reordered(2 * n + 3, 1.0), "rows sum to 1", worst_case=True
    )
    for figure in every_figure(result):
        assert_literal(pio.to_json(figure, validate=False))
        doc = downloads.records(figure)  # the downloads give the tokens back exactly as the tokenizer wrote them
        json.dumps(doc)
    heatmap = downloads.records(
        head_heatmap(result.encoder_self.weights[0, 0], result.source_tokens, result.source_tokens)
    )
    assert heatmap["traces"][0]["x"] == [f"{i}: {t}" for i, t in enumerate(result.source_tokens)]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=TEXT)
def test_hostile_text_through_model_trace_figures_and_downloads(minilm, text):
    check(minilm, text)


@pytest.mark.parametrize("text", NAMED, ids=range(len(NAMED)))
def test_named_hostile_inputs(minilm, text):
    check(minilm, text)


def test_too_long_input_is_cut_to_the_limit_and_says_how_much(minilm):
    result = trace.run(minilm, "word " * 20_000, 512)
    assert len(result.source_tokens) == 512 and result.truncated == 20_000 - 510
