"""cost.py counts a sliding-window layer's attention as the engine computes it: on a text longer than the window, in a
run that keeps no raw scores (a long text's first run, patching's reads, the corpus), the band's pairs
(models.attention.banded_attention), not every (query, key) pair; with the raw scores kept (a layer recomputed for a
view, an experiment's batches) or within dense_windows, every pair. Its memory: the (H, T, T) weights once and one
query block's scores. Each count is checked against the sizes of the softmaxes the forward really runs."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.overrides import TorchFunctionMode

from attention_explorer.explorer.run import corpus, cost, trace
from attention_explorer.models import registry
from attention_explorer.models.attention import dense_windows, raw_scores_dropped
from tests.folders import make_gemma3_folder, make_mistral_folder

WINDOW, LENGTH = 4, 30  # 7.5 windows

FOLDERS = {
    "gemma3": lambda path: make_gemma3_folder(path, layers=3, window=WINDOW),  # local, local, global
    "mistral": lambda path: make_mistral_folder(path, window=WINDOW),  # every layer local
}


class AttentionSizes(TorchFunctionMode):
    """Records the size of every attention softmax's input (B, H, Tq, Tk): the weights a layer computes."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.softmax, torch.softmax) and args[0].dim() == 4:
            self.sizes.append(args[0].numel())
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module", params=sorted(FOLDERS))
def loaded(request, tmp_path_factory):
    folder = FOLDERS[request.param](tmp_path_factory.mktemp(request.param))
    return registry.from_path(folder, request.param)


def _weights(run) -> int:
    recorder = AttentionSizes()
    with torch.inference_mode(), recorder:
        run()
    return sum(recorder.sizes)


def test_a_forward_computes_the_weights_forward_terms_counts(loaded):
    model, config = loaded.model, loaded.model.config
    ids = (torch.arange(LENGTH)[None] * 7 + 3) % config.vocab_size  # (1, T)
    every = config.n_decoder_layers * config.n_heads * LENGTH * LENGTH
    for rows in (1, 2):
        batch = ids.expand(rows, -1)
        for context, band in (
            (raw_scores_dropped, True),  # the band on every local layer
            (contextlib.nullcontext, False),  # raw scores kept: every pair
            (lambda: _both(raw_scores_dropped(), dense_windows()), False),  # forced dense
        ):
            for tokens in (LENGTH, 2 * WINDOW, WINDOW):  # up to BAND_WINDOWS windows: the dense path either way
                found = _weights(lambda c=context, t=tokens, b=batch: _forward(model, b[:, :t], c))
                assert found == cost.forward_terms(config, tokens, rows, band=band).weights
    banded = cost.forward_terms(config, LENGTH, band=True)
    assert banded.weights < every == cost.forward_terms(config, LENGTH).weights  # the window saves work
    # q k^T and weights @ v follow the same pairs, 2 Dh multiply-adds a weight; the projections are unchanged
    dense = cost.forward_terms(config, LENGTH)
    assert banded.macs - 2 * config.d_head * banded.weights == dense.macs - 2 * config.d_head * dense.weights
    assert cost.forward_seconds(config, LENGTH, band=True) < cost.forward_seconds(config, LENGTH)


def _both(first, second):
    stack = contextlib.ExitStack()
    stack.enter_context(first)
    stack.enter_context(second)
    return stack


def _forward(model, ids, context):
    with context():
        model(ids, logits=False)


def test_a_long_first_run_and_the_corpus_compute_what_their_estimates_count(loaded, monkeypatch):
    config = loaded.model.config
    text = " ".join(["the cat sat on the mat and the dog ran"] * 4)
    tokens = len(loaded.tokenizer.encode(text, 64).ids)
    assert tokens > WINDOW
    for short in (True, False):  # a short text's run keeps every layer, raw scores and all; a long one's none
        monkeypatch.setattr(trace, "KEEP_ALL_BYTES", 2**40 if short else 0)
        assert trace.short(loaded, tokens) is short
        found = _weights(lambda: trace.run(loaded, text, 64))
        assert found == cost.forward_terms(config, tokens, band=not trace.short(loaded, tokens)).weights
    # the corpus's batch (rows of one length: no padded row) reads each layer keeping no raw scores
    ids = torch.tensor([loaded.tokenizer.encode(text, 64).ids] * 3)  # (3, T)
    lengths = torch.full((3,), tokens)
    found = _weights(lambda: corpus.each_layer(loaded, ids, lengths, lambda i, a: None))
    assert found == cost.forward_terms(config, tokens, 3, band=True).weights
    spans = cost.windows(config)
    seconds = sum(cost.layer_seconds(config, tokens, rows=3, window=w) for w in spans)
    assert seconds.fitted == pytest.approx(
        (cost.forward_terms(config, tokens, 3, band=True) + cost.Terms(runs=-1)).seconds(), rel=1e-12
    )


def test_band_blocks_are_the_blocks_of_w_rows():
    assert cost.band_blocks(3, 4) == [9]  # no longer than the window: the dense (T, T)
    assert cost.band_blocks(8, 4) == [64]  # nor than two windows (models.attention.BAND_WINDOWS)
    assert cost.band_blocks(10, 4) == [4 * 4, 4 * 7, 2 * 5]  # rows 0-3 keys 0-3; rows 4-7 keys 1-7; rows 8-9 keys 5-9
    assert sum(cost.band_blocks(2048, 512)) == 1_833_472  # Gemma 3 at 2,048 tokens: 44% of 2,048^2


def test_memory_counts_the_weights_once_and_one_block_of_scores(tmp_path):
    mistral = registry.from_path(make_mistral_folder(tmp_path / "mistral", window=WINDOW), "mistral").model.config
    heads, whole = mistral.n_heads, mistral.n_heads * LENGTH * LENGTH
    band = whole + cost.ATTENTION_COPIES * heads * WINDOW * (2 * WINDOW - 1)  # the largest block: w rows, 2w - 1 keys
    assert cost.attention_floats(mistral, LENGTH, band=True) == band
    assert cost.attention_floats(mistral, LENGTH) == cost.ATTENTION_COPIES * whole  # raw scores kept: dense
    assert cost.attention_floats(mistral, WINDOW, band=True) == cost.ATTENTION_COPIES * heads * WINDOW * WINDOW
    assert cost.attention_floats(mistral, 2 * WINDOW, band=True) == cost.ATTENTION_COPIES * heads * 4 * WINDOW**2
    growth = cost.forward_bytes(mistral, LENGTH) - cost.forward_bytes(mistral, LENGTH, band=True)
    assert growth == int(cost.FLOAT * (cost.ATTENTION_COPIES * whole - band))
    assert cost.batch_bytes(mistral, LENGTH, 2, band=True) < cost.batch_bytes(mistral, LENGTH, 2)
    # a model with a global layer peaks at that layer, band or not
    gemma = registry.from_path(make_gemma3_folder(tmp_path / "gemma3", layers=3, window=WINDOW), "gemma3")
    config = gemma.model.config
    assert cost.attention_floats(config, LENGTH, band=True) == cost.ATTENTION_COPIES * config.n_heads * LENGTH**2
