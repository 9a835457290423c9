"""A trace holds the model's own numbers, for encoder-only and encoder-decoder models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import trace
from attention_explorer.models.tokenize import TokenizeError
from tests import tolerance


def test_encoder_trace_equals_model_output(minilm):
    text = "Bark is very cute and he is a dog"
    result = trace.run(minilm, text, 64)
    with torch.inference_mode():
        out = minilm.model(torch.tensor([minilm.tokenizer.encode(text, 64).ids]))
    assert result.kinds == ("encoder_self",)
    assert result.source_tokens == ("[CLS]", "bark", "is", "very", "cute", "and", "he", "is", "a", "dog", "[SEP]")
    a = result.encoder_self
    assert a.weights.shape == (6, 12, 11, 11) and a.q.shape == (6, 12, 11, 32) and a.output.shape == (6, 11, 384)
    for i, layer in enumerate(out.encoder.layers):
        np.testing.assert_array_equal(a.weights[i], layer.self_attn.weights[0].numpy())
        np.testing.assert_array_equal(a.q[i], layer.self_attn.q[0].numpy())
        np.testing.assert_array_equal(a.scaled_scores[i], layer.self_attn.scaled_scores[0].numpy())
        np.testing.assert_array_equal(result.encoder_states["after_ffn"][i], layer.after_ffn[0].numpy())
    np.testing.assert_array_equal(result.encoder_states["embeddings"], out.encoder.embeddings[0].numpy())
    assert a.mask.all()


def test_truncation_is_recorded(minilm):
    result = trace.run(minilm, "one two three four five six", 5)
    assert result.source_tokens == ("[CLS]", "one", "two", "three", "[SEP]") and result.truncated == 3


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_refused(minilm, text):
    with pytest.raises(TokenizeError, match="empty"):
        trace.run(minilm, text)


@pytest.mark.parametrize("limit", [2, 513])
def test_out_of_range_limit_is_refused(minilm, limit):
    with pytest.raises(TokenizeError, match="between 3 and 512"):
        trace.run(minilm, "hello", limit)


def test_encoder_decoder_trace_has_all_three_kinds(paper_random):
    result = trace.run(paper_random, "Thinking Machines")
    assert result.kinds == ("encoder_self", "decoder_self", "cross")
    n_src, n_tgt = len(result.source_tokens), len(result.target_tokens)
    assert result.target_tokens[0] == "[CLS]"
    assert result.target_tokens[1:] == tuple(t for t in result.output_tokens if t != "[SEP]")[: n_tgt - 1]
    assert result.decoder_self.weights.shape == (6, 8, n_tgt, n_tgt)
    assert result.cross.weights.shape == (6, 8, n_tgt, n_src)
    assert not result.decoder_self.mask[np.triu_indices(n_tgt, 1)].any()
    assert (result.decoder_self.weights[..., ~result.decoder_self.mask] == 0).all()
    assert result.tokens_for("cross") == (result.target_tokens, result.source_tokens)
    # float32 softmax rows: n_src terms summed twice (softmax, here), 3 roundings: a worst case of IEEE roundings,
    # nothing estimated (the shift's and exp's errors cancel: each row's same exp values are its numerators and its
    # sum), so a row of a few keys stands at a few times its difference and no machine crosses it
    rows = result.cross.weights.sum(-1)
    bound = tolerance.reordered(2 * n_src + 3, 1.0)
    tolerance.assert_within(rows, np.ones_like(rows), bound, "rows sum to 1", worst_case=True)
    # the trace re-runs the decoder over its own greedy output: row i's argmax is token i+1
    with torch.inference_mode():
        ids = [paper_random.tokenizer.encode("Thinking Machines", 512).ids]
        tgt = [[paper_random.bos_id, *map(paper_random.tokenizer.token_to_id, result.target_tokens[1:])]]
        out = paper_random.model(torch.tensor(ids), torch.tensor(tgt))
    np.testing.assert_array_equal(result.cross.weights[5], out.decoder.layers[5].cross_attn.weights[0].numpy())


def test_encoder_only_model_has_no_decoder_kinds(minilm):
    result = trace.run(minilm, "hi")
    with pytest.raises(ValueError, match="encoder-only"):
        result.attention("cross")
    with pytest.raises(ValueError, match="unknown attention kind"):
        result.attention("sideways")


@pytest.mark.parametrize(("key", "tokens"), [("paper-random", 40), ("translate", 32), ("reverse", 32)])
def test_the_cached_greedy_trace_equals_the_step_by_step_loop(key, tokens):
    """trace.run decodes with models.greedy: the tokens, and so every weight drawn, are the loop's own."""
    from attention_explorer.models import registry
    from bench.inputs import text_of

    loaded = registry.load(key)
    text = text_of(loaded, tokens)
    result = trace.run(loaded, text, tokens)
    src = torch.tensor([loaded.tokenizer.encode(text, tokens).ids])
    loop = loaded.model.greedy_decode(src, loaded.bos_id, loaded.eos_id, min(tokens + 2, trace.MAX_TARGET))
    vocabulary = loaded.target_vocabulary
    assert result.output_tokens == tuple(vocabulary.id_to_token(i) for i in loop)
    decoder_input = [loaded.bos_id, *(loop[:-1] if loop[-1] == loaded.eos_id else loop)]
    with torch.inference_mode():
        out = loaded.model(src, torch.tensor([decoder_input]))
    for layer in range(len(out.decoder.layers)):
        np.testing.assert_array_equal(
            result.decoder_self.weights[layer], out.decoder.layers[layer].self_attn.weights[0]
        )
        np.testing.assert_array_equal(result.cross.weights[layer], out.decoder.layers[layer].cross_attn.weights[0])
    # exp(logit - log sum exp), as trace._top takes them, against the softmax of the same logits: its own rounding
    top = out.probabilities[0].max(-1).values.numpy()
    bound = tolerance.probabilities_bound(out.probabilities[0], 0.0).max(-1)
    tolerance.assert_within(result.top_probabilities[:, 0], top, bound, "top probability")


def test_an_encoder_only_trace_holds_the_full_traces_encoder_and_no_decoder():
    from attention_explorer.models import registry

    loaded = registry.load("translate")
    text = "the small red cat sees a big dog"
    full, encoder = trace.run(loaded, text), trace.run(loaded, text, encoder_only=True)
    assert encoder.kinds == ("encoder_self",) and encoder.output_tokens is None
    assert encoder.source_tokens == full.source_tokens
    np.testing.assert_array_equal(encoder.encoder_self.weights, full.encoder_self.weights)
    np.testing.assert_array_equal(encoder.encoder_states["after_ffn"], full.encoder_states["after_ffn"])
