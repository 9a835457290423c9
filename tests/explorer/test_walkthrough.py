"""The Q/K/V walkthrough's numbers reproduce the model's own attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_explorer.explorer.figures.walkthrough import MINUS_INFINITY, masked_scores
from attention_explorer.explorer.lesson import wording
from attention_explorer.explorer.run import trace, walkthrough
from attention_explorer.models.config import TransformerConfig
from tests import tolerance


@pytest.fixture(scope="module")
def minilm_trace(minilm):
    return trace.run(minilm, "The animal didn't cross the street because it was too tired")


@pytest.mark.parametrize("layer,head,query", [(0, 0, 0), (2, 5, 10), (5, 11, 14)])
def test_softmax_of_shown_q_and_k_gives_the_models_weights(minilm_trace, layer, head, query):
    s = walkthrough.steps(minilm_trace, "encoder_self", layer, head, query)
    scores = s.k.astype(np.float64) @ s.q.astype(np.float64) / np.sqrt(s.d_head)
    recomputed = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    # float64 from the shown q and k, against the model's float32 scores (a d_head sum) and softmax
    dz = tolerance.scores_bound(s.q[None], s.k, 0)[0]
    tolerance.assert_within(recomputed, s.weights, tolerance.probabilities_bound(s.weights, dz), "weights")
    np.testing.assert_array_equal(s.weights, minilm_trace.encoder_self.weights[layer, head, query])
    # one row scaled, bit for bit the trace's scaled scores (which scale every layer's)
    np.testing.assert_array_equal(s.scaled_scores, minilm_trace.encoder_self.scaled_scores[layer, head, query])
    tolerance.assert_within(s.raw_scores, s.k @ s.q, tolerance.product_bound(s.k, s.q), "raw scores")
    sum_bound = tolerance.reordered(len(s.weights), np.abs(s.weighted_values).sum(0))
    tolerance.assert_within(s.weighted_values.sum(0), s.z, sum_bound, "weighted values summed")
    assert s.concat.shape == (384,) and s.z.shape == (32,)
    np.testing.assert_array_equal(s.concat[head * 32 : (head + 1) * 32], s.z)


def test_projections_are_the_models_own(minilm, minilm_trace):
    layer, head, query = 3, 2, 4
    s = walkthrough.steps(minilm_trace, "encoder_self", layer, head, query)
    attn = minilm.model.encoder.layers[layer].self_attn
    with torch.inference_mode():
        q = attn.w_q(torch.from_numpy(s.x_query))[head * 32 : (head + 1) * 32].numpy()
        out = attn.w_o(torch.from_numpy(s.concat)).numpy()
    # torch's product of one row against the model's batched one: d_model terms and the bias, in another order
    w_q, b_q = attn.w_q.weight[head * 32 : (head + 1) * 32], attn.w_q.bias[head * 32 : (head + 1) * 32]
    terms = np.abs(s.x_query) @ np.abs(w_q.numpy().T) + np.abs(b_q.numpy())
    tolerance.assert_within(q, s.q, tolerance.reordered(len(s.x_query) + 1, terms), "q")
    terms = np.abs(s.concat) @ np.abs(attn.w_o.weight.numpy().T) + np.abs(attn.w_o.bias.numpy())
    tolerance.assert_within(out, s.output, tolerance.reordered(len(s.concat) + 1, terms), "W^O")
    np.testing.assert_array_equal(s.x_query, minilm_trace.encoder_states["after_ffn"][layer - 1][query])
    assert s.x_query_source == "output of encoder layer 3" and s.x_keys_source == "the same rows"


def test_decoder_kinds_use_their_own_inputs_and_masks(paper_random):
    result = trace.run(paper_random, "Thinking Machines")
    s = walkthrough.steps(result, "decoder_self", 1, 3, 2)
    assert s.mask.tolist() == [True, True, True] + [False] * (len(result.target_tokens) - 3)
    assert (s.weights[~s.mask] == 0).all()
    np.testing.assert_array_equal(s.x_query, result.decoder_states["after_ffn"][0][2])
    c = walkthrough.steps(result, "cross", 0, 0, 1)
    assert c.k.shape == (len(result.source_tokens), 64)
    np.testing.assert_array_equal(c.x_query, result.decoder_states["after_self_attn"][0][1])
    assert c.x_query_source == "decoder layer 1 after masked self-attention"
    assert c.x_keys_source == "the encoder's output (memory)"


def test_temperature_is_a_labelled_what_if(minilm_trace):
    s = walkthrough.steps(minilm_trace, "encoder_self", 0, 0, 3)
    found = walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, 1.0)  # numpy's softmax against torch's
    tolerance.assert_within(found, s.weights, tolerance.probabilities_bound(s.weights, 0.0), "temperature 1")
    sharp = walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, 0.2)
    flat = walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, 5.0)
    assert sharp.max() > s.weights.max() > flat.max()
    np.testing.assert_allclose([sharp.sum(), flat.sum()], 1)
    with pytest.raises(ValueError):
        walkthrough.softmax_with_temperature(s.scaled_scores, s.mask, 0)


def test_out_of_range_position_is_an_error(minilm_trace):
    with pytest.raises(IndexError):
        walkthrough.steps(minilm_trace, "encoder_self", 6, 0, 0)


def test_csv_holds_every_value_of_every_key(minilm_trace):
    s = walkthrough.steps(minilm_trace, "encoder_self", 2, 5, 3)
    lines = walkthrough.to_csv(s).splitlines()
    header = lines[0].split(",")
    assert header[:5] == ["key", "raw_score", "scaled_score", "weight", "k0"] and header[-1] == f"v{s.d_head - 1}"
    table = np.loadtxt(lines[1:], delimiter=",", ndmin=2)
    assert table.shape == (len(s.weights), 4 + 2 * s.d_head)
    np.testing.assert_array_equal(table[:, 0], np.arange(len(s.weights)))
    # 9 significant digits read back into float32 give every float32 value exactly (IEEE 754's round trip)
    np.testing.assert_array_equal(table[:, 3].astype(np.float32), s.weights)
    np.testing.assert_array_equal(table[:, 4 : 4 + s.d_head].astype(np.float32), s.k)
    np.testing.assert_array_equal(table[:, 4 + s.d_head :].astype(np.float32), s.v)


def test_a_masked_score_is_drawn_as_the_value_the_softmax_sees(translate):
    result = trace.run(translate, "the small red cat sees a big dog")
    query = 2
    s = walkthrough.steps(result, "decoder_self", 1, 0, query)
    hidden = np.flatnonzero(~s.mask)
    assert hidden.tolist() == list(range(query + 1, len(result.target_tokens)))
    assert (s.masked_scores[hidden] == np.finfo(np.float32).min).all()  # what models.attention writes
    np.testing.assert_array_equal(s.masked_scores[s.mask], s.scaled_scores[s.mask])
    # the drawn weights are torch's softmax of the drawn masked scores, bit for bit (the same float32 kernel over the
    # same row: the masked keys' finfo.min gives exactly 0), where a float64 softmax against them sat at 4.3x a bound
    # of its few roundings
    softmax = torch.softmax(torch.from_numpy(np.ascontiguousarray(s.masked_scores)), -1).numpy()
    tolerance.assert_within(s.weights, softmax, 0.0, "softmax")
    assert (s.weights[hidden] == 0).all()
    figure = masked_scores(s.masked_scores, s.mask, result.target_tokens, "after the mask")
    bars, marks = figure.data
    np.testing.assert_array_equal(bars.x, np.flatnonzero(s.mask))
    np.testing.assert_array_equal(bars.y, s.scaled_scores[s.mask])
    np.testing.assert_array_equal(marks.x, hidden)
    assert list(marks.text) == [MINUS_INFINITY] * hidden.size and MINUS_INFINITY in marks.name
    assert [float(v) for v in np.asarray(marks.customdata)[:, 0]] == [float(np.finfo(np.float32).min)] * hidden.size


def test_nothing_masked_draws_no_minus_infinity(minilm_trace):
    s = walkthrough.steps(minilm_trace, "encoder_self", 0, 0, 3)
    figure = masked_scores(s.masked_scores, s.mask, minilm_trace.source_tokens, "t")
    assert len(figure.data) == 1 and (s.masked_scores == s.scaled_scores).all()


def test_the_input_row_is_named_as_each_model_computes_it(minilm, translate, paper_random):
    assert wording.attention_input(minilm.model.config, "encoder_self", 0) == (
        "LayerNorm(token embedding + token type embedding (type 0) + learned position embedding)"
    )
    d = translate.model.config.d_model
    first = wording.attention_input(translate.model.config, "decoder_self", 0)
    assert first == f"target token embedding x sqrt(d_model) (= x {d**0.5:.4g}) + sinusoid (eq. PE)"
    later = wording.attention_input(translate.model.config, "encoder_self", 1)
    assert later == "output of encoder layer 1, after its last Add & Norm: LayerNorm(h + FFN(h)) (post-LN)"
    assert "sqrt(d_model) (= x 22.63)" in wording.embedding_sum(paper_random.model.config)
    pre = TransformerConfig(vocab_size=10, d_model=16, n_heads=2, d_ff=32, norm_first=True)
    assert wording.attention_input(pre, "encoder_self", 2) == (
        "output of encoder layer 2: h + FFN(LayerNorm(h)) (pre-LN: not yet normalised)"
    )
    assert "LayerNorm(h + SelfAttn(h))" in wording.attention_input(translate.model.config, "cross", 0)
    assert "pre-LN" in wording.pre_ln_note(pre) and wording.pre_ln_note(translate.model.config) == ""


def test_past_the_drawn_keys_the_masked_scores_draw_the_chosen_keys_named_by_position():
    """At 2,048 keys the softmax's input is drawn for the keys the other bars draw, each labelled '17: cat', not as
    2,048 one-pixel bars with bare tokens."""
    n, query = 2048, 1500
    scores = np.random.default_rng(0).normal(size=n).astype(np.float32)
    mask = np.arange(n) <= query
    scores[~mask] = np.finfo(np.float32).min
    keys = [f"Ġw{i}" for i in range(n)]
    shown = np.array([0, 7, 1500, 1501, 2047])
    figure = masked_scores(scores, mask, keys, "after the mask", shown)
    bars, marks = figure.data
    np.testing.assert_array_equal(bars.y, scores[[0, 7, 1500]])
    assert list(bars.customdata) == ["0: Ġw0", "7: Ġw7", "1500: Ġw1500"]
    assert list(marks.x) == [3, 4] and [row[1] for row in marks.customdata] == ["1501: Ġw1501", "2047: Ġw2047"]
    assert list(figure.layout.xaxis.ticktext) == ["0: Ġw0", "7: Ġw7", "1500: Ġw1500", "1501: Ġw1501", "2047: Ġw2047"]
    assert figure.layout.title.text == "after the mask: 5 of 2048 keys"
    whole = masked_scores(scores, mask, keys, "t")  # every key: thinned labels carry their positions
    assert len(whole.layout.xaxis.ticktext) <= 40 and whole.layout.xaxis.ticktext[1].startswith(
        f"{whole.layout.xaxis.tickvals[1]}: "
    )
