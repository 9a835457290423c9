"""Head statistics, labels, rollout, flow and word merging on hand-made matrices with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import analysis, trace
from tests import tolerance

TOKENS = ["[CLS]", "the", "cat", ",", "sat", "[SEP]"]


def one_head(matrix: np.ndarray) -> np.ndarray:
    return matrix[None, None]  # (1, 1, T, T)


def shifted(n: int, offset: int) -> np.ndarray:
    """Each query on position i + offset (clipped into range)."""
    m = np.zeros((n, n))
    for i in range(n):
        m[i, min(max(i + offset, 0), n - 1)] = 1
    return m


def test_previous_token_head():
    stats = analysis.head_statistics(one_head(shifted(6, -1)), TOKENS)
    assert stats["previous"][0, 0] == 1  # rows 1..5 all on i-1
    assert stats["self"][0, 0] == pytest.approx(1 / 6)  # row 0 has no previous: it sits on itself
    assert stats["next"][0, 0] == 0
    assert stats["entropy"][0, 0] == 0
    assert stats["distance"][0, 0] == pytest.approx(5 / 6)
    assert analysis.head_labels(stats, 6)[0, 0] == "previous token"


def test_uniform_head_is_broad_with_known_entropy_and_distance():
    stats = analysis.head_statistics(one_head(np.full((6, 6), 1 / 6)), TOKENS)
    assert stats["entropy"][0, 0] == pytest.approx(np.log(6))
    # mean |i - j| over a 6 x 6 grid = 35 / 18
    assert stats["distance"][0, 0] == pytest.approx(70 / 36)
    assert stats["cls"][0, 0] == pytest.approx(1 / 6) and stats["sep"][0, 0] == pytest.approx(1 / 6)
    assert stats["punctuation"][0, 0] == pytest.approx(1 / 6)
    assert analysis.head_labels(stats, 6)[0, 0] == "broad"


def test_sink_self_next_and_punctuation_heads():
    sink = np.zeros((6, 6))
    sink[:, 5] = 0.7
    sink[:, 0] = 0.3
    self_head, next_head = np.eye(6), shifted(6, 1)
    punct = np.zeros((6, 6))
    punct[:, 3] = 1
    weights = np.stack([sink, self_head, next_head, punct])[None]  # (1, 4, 6, 6)
    stats = analysis.head_statistics(weights, TOKENS)
    assert stats["sep"][0, 0] == pytest.approx(0.7) and stats["cls"][0, 0] == pytest.approx(0.3)
    assert stats["punctuation"][0, 3] == 1
    assert list(analysis.head_labels(stats, 6)[0]) == ["delimiter sink", "self", "next token", "punctuation"]


def test_statistics_reject_mismatched_tokens():
    with pytest.raises(ValueError):
        analysis.head_statistics(one_head(np.eye(3)), ["a", "b"])


def test_rollout_of_identity_attention_is_identity_and_of_uniform_is_uniform():
    eye = np.stack([np.eye(4)[None]] * 3)  # (3, 1, 4, 4)
    np.testing.assert_allclose(analysis.rollout(eye), np.stack([np.eye(4)] * 3))
    uniform = np.full((2, 2, 4, 4), 0.25)
    rolled = analysis.rollout(uniform)
    # one layer: 0.5 * 0.25 + 0.5 * I; two layers: that matrix squared
    first = 0.125 + 0.5 * np.eye(4)
    np.testing.assert_allclose(rolled[0], first)
    np.testing.assert_allclose(rolled[1], first @ first)
    np.testing.assert_allclose(rolled.sum(-1), 1)


def test_flow_through_one_layer_is_the_capacity_and_is_bounded_by_one():
    weights = np.array([[[[0.9, 0.1], [0.2, 0.8]]]])  # (1, 1, 2, 2)
    mixed = 0.5 * weights[0, 0] + 0.5 * np.eye(2)
    np.testing.assert_allclose(analysis.flow(weights), mixed)
    two = np.concatenate([weights, weights])
    flows = analysis.flow(two)
    assert (flows <= 1 + 1e-9).all() and (flows > 0).all()
    # with two layers, the flow from 0 to 1 is bounded by what can leave position 0 toward 1 in either path
    m = mixed
    assert flows[0, 1] == pytest.approx(min(m[0, 0], m[0, 1]) + min(m[0, 1], m[1, 1]))


def test_word_groups_and_merging_keep_rows_summing_to_one():
    tokens = ["[CLS]", "play", "##ing", "cat", "##s", "[SEP]"]
    word_ids = [None, 0, 0, 1, 1, None]
    groups = analysis.word_groups(word_ids)
    assert groups == [[0], [1, 2], [3, 4], [5]]
    assert analysis.merge_tokens(tokens, groups) == ["[CLS]", "playing", "cats", "[SEP]"]
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 6, 6))
    weights /= weights.sum(-1, keepdims=True)
    merged = analysis.merge_words(weights, groups, groups)
    assert merged.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(merged.sum(-1), 1)
    # word "playing" attending to word "cats": mean over query pieces 1, 2 of the sum over key pieces 3, 4
    expected = weights[..., [1, 2], :][..., [3, 4]].sum(-1).mean(-1)
    np.testing.assert_allclose(merged[..., 1, 2], expected)
    # two separate specials stay separate even though both have no word
    assert analysis.word_groups([None, None, 0]) == [[0], [1], [2]]


def test_max_abs_difference_per_head():
    from attention_explorer.explorer.run.reference_view import max_abs_difference

    ours = np.zeros((2, 3, 4, 4), np.float32)
    theirs = ours.copy()
    theirs[1, 2, 0, 3] = 0.25
    theirs[0, 0, 1, 1] = -1e-6
    diff = max_abs_difference(ours, theirs)
    assert diff.shape == (2, 3) and diff[1, 2] == 0.25 and diff[0, 0] == np.float32(1e-6) and diff[0, 1] == 0
    with pytest.raises(ValueError, match="shapes differ"):
        max_abs_difference(ours, theirs[:, :2])


def test_piece_groups_follow_wordpiece_spelling():
    tokens = ["[CLS]", "em", "##bed", "##s", "at", "##tend", "[SEP]"]
    assert analysis.piece_groups(tokens) == [[0], [1, 2, 3], [4, 5], [6]]
    assert analysis.merge_tokens(tokens, analysis.piece_groups(tokens)) == ["[CLS]", "embeds", "attend", "[SEP]"]
    assert analysis.piece_groups(["##x", "y"]) == [[0], [1]]  # a leading piece starts a word of its own


def test_at_word_level_of_a_real_trace(minilm):
    result = trace.run(minilm, "The embeddings attend", 16)
    weights, queries, keys = analysis.at_word_level(result, "encoder_self")
    assert queries == keys == ("[CLS]", "the", "embeddings", "attend", "[SEP]")
    # each softmax weight within its own rounding (reordered over n + 3 terms, of the weight); the word rows add up
    # pieces of one row (n terms more): within reordered(2n + 4) of 1 (tests/tolerance.py), a worst case of IEEE
    # roundings, nothing estimated: a row of a few keys stands at a few times its difference, and no machine crosses it
    n = result.encoder_self.weights.shape[-1]
    bound = tolerance.reordered(2 * n + 4, 1.0)
    tolerance.assert_within(weights.sum(-1), np.ones(weights.shape[:-1]), bound, "word rows sum to 1", worst_case=True)
    groups = analysis.word_groups(result.source_word_ids)
    np.testing.assert_array_equal(weights, analysis.merge_words(result.encoder_self.weights, groups, groups))


def test_flow_equals_a_float_max_flow_on_random_attention():
    networkx = pytest.importorskip("networkx")
    rng = np.random.default_rng(0)
    weights = rng.random((3, 2, 5, 5))
    weights /= weights.sum(-1, keepdims=True)
    graph = networkx.DiGraph()
    for layer, heads in enumerate(weights):
        mixed = analysis.residual_mixed(heads)
        for i in range(5):
            for j in range(5):
                graph.add_edge((layer + 1, i), (layer, j), capacity=float(mixed[i, j]))
    expected = [[networkx.maximum_flow_value(graph, (3, i), (0, j)) for j in range(5)] for i in range(5)]
    # float64 both, by different algorithms on 15 nodes: rounding is about 1e-15, far inside 1e-8
    np.testing.assert_allclose(analysis.flow(weights), expected, atol=1e-8)


BYTE_LEVEL = ["The", "Ġcapital", "Ġof", "ĠFrance", "Ġis"]  # SmolLM2's and GPT-2's: no marker around the text


def test_marker_names_are_the_models_own():
    assert analysis.marker_names(TOKENS)["cls"] == "[CLS]" and analysis.marker_names(TOKENS)["sep"] == "[SEP]"
    names = analysis.marker_names(BYTE_LEVEL)
    assert names["cls"] == analysis.FIRST_TOKEN and names["sep"] == analysis.NO_END
    said = " ".join(analysis.marker_descriptions(BYTE_LEVEL).values()) + " ".join(names.values())
    assert "[CLS]" not in said and "[SEP]" not in said and "<bos>" not in said
    assert analysis.marker_names(["<s>", "▁The"])["cls"] == "<s>"  # a Llama tokenizer that adds its start marker


def test_without_a_start_marker_the_first_share_is_the_first_tokens_attention_sink():
    sink = np.zeros((5, 5))
    sink[:, 0] = 0.8
    sink[np.arange(5), np.arange(5)] += 0.2
    sink[0, 0] = 1.0  # the first query sees only itself
    stats = analysis.head_statistics(one_head(sink), BYTE_LEVEL, BYTE_LEVEL)
    assert stats["cls"][0, 0] == pytest.approx((1.0 + 4 * 0.8) / 5) and stats["sep"][0, 0] == 0
    assert analysis.head_labels(stats, 5, analysis.FIRST_SINK)[0, 0] == "first-token sink"


def test_word_level_labels_are_readable(gpt2_folder):
    from attention_explorer.models import registry

    loaded = registry.from_path(str(gpt2_folder))
    result = trace.run(loaded, "a – b\n\nc")
    _, queries, keys = analysis.at_word_level(result, "decoder_self", loaded.family.word_start)
    assert queries == keys and any("–" in w for w in queries)  # a word's pieces joined, then decoded
    assert not any("â" in w or "Ġ" in w or "Ċ" in w for w in queries)


def test_punctuation_with_its_space_mark_counts_as_punctuation():
    # byte-level BPE writes " ," as "Ġ,", SentencePiece as "▁,", the pages as "␣,": each is a comma; a share of
    # attention on punctuation that skipped them under-counted every GPT-2 and SmolLM2 head
    for token in (",", "Ġ,", "▁.", "␣!", "Ġ...", "Ġ)."):
        assert analysis.is_punctuation(token), token
    for token in ("Ġ", "␣", "", "Ġthe", "Ġ,a", "the"):
        assert not analysis.is_punctuation(token), token
