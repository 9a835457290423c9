"""Corpus statistics (explorer.run.corpus) are what their definitions say: equal to a direct numpy computation from
each text run alone by the explorer's own trace, on random toy models and on pretrained MiniLM and SmolLM2; a batch
equals its texts run alone within float32 rounding (padding masked); the sums add in any grouping; each layer's
weights are let go before the next layer runs; and one head's queries and keys project as one PCA says."""

from __future__ import annotations

import functools
import operator
import pickle
import weakref

import numpy as np
import pytest
import torch

from attention_explorer.explorer.run import corpus, corpus_input, corpus_points, corpus_stats, trace
from attention_explorer.models import induction, registry
from tests import tolerance

EPS64 = float(np.finfo(np.float64).eps)
# different lengths (MiniLM: 7 to 21 tokens) so one batch pads; a repeated span for the induction score; one text
# whose only token repeats nothing
TEXTS = (
    "The cat sat on the mat.",
    "When Mary and John went to the store, John gave a drink to Mary because she was thirsty.",
    "one two three four one two three four",
    "Hello",
    "The river rose quickly after the storm, and the footpath was closed.",
)


def direct(loaded, texts, max_tokens):
    """Each text run alone by the explorer's trace and every statistic computed from its float32 weights in float64
    numpy, straight from the definitions: {statistic: (per-text (N, L, H), pooled sum (L, H), count, rows)} where
    rows[i] holds text i's pooled terms (L, H, n_i) and its weights, for the bounds."""
    kind = corpus.kind_of(loaded)
    found = {name: ([], 0.0, 0) for name in corpus_stats.STATISTICS}
    runs = []
    for text in texts:
        run = trace.run(loaded, text, max_tokens)
        ids = loaded.tokenizer.encode(text, max_tokens).ids
        w = np.asarray(run.attention(kind).weights, dtype=np.float64)  # (L, H, T, T)
        t = np.arange(w.shape[-1])
        offsets = t[:, None] - t[None, :]
        distance = offsets if loaded.is_decoder_only else np.abs(offsets)
        targets = induction.induction_targets(ids)
        logs = np.log(np.where(w > 0, w, 1.0))  # 0 ln 0 = 0
        terms = {
            "previous_token": w[..., t[1:], t[1:] - 1],
            "first_token": w[..., :, 0],
            "self": w[..., t, t],
            "entropy": -(w * logs).sum(-1),
            "mean_distance": (w * distance).sum(-1),
            "induction": (w * targets).sum(-1)[..., targets.any(1)],
        }
        for name, rows in terms.items():
            values, total, count = found[name]
            values.append(rows.mean(-1) if rows.shape[-1] else np.full(w.shape[:2], np.nan))
            found[name] = (values, total + rows.sum(-1), count + rows.shape[-1])
        # the project's own scores of one text (models.induction) agree with the definitions used here
        expected_induction = induction.induction_scores(w, ids)
        np.testing.assert_array_equal(np.isnan(expected_induction), np.isnan(found["induction"][0][-1]))
        runs.append((run, w, ids))
    return {name: (np.stack(v), s, c) for name, (v, s, c) in found.items()}, runs


def weight_errors(loaded, run, w) -> np.ndarray:
    """(L, H, T, T) how far each weight of a batch row may be from the text's own run: each score within a whole
    forward's chain of float32 sums (probable, of |q| |k|^T), through the softmax (tests/tolerance.py)."""
    attention = run.attention(corpus.kind_of(loaded))
    q, k = np.abs(np.asarray(attention.q, np.float64)), np.abs(np.asarray(attention.k, np.float64))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    terms = tolerance.forward_terms(loaded.model.config, w.shape[-1])
    dz = tolerance.probable(terms, scores).max(-1, keepdims=True)
    return tolerance.probabilities_bound(w, dz)


def statistic_errors(loaded, run, w, ids) -> dict[str, np.ndarray]:
    """Per statistic, (L, H, n) each pooled term's bound from weight_errors: a term's weight error, times |t - k|
    for the distance and |ln A + 1| for the entropy (first order)."""
    dw = weight_errors(loaded, run, w)
    t = np.arange(w.shape[-1])
    targets = induction.induction_targets(ids)
    log_term = np.where(w > 0, np.abs(np.log(np.where(w > 0, w, 1.0)) + 1), 0.0)
    return {
        "previous_token": dw[..., t[1:], t[1:] - 1],
        "first_token": dw[..., :, 0],
        "self": dw[..., t, t],
        "entropy": (dw * log_term).sum(-1),
        "mean_distance": (dw * np.abs(t[:, None] - t[None, :])).sum(-1),
        "induction": (dw * targets).sum(-1)[..., targets.any(1)],
    }


def assert_equals_direct(loaded, stats: corpus_stats.CorpusStats, texts, max_tokens, batched: bool) -> None:
    """Every per-text value and pooled mean against direct(): alone (batch of one), the same float32 weights summed
    in float64 in another order (n eps64 of the terms' magnitude); batched, plus each weight's float32 bound."""
    expected, runs = direct(loaded, texts, max_tokens)
    assert stats.tokens == tuple(run.source_tokens for run, _, _ in runs)
    for s, name in enumerate(corpus_stats.STATISTICS):
        per_text, total, count = expected[name]
        assert stats.count(name) == count
        got = stats.text_values(name)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(per_text))
        scale = max(w.shape[-1] for _, w, _ in runs) ** 2  # terms under each row's sum, times its positions
        # per text: float64 sums of n <= T^2 terms of magnitude <= T (the distance's) and a float64 division, then one
        # rounding to float32 (half an eps of the value; a whole one, as the value it is measured against is itself
        # off by the sums')
        sums64 = scale * EPS64 * max(1.0, np.nanmax(np.abs(per_text)))
        round_off = sums64 + tolerance.EPS32 * np.abs(per_text)
        known = ~np.isnan(per_text)
        if batched:
            errors = [statistic_errors(loaded, run, w, ids)[name] for run, w, ids in runs]
            per_bound = np.stack([e.mean(-1) if e.shape[-1] else np.zeros(e.shape[:2]) for e in errors])
            pooled_bound = sum(e.sum(-1) for e in errors) / max(count, 1)
            tolerance.assert_within(
                np.where(known, got, 0), np.where(known, per_text, 0), round_off + per_bound, f"{name} per text"
            )
        else:
            pooled_bound = 0.0
            # alone, the same float32 weights: the float64 value is within sums64 of the definition's, and the
            # float32 rounding of it is IEEE's, monotone: so got is exactly a float32 between the nearest to the two
            # ends of that interval (usually one number), on every machine; a bound of that one rounding sat at 2x
            value = np.where(known, per_text, 0)
            low, high = np.float32(value - sums64), np.float32(value + sums64)
            got = np.where(known, got, 0).astype(np.float32)
            tolerance.assert_within(got, np.clip(got, low, high), 0.0, f"{name} per text, the float32 of a value")
        if count:
            mean = total / count
            bound = scale * len(texts) * EPS64 * max(1.0, np.abs(mean).max()) + pooled_bound
            tolerance.assert_within(stats.statistic(name), mean, bound, f"{name} pooled")
            assert stats.means[s].shape == (stats.n_layers, stats.n_heads)
        else:
            assert np.isnan(stats.statistic(name)).all()


def prepared(loaded, texts=TEXTS, max_tokens=64):
    return corpus_input.prepare(loaded, corpus_input.from_texts(texts), max_tokens)


@pytest.fixture(scope="module")
def minilm_random():
    """MiniLM's shape with random weights: an encoder (not causal) with the start marker [CLS]."""
    return registry.load("minilm-random")


@pytest.mark.parametrize("key", ["minilm_random", "gpt2", "llama"])
def test_statistics_are_their_definitions_on_random_toy_models(request, key):
    loaded = request.getfixturevalue(key)
    texts = TEXTS[:3] + TEXTS[4:] if key != "minilm_random" else TEXTS
    alone = corpus.run(loaded, prepared(loaded, texts), batch_size=1)
    assert_equals_direct(loaded, alone, texts, 64, batched=False)
    together = corpus.run(loaded, prepared(loaded, texts), batch_size=len(texts))
    assert_equals_direct(loaded, together, texts, 64, batched=True)
    # the batch really padded: its texts are of several lengths
    assert len({len(t) for t in together.tokens}) >= 3


@pytest.mark.parametrize("key", ["minilm", "smollm2"])
def test_statistics_are_their_definitions_on_pretrained_models(request, key):
    loaded = request.getfixturevalue(key)
    texts = TEXTS[:3]
    alone = corpus.run(loaded, prepared(loaded, texts, 32), batch_size=1)
    assert_equals_direct(loaded, alone, texts, 32, batched=False)
    together = corpus.run(loaded, prepared(loaded, texts, 32), batch_size=3)
    assert_equals_direct(loaded, together, texts, 32, batched=True)
    assert alone.causal is (key == "smollm2") and alone.kind == ("decoder_self" if key == "smollm2" else "encoder_self")
    if key == "minilm":  # the marker's column: every statistic's first token is [CLS]
        assert all(tokens[0] == "[CLS]" for tokens in alone.tokens)
    # a head of a pretrained model is not uniform: some head attends mostly to the previous token
    assert np.nanmax(together.statistic("previous_token")) > 0.5


def test_batch_equals_each_text_alone_within_float32_rounding(gpt2):
    """Per text, the batched run against the same corpus run one text a batch (not the direct numpy): the bound of
    weight_errors, through each statistic."""
    alone = corpus.run(gpt2, prepared(gpt2, TEXTS[:3]), batch_size=1)
    together = corpus.run(gpt2, prepared(gpt2, TEXTS[:3]), batch_size=3)
    _, runs = direct(gpt2, TEXTS[:3], 64)
    for name in corpus_stats.STATISTICS:
        errors = [statistic_errors(gpt2, run, w, ids)[name] for run, w, ids in runs]
        bound = np.stack([e.mean(-1) if e.shape[-1] else np.zeros(e.shape[:2]) for e in errors])
        a, b = alone.text_values(name), together.text_values(name)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        known = ~np.isnan(a)
        bound = bound + tolerance.EPS32 * np.abs(np.nan_to_num(a))  # each side rounded to float32 once
        tolerance.assert_within(np.where(known, b, 0), np.where(known, a, 0), bound, f"{name} batched")


def test_sums_add_in_any_grouping_and_order(gpt2):
    ready = prepared(gpt2)
    parts = [corpus.batch_sums(gpt2, b) for b in corpus.batches(ready, batch_size=2)]
    assert len(parts) == 3
    left = (parts[0] + parts[1]) + parts[2]
    right = parts[2] + (parts[1] + parts[0])
    one, other = corpus.finish(gpt2, ready, left), corpus.finish(gpt2, ready, right)
    np.testing.assert_array_equal(one.per_text, other.per_text)  # each text's own values: the same numbers, moved
    np.testing.assert_array_equal(one.counts, other.counts)
    # float64 sums of the same three parts in another order
    tolerance.assert_within(one.means, other.means, 3 * EPS64 * np.abs(one.means), "pooled means")
    whole = corpus.run(gpt2, ready, batch_size=2)
    np.testing.assert_array_equal(whole.per_text, one.per_text)
    with pytest.raises(ValueError, match="exactly once"):
        corpus.finish(gpt2, ready, parts[0] + parts[1])


def test_a_worker_elsewhere_gets_plain_values_and_sends_back_plain_values(gpt2):
    """What Dask, Ray or Spark would move between machines: batches in, sums out, each pickled on the way."""
    ready = prepared(gpt2)
    sent = [pickle.loads(pickle.dumps(b)) for b in corpus.batches(ready, batch_size=2)]
    back = [pickle.loads(pickle.dumps(corpus.batch_sums(gpt2, b))) for b in sent]
    found = corpus.finish(gpt2, ready, functools.reduce(operator.add, back))
    np.testing.assert_array_equal(found.per_text, corpus.run(gpt2, ready, batch_size=2).per_text)


def test_long_texts_are_reduced_a_block_of_rows_at_a_time(gpt2, monkeypatch):
    """ROWS query rows at a time (3 here: blocks that start inside a text, and a last one short) give each text's
    terms as the whole layer at once does: the same float64 operations on each row, summed in at most another order."""
    whole = corpus.run(gpt2, prepared(gpt2), batch_size=5)
    monkeypatch.setattr(corpus, "ROWS", 3)
    blocks = corpus.run(gpt2, prepared(gpt2), batch_size=5)
    longest = max(len(t) for t in whole.tokens)
    assert longest % 3 and longest > 6
    np.testing.assert_array_equal(np.isnan(blocks.per_text), np.isnan(whole.per_text))
    known = ~np.isnan(whole.per_text)
    bound = longest**2 * EPS64 * np.abs(whole.per_text[known]) + tolerance.EPS32 * np.abs(whole.per_text[known])
    tolerance.assert_within(blocks.per_text[known], whole.per_text[known], bound, "per text, by blocks of rows")
    tolerance.assert_within(blocks.means, whole.means, longest**2 * EPS64 * np.abs(whole.means), "pooled")


def test_each_layer_s_weights_are_let_go_before_the_next_layer_runs(llama):
    ready = prepared(llama)
    batch = corpus.batches(ready, batch_size=8)[0]
    ids, lengths = corpus.padded(batch)
    held: list[weakref.ref] = []

    def read(layer, attention):
        assert all(ref() is None for ref in held), f"an earlier layer's weights are still held at layer {layer}"
        held.append(weakref.ref(attention.weights))

    corpus.each_layer(llama, ids, lengths, read)
    assert len(held) == len(llama.model.decoder.layers)


def test_progress_and_admission_are_told_of_every_batch(gpt2):
    ready = prepared(gpt2)
    told, admitted = [], []

    class Admit:
        def __init__(self, seconds, nbytes):
            admitted.append((seconds, nbytes))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    corpus.run(gpt2, ready, batch_size=2, progress=lambda done, total: told.append((done, total)), admit=Admit)
    assert told == [(2, 5), (4, 5), (5, 5)]
    batches = corpus.batches(ready, 2, gpt2.model.decoder.layers[0].self_attn.n_heads)
    expected = [corpus.batch_cost(gpt2, len(b), max(map(len, b.ids))) for b in batches]
    assert admitted == [(c.seconds, c.bytes) for c in expected]
    whole = corpus.corpus_cost(gpt2, ready, 2)
    assert whole.seconds == pytest.approx(sum(c.seconds for c in expected))
    assert whole.bytes == max(c.bytes for c in expected)


def test_cost_grows_with_the_batch_and_counts_one_layer_s_weights(minilm):
    config = minilm.model.config
    small, rows, longer = (corpus.batch_cost(minilm, r, t) for r, t in ((8, 32), (16, 32), (8, 64)))
    assert small.seconds < rows.seconds and small.seconds < longer.seconds
    assert small.bytes < rows.bytes and small.bytes < longer.bytes
    # at least one layer's (B, H, T, T) float32 weights of the batch
    assert small.bytes > 8 * config.n_heads * 32 * 32 * 4


def test_batches_sort_by_length_and_keep_one_layer_s_weights_under_the_limit(minilm, monkeypatch):
    ready = prepared(minilm)
    found = corpus.batches(ready, batch_size=2)
    order = [i for b in found for i in b.index]
    assert sorted(order) == list(range(len(TEXTS)))
    assert [len(ready.encodings[i]) for i in order] == sorted(len(e) for e in ready.encodings)
    longest = max(len(e) for e in ready.encodings)
    monkeypatch.setattr(corpus, "BATCH_BYTES", 2 * 12 * longest * longest * 4)  # two rows of the longest text
    capped = corpus.batches(ready, batch_size=5, n_heads=12)
    assert all(len(b) * 12 * max(map(len, b.ids)) ** 2 * 4 <= corpus.BATCH_BYTES for b in capped)
    assert len(capped) < len(TEXTS) and len(capped[-1]) <= 2  # shorter texts still share a batch
    with pytest.raises(ValueError, match="at least 1"):
        corpus.batches(ready, batch_size=0)


def test_rows_top_texts_and_readable_tokens(smollm2):
    stats = corpus.run(smollm2, prepared(smollm2, TEXTS[:3], 32), batch_size=3)
    rows = stats.rows()
    assert len(rows) == 30 * 9 and tuple(rows[0]) == corpus_stats.COLUMNS
    assert (rows[10]["layer"], rows[10]["head"]) == (1, 1)
    assert rows[10]["self"] == stats.statistic("self")[1, 1]
    assert rows[0]["positions"] == sum(len(t) for t in stats.tokens)
    assert rows[0]["previous_positions"] == sum(len(t) - 1 for t in stats.tokens)
    # "The cat sat on the mat." repeats no token ("The" and "Ġthe" differ): no induction value, so never ranked
    induction_values = stats.text_values("induction")
    assert np.isnan(induction_values[0]).all() and not np.isnan(induction_values[1:]).any()
    top = stats.top_texts("induction", 5, 0, k=3)
    assert sorted(i for i, _ in top) == [1, 2]
    assert [v for _, v in top] == sorted(induction_values[1:, 5, 0].tolist(), reverse=True)
    assert stats.readable_tokens[0][:2] == ("The", "\u2423cat")
    document = stats.document()
    assert document["columns"] == list(corpus_stats.COLUMNS) and len(document["rows"]) == 270
    with pytest.raises(ValueError, match="unknown statistic"):
        stats.statistic("attention")


def test_query_key_points_are_the_trace_s_queries_and_keys_by_one_pca(llama):
    """A text a batch: each text's q and k are its trace's bit for bit, so the points are project()'s of them."""
    ready = prepared(llama, TEXTS[:3])
    points = corpus_points.query_key_points(llama, ready, layer=1, head=4, batch_size=1)
    runs = [trace.run(llama, text, 64).attention("decoder_self") for text in TEXTS[:3]]
    q = np.concatenate([np.asarray(r.q[1])[4] for r in runs])  # (N, Dh) float32
    k = np.concatenate([np.asarray(r.k[1])[4] for r in runs])
    assert points.queries.shape == points.keys.shape == (len(q), 2)
    assert points.text.tolist() == [i for i, r in enumerate(runs) for _ in range(r.mask.shape[0])]
    assert points.position.tolist() == [p for r in runs for p in range(r.mask.shape[0])]
    assert points.tokens == tuple(t for e in ready.encodings for t in e.tokens)
    queries, keys, share = corpus_points.project(q, k)
    np.testing.assert_array_equal(points.queries, queries)
    np.testing.assert_array_equal(points.keys, keys)
    np.testing.assert_array_equal(points.explained, share)
    assert points.explained[0] >= points.explained[1] > 0
    with pytest.raises(ValueError, match="layer 2 of 2"):
        corpus_points.query_key_points(llama, ready, layer=2, head=0)


def test_projection_is_one_pca_over_queries_and_keys_together():
    generator = np.random.default_rng(0)
    queries = generator.normal(size=(50, 8)) + 3.0
    keys = generator.normal(size=(30, 8)) * 0.5 - 1.0
    q2, k2, share = corpus_points.project(queries, keys)
    both = np.concatenate([queries, keys])
    centred = both - both.mean(0)
    # the joint points are centred, their axes orthogonal, and the first holds the most variance
    points = np.concatenate([q2, k2])
    np.testing.assert_allclose(points.mean(0), 0, atol=1e-12)
    assert abs(points[:, 0] @ points[:, 1]) <= 80 * 8 * EPS64 * (points**2).sum()  # float64 rounding of zero
    assert points[:, 0].var() >= points[:, 1].var()
    # its first axis separates the two clouds (their means differ along it by far more than their spread)
    assert abs(q2[:, 0].mean() - k2[:, 0].mean()) > 5
    # the shares are the two axes' variance over all of it (float64 sums of 80 x 8 terms)
    bound = 80 * 8 * EPS64 * share
    tolerance.assert_within(share, (points**2).sum(0) / (centred**2).sum(), bound, "explained shares")


@torch.inference_mode()
def test_the_padded_batch_masks_padding_whatever_id_it_holds(gpt2):
    """Right padding with id 0 (a real GPT-2 token): the masks come from the lengths, so a padded row's real
    positions see no padding; the weights on padded keys are exactly 0."""
    ready = prepared(gpt2, TEXTS[:2])
    batch = corpus.batches(ready, batch_size=2)[0]
    ids, lengths = corpus.padded(batch)
    assert (ids[0, lengths[0] :] == 0).all() and lengths[0] < lengths[1]
    seen = []
    corpus.each_layer(gpt2, ids, lengths, lambda i, a: seen.append(a.weights[0, :, :, lengths[0] :].clone()))
    assert all(bool((w[:, : lengths[0]] == 0).all()) for w in seen)
