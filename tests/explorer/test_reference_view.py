"""Ours vs transformers for any model read from a folder: the twin is the folder's own (BertModel or GPT2LMHeadModel by
model_type), compared in the model's own attention kind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.app import cached
from explorer.run import reference_view, trace
from models import registry
from models.reference import run_reference

TEXT = "the cat sat on the mat"


@pytest.fixture
def tiny(monkeypatch, gpt2_folder):
    monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"tiny={gpt2_folder}"}))
    return registry.load("folder:tiny")


def test_only_models_read_from_a_folder_have_a_twin(tiny, gpt2_folder):
    assert reference_view.folder_of("minilm") == ""  # the shipped MiniLM
    assert reference_view.folder_of("folder:tiny") == str(gpt2_folder)
    assert [reference_view.folder_of(k) for k in ("minilm-random", "paper-random", "translate", "nowhere")] == [
        None
    ] * 4
    assert reference_view.class_name(str(gpt2_folder)) == "GPT2LMHeadModel"
    assert reference_view.class_name() == "BertModel"


def test_a_gpt2_folder_is_compared_in_its_masked_self_attention(tiny, gpt2_folder):
    reference = reference_view.load(str(gpt2_folder))
    ours = trace.run(tiny, TEXT, 64).decoder_self.weights  # (L, H, T, T)
    differences, theirs_head = reference_view.compare(reference, tiny, TEXT, 64, ours, 1, 2)
    assert differences.shape == ours.shape[:2] and differences.max() <= 1e-5
    theirs = reference_view.attention(reference, tiny, TEXT, 64)
    np.testing.assert_array_equal(theirs_head, theirs[1, 2])
    assert np.triu(theirs[1, 2], 1).max() == 0 and np.triu(ours[1, 2], 1).max() == 0  # causal: nothing above
    np.testing.assert_array_equal(differences, np.abs(ours - theirs).max(axis=(-2, -1)))


def test_attention_alone_skips_gpt2s_output_layer(gpt2_folder):
    reference = reference_view.load(str(gpt2_folder))
    ids = torch.tensor([[5, 9, 30, 2]])
    whole, body = run_reference(reference, ids), run_reference(reference, ids, hidden_states=False, logits=False)
    assert whole.logits is not None and whole.logits.shape == (1, 4, reference.config.vocab_size)
    assert body.logits is None and body.hidden_states == ()
    for one, other in zip(whole.attentions, body.attentions, strict=True):
        torch.testing.assert_close(one, other, atol=0, rtol=0)


def test_a_plain_forward_returns_no_attention_and_the_same_logits(gpt2_folder):
    reference = reference_view.load(str(gpt2_folder))
    ids = torch.tensor([[5, 9, 30, 2]])
    whole, plain = run_reference(reference, ids), run_reference(reference, ids, hidden_states=False, attentions=False)
    assert len(whole.attentions) == reference.config.n_layer and plain.attentions == () == plain.hidden_states
    torch.testing.assert_close(plain.logits, whole.logits, atol=0, rtol=0)


def test_the_cached_comparison_reads_the_models_own_folder(tiny, gpt2_folder, monkeypatch):
    loads = []
    real = reference_view.load
    monkeypatch.setattr(reference_view, "load", lambda folder="": loads.append(folder) or real(folder))
    differences, theirs = cached.get_reference_difference("folder:tiny", TEXT, 64, 0, 3)
    assert differences.shape == (2, 4) and differences.max() <= 1e-5 and theirs.shape == (6, 6)
    assert loads == [str(gpt2_folder)]
    assert cached._reference_key(str(gpt2_folder)) in cached._models()  # its own shelf entry beside MiniLM's
    assert cached.get_reference(str(gpt2_folder)) is cached.get_reference(str(gpt2_folder)) and len(loads) == 1
    with pytest.raises(ValueError, match="not read from a folder"):
        cached.get_reference_difference("reverse", "a b", 8, 0, 0)


def test_the_first_reference_waits_for_the_background_import():
    """app.py starts importing transformers in a thread once the first page is drawn; opening Ours vs transformers
    meanwhile once found BertModel missing from the half-imported module (a fresh process: the import is the point)."""
    script = (
        "import threading, time\n"
        "from models import reference\n"
        "from models.pretrained import minilm_folder\n"
        "threading.Thread(target=reference.import_code).start()\n"
        "time.sleep(0.1)\n"
        "print(type(reference.load_reference(minilm_folder())).__name__)\n"
    )
    root = Path(__file__).resolve().parents[2]
    environ = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    ran = subprocess.run([sys.executable, "-c", script], cwd=root, env=environ, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == "BertModel", ran.stderr[-2000:]
