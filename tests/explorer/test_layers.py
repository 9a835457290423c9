"""A run keeps the residual stream and recomputes a layer when it is read: the recomputed layer is the full forward's,
every kind of attention, with heads turned off too; and reading a long text whole is refused, not attempted."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import layers, trace
from attention_explorer.models import registry
from attention_explorer.models.ablation import Ablation, Head, heads_off, shapes

FIELDS = ("q", "k", "v", "raw_scores", "weights", "heads", "output")


def full_forward(loaded, result: trace.Trace, ablation: Ablation | None = None):
    """The model's own forward with every internal kept, on the trace's tokens."""
    src = torch.tensor([loaded.tokenizer.encode(result.text, len(result.source_tokens)).ids])
    with torch.inference_mode():
        if loaded.is_encoder_decoder:
            vocabulary = loaded.target_vocabulary
            tgt = torch.tensor([[vocabulary.token_to_id(t) for t in result.target_tokens]])
            return loaded.model(src, tgt, ablation=ablation)
        return loaded.model(src, ablation=ablation)


def assert_layers_are_the_forwards(result: trace.Trace, out) -> None:
    """Every recomputed layer of every kind equals the full forward's bit for bit."""
    stacks = {"encoder_self": out.encoder, "decoder_self": out.decoder, "cross": out.decoder}
    for kind in result.kinds:
        module = "cross_attn" if kind == "cross" else "self_attn"
        attention = result.attention(kind)
        for i, layer in enumerate(stacks[kind].layers):
            kept = attention.layer(i)
            for field in FIELDS:
                expected = getattr(getattr(layer, module), field)[0].numpy()
                np.testing.assert_array_equal(getattr(kept, field), expected)  # the same operations, in order
    for states, stack in ((result.encoder_states, out.encoder), (result.decoder_states, out.decoder)):
        for name, values in (states or {}).items():
            if name != "embeddings":
                for i, layer in enumerate(stack.layers):
                    np.testing.assert_array_equal(values[i], getattr(layer, name)[0].numpy())


def folder(path, name: str):
    (spec,) = registry.folder_specs(f"{name}={path}")
    return registry.build(spec)


@pytest.mark.parametrize("fixture", ["minilm", "translate", "gpt2_folder", "llama_folder"])
def test_a_recomputed_layer_equals_the_full_runs(fixture, request):
    loaded = request.getfixturevalue(fixture)
    if not isinstance(loaded, registry.LoadedModel):  # a folder the engine reads
        loaded = folder(loaded, fixture)
    result = trace.run(loaded, loaded.examples[0], keep_all=False)
    assert result.attention(result.kinds[0]).source.kept is None  # recomputed, not kept
    assert_layers_are_the_forwards(result, full_forward(loaded, result))
    kept = trace.run(loaded, loaded.examples[0])  # a short text: every layer kept from the run
    assert kept.attention(kept.kinds[0]).source.kept is not None
    assert_layers_are_the_forwards(kept, full_forward(loaded, kept))


def test_a_recomputed_layer_keeps_the_runs_heads_turned_off(translate):
    ablation = heads_off([Head("encoder_self", 0, 1), Head("cross", 1, 2)], shapes(translate.model.config))
    result = trace.run(translate, translate.examples[0], ablation=ablation, keep_all=False)
    out = full_forward(translate, result, ablation)
    assert_layers_are_the_forwards(result, out)
    assert not result.cross.layer(1).heads[2].any()  # what W_O read: the head turned off
    assert result.cross.layer(1).heads[1].any()


@pytest.mark.slow
def test_smollm2_layers_recomputed_at_512_tokens_equal_the_full_runs(smollm2):
    from bench.inputs import text_of

    result = trace.run(smollm2, text_of(smollm2, 512), 512)
    assert_layers_are_the_forwards(result, full_forward(smollm2, result))
    assert result.decoder_self.q_unrotated is not None and result.decoder_self.kv_heads == 3


def test_a_long_run_keeps_the_residual_stream_not_the_attention(minilm):
    from bench.inputs import text_of

    assert trace.short(minilm, 128) and not trace.short(minilm, 512)
    result = trace.run(minilm, text_of(minilm, 512), 512)
    assert result.encoder_self.source.kept is None
    kept = {id(a) for a in result.encoder_states.values() if isinstance(a, np.ndarray)}
    assert len(kept) == 2  # the embeddings and each layer's output; the rest is recomputed
    assert not any(isinstance(v, np.ndarray) and v.ndim == 4 for v in vars(result).values())


def test_layer_arrays_index_as_numpy_does(translate):
    result = trace.run(translate, translate.examples[0], keep_all=False)
    weights = result.encoder_self.weights
    whole = np.stack([result.encoder_self.layer(i).weights for i in range(weights.shape[0])])
    assert weights.shape == whole.shape and len(weights) == len(whole)
    np.testing.assert_array_equal(np.asarray(weights), whole)
    np.testing.assert_array_equal(weights[1, 2, 3], whole[1, 2, 3])
    np.testing.assert_array_equal(weights[-1], whole[-1])
    np.testing.assert_array_equal(weights[:, 0], whole[:, 0])
    np.testing.assert_array_equal(weights[..., 0], whole[..., 0])
    np.testing.assert_array_equal(weights.mean(axis=1), whole.mean(axis=1))
    np.testing.assert_array_equal(weights - weights, np.zeros_like(whole))
    with pytest.raises(IndexError):
        weights[len(whole)]


def test_a_long_texts_every_head_at_once_is_refused(translate, monkeypatch):
    result = trace.run(translate, translate.examples[0])
    monkeypatch.setattr(layers, "WHOLE_BYTES", result.encoder_self.weights.nbytes - 1)
    with pytest.raises(layers.WholeArrayError, match="a layer at a time"):
        np.asarray(result.encoder_self.weights)
    result.encoder_self.weights[0]  # one layer still reads


def test_a_run_on_a_model_still_training_keeps_its_own_layers(translate):
    """A training snapshot's maps are the weights' at that step, not the weights' when the page reads them."""
    loaded = registry.load("translate")
    result = trace.run(loaded, loaded.examples[0], keep_all=True)
    before = result.cross.layer(1).weights.copy()
    with torch.no_grad():
        for p in loaded.model.parameters():
            p.add_(0.5)
    np.testing.assert_array_equal(result.cross.layer(1).weights, before)
    moved = trace.run(loaded, loaded.examples[0])
    assert not np.array_equal(moved.cross.layer(1).weights[:, :1], before[:, :1])


def test_a_kept_trace_does_not_keep_its_model_and_gets_it_back_when_read():
    loaded = registry.load("translate")
    result = trace.run(loaded, loaded.examples[0], keep_all=False)
    expected = result.cross.layer(1).weights.copy()
    layers.cache().clear()
    del loaded
    gc.collect()
    assert result.cross.source._loaded() is None  # the trace held the model weakly
    np.testing.assert_array_equal(result.cross.layer(1).weights, expected)  # loaded again to the same weights


@pytest.mark.parametrize("keep_all", [True, False])
def test_what_a_run_reduces_each_layer_to_equals_the_same_reduction_of_the_layers_read_later(translate, keep_all):
    """The model view's thumbnails and the opening head, computed while the run held each layer, equal the same
    functions of the layers read afterwards, for every kind of an encoder-decoder."""
    from attention_explorer.explorer.run import blocks, starting

    reducers = {
        "thumbnails": lambda kind, weights, queries, keys: blocks.thumbnails(weights, cells=4),
        "start": lambda kind, weights, queries, keys: starting.layer_link(weights, queries, keys, kind != "cross"),
    }
    result = trace.run(translate, translate.examples[0], keep_all=keep_all, reduce=reducers)
    assert result.reduced is not None and set(result.reduced["start"]) == set(result.kinds)
    for kind in result.kinds:
        attention, (queries, keys) = result.attention(kind), result.tokens_for(kind)
        layers_read = [attention.layer(i).weights for i in range(attention.n_layers)]
        np.testing.assert_array_equal(result.reduced["thumbnails"][kind], blocks.every_layer(layers_read, cells=4))
        found = starting.best_of(result.reduced["start"][kind], queries, keys, kind != "cross")
        assert found == starting.best_link(attention.weights, queries, keys, kind != "cross")


@pytest.mark.parametrize("fixture", ["translate", "gpt2_folder"])
def test_how_far_each_sublayer_moves_each_token_is_reduced_in_the_run_as_the_layers_read_later_give_it(
    fixture, request
):
    """Add & Norm's movement of every sub-layer, reduced by stack while the run held each layer (the first layer's
    input, the embeddings, joined at the end), equals the movement of the states read afterwards; and reading it
    recomputes no layer."""
    from dataclasses import replace

    from attention_explorer.explorer.run import forward, movement

    loaded = request.getfixturevalue(fixture)
    if not isinstance(loaded, registry.LoadedModel):
        loaded = folder(loaded, fixture)
    reducers = {"movement": layers.OnStates(movement.layer_movement)}
    result = trace.run(loaded, loaded.examples[0], keep_all=False, reduce=reducers)
    stacks = forward.trace_stacks(result)
    assert result.reduced is not None and set(result.reduced["movement"]) == set(stacks)
    layers.cache().clear()
    reduced = {stack: movement.movement(result, stack) for stack in stacks}
    assert len(layers.cache()) == 0  # nothing recomputed
    for stack in stacks:
        expected = movement.movement(replace(result, reduced=None), stack)  # every layer's states read in turn
        for field in ("norms", "change", "cosine", "input_norms"):
            np.testing.assert_array_equal(getattr(reduced[stack], field), getattr(expected, field))
        assert reduced[stack].names == expected.names


def test_storing_a_long_run_reads_no_layer(minilm, monkeypatch):
    """The store sizes and freezes what a run kept; probing the lazily read states must not recompute them."""
    from attention_explorer.explorer.run import memo

    result = trace.run(minilm, minilm.examples[0], keep_all=False)
    layers.cache().clear()
    monkeypatch.setattr(layers, "WHOLE_BYTES", 0)
    memo.freeze(result)
    assert memo.nbytes(result) == sum(a.nbytes for a in result.encoder_states.values() if isinstance(a, np.ndarray)) + (
        result.encoder_self.mask.nbytes
    )
    assert len(layers.cache()) == 0  # no layer was recomputed


@pytest.mark.parametrize("fixture", ["minilm", "translate"])
def test_a_run_tells_its_progress_after_every_layer(fixture, request):
    """The first run's bar fills layer by layer: every layer of every stack the kept forward runs, in order."""
    loaded = request.getfixturevalue(fixture)
    told = []
    trace.run(loaded, loaded.examples[0], progress=lambda done, layers: told.append((done, layers)))
    config = loaded.model.config
    total = config.n_encoder_layers + config.n_decoder_layers
    assert told == [(done, total) for done in range(1, total + 1)]
