"""`python -m explorer export --model induction`: the shipped decoder-only toy model predicts the repeat, and its
attention holds the induction head (the issue's command, run as a person runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from attention_explorer.explorer.run import analysis
from attention_explorer.models import induction
from tests.app import APP

ROOT = os.path.dirname(APP)
WORDS = "kilo seven zulu echo two mike"


def test_export_of_the_induction_model_predicts_the_repeat_and_shows_the_induction_head():
    text = f"{WORDS} {WORDS}"
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "export", "--model", "induction", "--text", text],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
        check=True,
    )
    document = json.loads(done.stdout)
    source = document["tokens"]["source"]
    assert source == ["<bos>", *text.split()] and "target" not in document["tokens"]
    assert list(document["attention"]) == ["decoder_self"]
    words = WORDS.split()
    # from the repeat's second word on, each next word is the one after that word's first occurrence
    repeat = len(words) + 1  # the repeat's first word sits here (after <bos>)
    assert document["next_tokens"][repeat : len(source) - 1] == words[1:]
    weights = np.asarray(document["attention"]["decoder_self"])  # (L, H, T, T)
    scores = analysis.induction_of(weights, source)
    assert np.nanmax(scores[1]) > 0.7  # a layer-2 head attends to the word after the earlier copy
    assert np.nanmax(induction.previous_token_scores(weights)[0]) > 0.4  # fed by a previous-token head in layer 1
    assert document["loss"]["label_smoothing"] == 0.0 and len(document["loss"]["per_token"]) == len(source) - 1
