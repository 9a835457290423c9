"""The output pages' numbers read from a decoder-only trace's kept states (no forward over the whole text) are the
model's own: the loss, one row's logits and sampling's key/value caches equal what a full forward computes, on a
short text and on a long one (SmolLM2 at 300 tokens, where the trace keeps no layer and a window of rows is
recomputed from the residual stream)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import forward, output, trace
from attention_explorer.models import greedy, registry
from tests import tolerance

SHORT = "the cat sat on the mat because it was tired"


def cases(request, case: str):
    """(model, its trace): a short text (every layer kept) or SmolLM2's long one (layers recomputed)."""
    if case == "short-gpt2":
        loaded = request.getfixturevalue("gpt2")
        return loaded, trace.run(loaded, SHORT)
    if case == "short-induction":
        loaded = registry.load("induction")
        return loaded, trace.run(loaded, loaded.example)
    return request.getfixturevalue("smollm2"), request.getfixturevalue("long_run")


CASES = ["short-gpt2", "short-induction", "long-smollm2"]


@torch.inference_mode()
def forward_logits_and_bound(loaded, ids: list[int]) -> tuple[torch.Tensor, np.ndarray]:
    """(T, V) the straightforward computation, the model's full forward over the text; and each row's logit error
    bound against the same forward in other products (T, 1): tolerance.logits_bound, of the terms' magnitudes through
    the final norm's 1/sigma, the row's largest."""
    out = loaded.model(torch.tensor([ids]))
    return out.logits[0], tolerance.logits_row_bound(loaded.model, out, len(ids))[0]


@pytest.mark.parametrize("case", CASES)
def test_scoring_the_text_from_its_trace_is_the_forwards_loss(request, case):
    loaded, run = cases(request, case)
    ids = forward.token_ids(loaded, run, "decoder")
    scored = output.score_text(loaded, run)
    logits, dz = forward_logits_and_bound(loaded, ids)
    # the straightforward loss: a float64 log-softmax of the forward's (T, V) logits, at the next token
    log_p = logits.double().log_softmax(-1)[:-1]
    nll = -log_p.gather(-1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()
    # the trace's logits come from other products than this forward's (kept states, a window): within a forward's
    # chain of sums (dz, each row's); a log-softmax moves by at most twice that, plus float32's own log-sum-exp over
    # the vocabulary
    bound = 2 * dz[:-1, 0] + tolerance.probable(logits.shape[-1], 1.0)
    tolerance.assert_within(scored.nll, nll, bound, "the loss at each token")
    uniform = -log_p.mean(-1).numpy()
    epsilon = scored.epsilon
    smoothed = (1 - epsilon) * nll + epsilon * uniform
    tolerance.assert_within(scored.per_token, smoothed, bound, "the smoothed loss at each token")
    vocabulary = loaded.target_vocabulary
    assert scored.predicted == tuple(vocabulary.id_to_token(int(i)) for i in logits[:-1].argmax(-1))
    assert scored.targets == run.source_tokens[1:] and scored.vocab_size == logits.shape[-1]
    # one row's logits, as the page draws them: the forward's own numbers, to the rounding of a forward in other
    # products (one row read from the kept states against the whole text's; bit for bit where the BLAS adds both
    # shapes in one order)
    for row in sorted({0, len(ids) // 2, len(ids) - 2}):
        tolerance.assert_within(scored.logits(loaded, row), logits[row].numpy(), dz[row], f"row {row}'s logits")
    # and scoring by a forward (what an ablation runs) gives the same numbers as the trace
    by_forward = output.score(loaded, ids, ids)
    for field in ("nll", "per_token"):
        tolerance.assert_within(getattr(by_forward, field), getattr(scored, field), bound, f"{field} by a forward")
    two = logits[:-1].topk(2).values.numpy()
    clear = np.flatnonzero(
        two[:, 0] - two[:, 1] > 2 * dz[:-1, 0]
    )  # a nearer pair may swap on another machine's kernels
    assert len(clear) >= len(two) // 2 and all(by_forward.predicted[r] == scored.predicted[r] for r in clear)


def test_a_scored_record_keeps_no_vocabulary_sized_array(smollm2, long_run):
    scored = output.score_text(smollm2, long_run)
    vocab = smollm2.model.config.target_vocab_size
    arrays = [v for v in vars(scored).values() if isinstance(v, np.ndarray)]
    assert arrays and all(vocab not in a.shape for a in arrays)


@pytest.mark.parametrize("case", CASES)
def test_sampling_from_the_traces_caches_continues_as_the_model_does(request, case):
    loaded, run = cases(request, case)
    ids = forward.token_ids(loaded, run, "decoder")
    steps = 6
    from_trace = output.sample(loaded, ids, "greedy", max_new=steps, run=run)
    by_forward = output.sample(loaded, ids, "greedy", max_new=steps)
    assert from_trace == by_forward
    # greedy decoding with its own cache, built by a forward that keeps every head
    assert list(from_trace.ids) == greedy.continue_text(loaded.model, ids, steps, greedy.Sampling())
    # the first pick's probability is the forward's last row's
    logits, dz = forward_logits_and_bound(loaded, ids)
    logits, dz = logits[-1], dz[-1, 0]
    p = logits.double().softmax(-1)
    # the trace's last logits come from other products (kept states, a window): within a whole forward's chain of
    # sums (tolerance.logits_bound, of their terms), through the softmax
    first = from_trace.ids[0]
    bound = tolerance.probabilities_bound(p.numpy()[None], dz)[0, first]
    tolerance.assert_within(from_trace.probabilities[0], float(p[first]), bound, "the first pick's probability")
    sampled = output.sample(loaded, ids, "top-p", 1.5, top_p=0.9, seed=3, max_new=steps, run=run)
    assert sampled == output.sample(loaded, ids, "top-p", 1.5, top_p=0.9, seed=3, max_new=steps)


def test_the_caches_from_a_trace_are_the_forwards_keys_and_values(smollm2, long_run):
    ids = forward.token_ids(smollm2, long_run, "decoder")
    kept = forward.states(long_run, "decoder")
    inputs = [torch.from_numpy(np.array(x))[None] for x in (kept["embeddings"], *kept["after_ffn"][:-1])]
    caches = greedy.prefix_caches(smollm2.model, inputs)
    with torch.inference_mode():
        out = smollm2.model(torch.tensor([ids]))  # the text as the run read it
    for layer in (0, 14, 29):
        assert torch.equal(caches[layer].self_k, out.decoder.layers[layer].self_attn.k)
        assert torch.equal(caches[layer].self_v, out.decoder.layers[layer].self_attn.v)


def test_a_window_of_a_layer_is_the_whole_layers_rows(smollm2, long_run):
    source = long_run.attention("decoder_self").source
    kept = forward.states(long_run, "decoder")
    n = len(long_run.source_tokens)
    for layer in (0, 29):
        whole = source.layer(layer)
        every = source.rows(layer, 0, n)
        np.testing.assert_array_equal(every.states["after_self_attn"], whole.states["after_self_attn"])
        np.testing.assert_array_equal(every.attention["self_attn"].weights, whole.attention["self_attn"].weights)
        window = source.rows(layer, 250, 270)
        # the window's products have another shape than the whole text's, so its sums run in another order, from the
        # same kept input x: each element within the layer's chain of sums (270 keys, W^O, the feed-forward) of its
        # terms: the residual's |x_i| plus each sub-layer's write's own product terms (|heads| |W_O| and |hidden|
        # |W_2|, the whole layer's, with their biases), each upstream rounding reaching an element through them
        terms = tolerance.layer_terms(smollm2.model.config, 270)
        x = np.asarray(kept["embeddings"] if layer == 0 else kept["after_ffn"][layer - 1])[250:270]
        module = smollm2.model.decoder.layers[layer]
        heads = np.asarray(whole.attention["self_attn"].heads)[..., 250:270, :]  # (H, 20, Dh)
        read = {"after_self_attn": heads.transpose(1, 0, 2).reshape(20, -1)}  # Concat(head_1..head_h): what W_O read
        with torch.inference_mode():
            normed = module.norm3(torch.as_tensor(np.asarray(whole.states["after_self_attn"])[250:270]))
            read["after_ffn"] = module.ffn.hidden(normed).numpy()  # what W_2 read
        linears = {"after_self_attn": module.self_attn.w_o, "after_ffn": module.ffn.linear2}
        summed = np.abs(x)
        for name in ("after_self_attn", "after_ffn"):
            expected = whole.states[name][250:270]
            linear = linears[name]
            summed = summed + np.abs(read[name]) @ np.abs(linear.weight.detach().numpy()).T
            if linear.bias is not None:
                summed = summed + np.abs(linear.bias.detach().numpy())
            bound = tolerance.reordered(terms, summed)
            tolerance.assert_within(window.states[name], expected, bound, f"layer {layer} {name}, a window")
        weights = window.attention["self_attn"].weights  # (H, 20, 270): rows 250..269 over keys 0..269
        # a softmax of scores q.k, q and k each from a d_model sum: relative to each weight (2 p dz)
        expected = whole.attention["self_attn"].weights[:, 250:270, :270]
        found = window.attention["self_attn"]
        dz = tolerance.scores_bound(found.q, found.k, 2 * smollm2.model.config.d_model)
        bound = tolerance.probabilities_bound(expected, dz)
        tolerance.assert_within(weights, expected, bound, f"layer {layer} weights")
    with pytest.raises(IndexError):
        source.rows(0, 10, n + 1)
