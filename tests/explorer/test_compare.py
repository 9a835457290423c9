"""Lining two attention maps up and taking their difference, on hand-made inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from attention_explorer.explorer.run import compare
from tests import tolerance


def test_by_position_pairs_up_to_the_shorter_and_names_the_rest():
    alignment = compare.by_position(["[CLS]", "the", "cat", "[SEP]"], ["[CLS]", "the", "cats", "sat", "[SEP]"])
    assert alignment.a == alignment.b == (0, 1, 2, 3)
    assert alignment.labels == ("[CLS]", "the", "cat / cats", "[SEP] / sat")
    assert alignment.unmatched_a == () and alignment.unmatched_b == ("[SEP]",)


def test_by_word_lines_up_a_minimal_pair_completely():
    a = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    b = ["[CLS]", "the", "cats", "sat", "[SEP]"]
    alignment = compare.by_word(a, b)
    assert alignment.a == alignment.b == (0, 1, 2, 3, 4)
    assert alignment.labels[2] == "cat / cats"


def test_by_word_skips_an_inserted_word():
    a = ["[CLS]", "the", "cat", "sat", "[SEP]"]
    b = ["[CLS]", "the", "black", "cat", "sat", "[SEP]"]
    alignment = compare.by_word(a, b)
    assert alignment.a == (0, 1, 2, 3, 4) and alignment.b == (0, 1, 3, 4, 5)
    assert alignment.unmatched_b == ("black",) and alignment.unmatched_a == ()


def test_difference_is_a_minus_b_over_aligned_positions():
    a = np.arange(9, dtype=np.float32).reshape(1, 3, 3)
    b = np.arange(16, dtype=np.float32).reshape(1, 4, 4) * 10
    alignment = compare.Alignment(a=(0, 2), b=(1, 3), labels=("x", "y"))
    expected = np.array(
        [[[a[0, 0, 0] - b[0, 1, 1], a[0, 0, 2] - b[0, 1, 3]], [a[0, 2, 0] - b[0, 3, 1], a[0, 2, 2] - b[0, 3, 3]]]]
    )
    np.testing.assert_array_equal(compare.difference(a, b, alignment), expected)
    np.testing.assert_array_equal(compare.difference(a, a, compare.by_position("abc", "abc")), np.zeros((1, 3, 3)))


@pytest.mark.parametrize("tokens", [[], ["only"]])
def test_alignment_of_tiny_inputs(tokens):
    assert compare.by_word(tokens, tokens).a == tuple(range(len(tokens)))


def test_left_out_names_both_sides_or_nothing():
    assert compare.left_out(compare.by_position("ab", "ab")) == ""
    assert compare.left_out(compare.by_position(["x", "y", "z"], ["x"])) == "A: y, z; B: nothing."
    assert compare.left_out(compare.by_word(["a", "b"], ["a", "b", "c", "d"])) == "A: nothing; B: c, d."


def test_changed_most_is_each_heads_largest_difference_with_its_text():
    difference = np.zeros((2, 3, 4, 4))
    difference[1, 2, 0, 3] = -0.123456
    worst, cells = compare.changed_most(difference)
    assert worst.shape == cells.shape == (2, 3)
    assert worst[1, 2] == 0.123456 and worst.sum() == 0.123456
    assert cells[1, 2] == "0.123" and cells[0, 0] == "0"


def test_sentence_b_starts_with_a_change_inside_what_the_model_reads(minilm):
    from bench.inputs import text_of

    long = text_of(minilm, 512)  # the same sentence many times over: its last words fall past the cut
    twin = compare.first_variant(minilm, long, 512)
    a, b = minilm.tokenizer.encode(long, 512).ids, minilm.tokenizer.encode(twin, 512).ids
    assert twin != long and a != b  # the change lands inside the 512 tokens the model reads
    assert sum(x != y for x, y in zip(long.split(" "), twin.split(" "), strict=True)) == 1
    short = "Bark is very cute and he is a dog"
    assert compare.first_variant(minilm, short, 128) == compare.variants(short)[0]


def test_a_very_long_sentence_b_changes_a_word_the_model_reads(minilm):
    long = "word " * 20_000  # 100,000 characters: only the first words can matter
    twin = compare.first_variant(minilm, long, 64)
    assert twin != long and len(twin.split(" ")) == len(long.split(" "))
    assert minilm.tokenizer.encode(twin, 64).ids != minilm.tokenizer.encode(long, 64).ids


@pytest.mark.parametrize("line_up", ["position", "word"])
def test_largest_changes_in_float32_are_the_float64_ones_rounded(line_up):
    """max |A - B| per head subtracted in float32, a layer and a head at a time: rounding is monotone and symmetric,
    so each maximum is the float64 one rounded to float32, exactly."""
    rng = np.random.default_rng(0)
    a = rng.dirichlet(np.ones(7), size=(3, 4, 7)).astype(np.float32)  # (L, H, T, T) rows summing to 1
    b = rng.dirichlet(np.ones(6), size=(3, 4, 6)).astype(np.float32)
    if line_up == "word":
        alignment = compare.by_word(list("abcdefg"), list("abxdfg"))  # a replaced and a deleted word
    else:
        alignment = compare.by_position(list("abcdefg"), list("abcdef"))
    steps = []
    worst = compare.largest_changes(a, b, alignment, lambda *s: steps.append(s))
    exact, _ = compare.changed_most(compare.difference(a, b, alignment))  # float64, every layer at once
    # exact, bound 0: IEEE rounds each float32 subtraction correctly and the maximum only picks one of them, so no
    # bound of a rounding is needed (the check that worst is within 2^-24 of exact is implied, and sat at ~1x)
    tolerance.assert_within(worst, exact.astype(np.float32), 0.0, "largest changes: the float64 ones rounded")
    assert steps == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("head", [2, -1])  # one head, and the mean over heads
def test_one_heads_difference_equals_that_head_of_every_layers(head):
    rng = np.random.default_rng(1)
    a, b = rng.random((2, 5, 6, 6), dtype=np.float32), rng.random((2, 5, 6, 6), dtype=np.float32)
    alignment = compare.Alignment(a=(0, 2, 3), b=(1, 2, 5), labels=("x", "y", "z"))
    whole = compare.layer_differences(a, b, alignment)
    expected = whole[1].mean(axis=0) if head == -1 else whole[1, head]
    np.testing.assert_array_equal(compare.head_difference(a, b, alignment, 1, head), expected)


def test_lined_up_by_position_is_a_view_not_a_copy():
    weights = np.zeros((2, 5, 5), np.float32)
    assert np.shares_memory(compare.aligned(weights, (0, 1, 2)), weights)
    np.testing.assert_array_equal(compare.aligned(np.arange(25).reshape(5, 5), (0, 1)), [[0, 1], [5, 6]])
