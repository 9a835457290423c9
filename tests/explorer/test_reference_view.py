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

from attention_explorer.explorer.app import cached, compare_runs, shelf
from attention_explorer.explorer.app.state import Choice
from attention_explorer.explorer.run import reference_view, trace
from attention_explorer.models import registry
from attention_explorer.models.reference import run_reference

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


@pytest.mark.parametrize("folder", ["gpt2_folder", "llama_folder", ""])
def test_the_streamed_comparison_equals_the_whole_arrays(folder, request, monkeypatch, minilm):
    """Layer by layer, our layer i against transformers' layer i as it finishes: the same (L, H) maxima and the same
    head as the whole (L, H, T, T) arrays compared at once; with output_attentions off nothing is collected."""
    if folder:
        path = str(request.getfixturevalue(folder))
        monkeypatch.setattr(registry, "MODELS", registry.catalogue({registry.FOLDERS_ENV: f"twin={path}"}))
        loaded = registry.load("folder:twin")
    else:
        path, loaded = "", minilm
    reference = reference_view.load(path)
    ours = trace.run(loaded, TEXT, 64).attention(loaded.family.kinds[0]).weights
    theirs = reference_view.attention(reference, loaded, TEXT, 64)  # (L, H, T, T) at once
    steps = []
    differences, head = reference_view.compare(reference, loaded, TEXT, 64, ours, 1, 1, step=lambda *s: steps.append(s))
    np.testing.assert_array_equal(differences, reference_view.max_abs_difference(ours, theirs))
    np.testing.assert_array_equal(head, theirs[1, 1])
    assert differences.max() <= 1e-5 and steps == [(i + 1, len(ours)) for i in range(len(ours))]
    # another head alone: the reference stops after its layer
    steps.clear()
    alone, head = reference_view.compare(
        reference, loaded, TEXT, 64, ours, 0, 2, every=False, step=lambda *s: steps.append(s)
    )
    assert alone is None and steps == [(1, 1)]
    np.testing.assert_array_equal(head, theirs[0, 2])


def test_a_long_texts_layers_are_compared_as_recomputed(tiny, gpt2_folder, monkeypatch):
    """A run that keeps only the residual stream (a long text) is compared a layer at a time, with no WholeArrayError
    however small the bound on asking for every layer at once."""
    from attention_explorer.explorer.run import layers  # noqa: PLC0415

    kept = np.asarray(trace.run(tiny, TEXT, 64, keep_all=True).decoder_self.weights)  # every layer, as a short text
    monkeypatch.setattr(layers, "WHOLE_BYTES", 0)
    reference = reference_view.load(str(gpt2_folder))
    ours = trace.run(tiny, TEXT, 64, keep_all=False).decoder_self.weights
    assert isinstance(ours, layers.LayerArray)
    differences, head = reference_view.compare(reference, tiny, TEXT, 64, ours, 1, 3)
    theirs = reference_view.attention(reference, tiny, TEXT, 64)
    np.testing.assert_array_equal(differences, reference_view.max_abs_difference(kept, theirs))
    np.testing.assert_array_equal(head, theirs[1, 3])
    with pytest.raises(layers.WholeArrayError):  # what the whole-array comparison met
        reference_view.max_abs_difference(ours, theirs)


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
    differences, theirs = compare_runs.get_reference_difference(Choice("folder:tiny", TEXT, 64), 0, 3)
    assert differences.shape == (2, 4) and differences.max() <= 1e-5 and theirs.shape == (6, 6)
    assert loads == [str(gpt2_folder)]
    assert shelf.reference_key(str(gpt2_folder)) in shelf.shelf()  # its own shelf entry beside MiniLM's
    assert cached.get_reference(str(gpt2_folder)) is cached.get_reference(str(gpt2_folder)) and len(loads) == 1
    with pytest.raises(ValueError, match="not read from a folder"):
        compare_runs.get_reference_difference(Choice("reverse", "a b", 8), 0, 0)


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
