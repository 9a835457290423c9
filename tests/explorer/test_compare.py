"""Lining two attention maps up and taking their difference, on hand-made inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.run import compare


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
