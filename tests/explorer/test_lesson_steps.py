"""Lesson steps 1 (tokens and ids) and 9 (why attention): token kinds and counts, table 1's values, their figures."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pytest

from attention_explorer.explorer.figures.complexity import operations
from attention_explorer.explorer.figures.tokens import COLOURS, SHOWN, token_boxes
from attention_explorer.explorer.run import complexity, tokens_view
from attention_explorer.models import registry, tasks
from attention_explorer.models.families import descriptor
from tests.figdata import array
from tests.hostile import NAMED

PIECES = "Tokenization of embeddings didn't work 🙂 ok."
# [CLS] token ##ization of em ##bed ##ding ##s didn ' t work [UNK] ok . [SEP]
PIECES_KINDS = ["special", *["piece of a word"] * 2, "whole word", *["piece of a word"] * 4]
PIECES_KINDS += [*["whole word"] * 4, "unknown", "whole word", "whole word", "special"]


@pytest.fixture(scope="module")
def word_piece():
    return registry.load_bert_folder_tokenizer()


@pytest.fixture(scope="module")
def words():
    return tasks.get("translate").source


def test_kinds_of_a_word_piece_sentence_with_pieces_and_unknown(word_piece):
    enc = word_piece.encode(PIECES, 128)
    assert enc.tokens[1:3] == ("token", "##ization") and enc.tokens[12] == "[UNK]"
    assert tokens_view.kinds(enc.tokens, enc.word_ids) == PIECES_KINDS
    rows = tokens_view.rows(PIECES, enc.tokens, enc.ids, enc.offsets, enc.word_ids)
    assert [r.id for r in rows] == list(enc.ids) and [r.position for r in rows] == list(range(len(enc.ids)))
    assert rows[12].text == "🙂" and rows[2].text == "ization" and rows[0].text == rows[-1].text == ""


def test_the_spelling_fallback_finds_the_tokenizers_words(word_piece):
    enc = word_piece.encode("embeddings of tokenization", 128)
    assert tokens_view.word_ids_of(enc.tokens, ()) == list(enc.word_ids)
    assert tokens_view.kinds(enc.tokens, ()) == tokens_view.kinds(enc.tokens, enc.word_ids)


def test_counts_explain_words_to_tokens_term_by_term(word_piece):
    enc = word_piece.encode(PIECES, 128)
    found = tokens_view.counts(PIECES, enc.tokens, enc.offsets, enc.word_ids, enc.truncated)
    assert (found.words, found.units, found.tokens) == (7, 10, 16)
    assert (found.pieces, found.split_words, found.unknown, found.special) == (6, 2, 1, 2)
    assert found.summary == "7 words became 16 tokens (6 pieces, 1 unknown, 2 special)."
    terms = found.why.split(" = ")[0].split(" + ")
    assert sum(int(re.match(r"\d+", t).group()) for t in terms) == 16
    assert "16 tokens" in found.why and "[UNK]" in found.why


@pytest.mark.parametrize("max_tokens", [6, 32, 512])
def test_the_terms_add_up_for_hostile_text(word_piece, max_tokens):
    for text in [t for t in NAMED if t.strip()]:
        enc = word_piece.encode(text, max_tokens)
        found = tokens_view.counts(text, enc.tokens, enc.offsets, enc.word_ids, enc.truncated)
        terms = found.why.split(" = ")[0].split(" + ")
        assert sum(int(re.match(r"\d+", t).group()) for t in terms) == found.tokens == len(enc.tokens), text
        assert found.words <= len(text.split()) and found.units >= found.words


def test_a_cut_text_counts_only_the_words_read(word_piece):
    enc = word_piece.encode(PIECES, 6)  # [CLS] token ##ization of em [SEP]
    found = tokens_view.counts(PIECES, enc.tokens, enc.offsets, enc.word_ids, enc.truncated)
    assert (found.words, found.tokens, found.truncated) == (3, 6, 10)
    assert "10 more tokens were cut" in found.summary


def test_the_toy_vocabulary_has_no_pieces(words):
    text = "The small red cat sees a big dog"
    enc = words.encode(text, 32)
    assert tokens_view.kinds(enc.tokens, enc.word_ids) == ["whole word"] * 8 + ["special"]
    found = tokens_view.counts(text, enc.tokens, enc.offsets, enc.word_ids, 0)
    assert (found.words, found.units, found.tokens, found.pieces, found.special) == (8, 8, 9, 0, 1)
    assert found.why == "8 words split at spaces + 1 special token the tokenizer adds = 9 tokens."
    notes = " ".join(tokens_view.notes(enc.tokens, False, words.vocab_size, ("<bos>", "<eos>")))
    assert "fixed list" in notes and "<eos>" in notes and "<bos>" in notes
    assert "##" not in notes and "[CLS]" not in notes


def test_word_piece_notes_name_only_what_the_tokens_have(word_piece):
    with_unknown = word_piece.encode(PIECES, 128).tokens
    without = word_piece.encode("the cat", 128).tokens
    # the page names '##' pieces when the model's family spells them so: WordPiece's mark is the one it explains
    assert descriptor.WORDPIECE_MARKS["continuation"] == tokens_view.CONTINUES
    lines = tokens_view.notes(with_unknown, True, word_piece.vocab_size)
    assert any(line.startswith("[CLS]") for line in lines) and any(line.startswith("[SEP]") for line in lines)
    assert any("##" in line for line in lines) and any(line.startswith("[UNK]") for line in lines)
    assert not any("[UNK]" in line for line in tokens_view.notes(without, True, word_piece.vocab_size))
    assert not any("<eos>" in line or "fixed list" in line for line in lines)


def test_count_options_hold_the_answer_once_in_a_fixed_order(word_piece):
    enc = word_piece.encode(PIECES, 128)
    found = tokens_view.counts(PIECES, enc.tokens, enc.offsets, enc.word_ids, 0)
    options = tokens_view.count_options(found, PIECES)
    assert len(set(options)) == 4 and options.count(16) == 1 and 7 in options and all(o > 0 for o in options)
    assert tokens_view.count_options(found, PIECES) == options
    places = {tokens_view.count_options(found, f"sentence {i}").index(16) for i in range(20)}
    assert len(places) > 1  # shuffled: the answer is not always in the same place


def test_table_1_values_are_the_formulas():
    for n, d in ((16, 384), (11, 96), (600, 512), (1, 1)):
        rows = {r.complexity: r for r in complexity.table(n, d)}
        assert rows["n²·d"].operations == n**2 * d and rows["n·d²"].operations == n * d**2
        assert rows["k·n·d²"].operations == 3 * n * d**2 and rows["r·n·d"].operations == 4 * n * d
        assert [r.sequential_steps for r in rows.values()] == [1, n, 1, 1]
        paths = [r.path_length for r in rows.values()]
        assert paths[:2] == [1, n] and paths[2] == pytest.approx(math.log(n) / math.log(3)) and paths[3] == n / 4
    assert complexity.table(9, 8, k=3)[2].path_length == pytest.approx(2)
    with pytest.raises(ValueError):
        complexity.table(0, 384)


def test_fewer_operations_switches_at_n_equals_d():
    assert complexity.fewer(16, 384) == complexity.SELF
    assert complexity.fewer(600, 512) == complexity.RECURRENT
    assert complexity.fewer(96, 96) == complexity.SAME
    assert complexity.self_attention_ops(96, 96) == complexity.recurrent_ops(96, 96)


def test_token_boxes_draw_the_first_tokens_escaped_with_their_ids_and_kinds():
    tokens = [f"w{i}" for i in range(30)]
    tokens[1], tokens[2] = "<b>", "[UNK]"
    ids = list(range(100, 130))
    kinds = ["special", "whole word", "unknown", *["piece of a word"] * 26, "special"]
    fig = token_boxes(tokens, ids, kinds, focus=3).to_dict()
    drawn = fig["data"][0]
    assert [c[3] for c in drawn["customdata"]] == [html.escape(t) for t in tokens[:SHOWN]]
    assert [c[1] for c in drawn["customdata"]] == ids[:SHOWN] and list(fig["data"][1]["text"]) == list(
        map(str, ids[:SHOWN])
    )
    assert drawn["text"][1] == "&lt;b&gt;" and all("<" not in t for t in drawn["text"])
    shapes = fig["layout"]["shapes"]
    assert [s["fillcolor"] for s in shapes] == [COLOURS[k] for k in kinds[:SHOWN]]
    assert [s["line"]["width"] for s in shapes].index(4) == 3 and sum(s["line"]["width"] == 4 for s in shapes) == 1
    legend = [t["name"] for t in fig["data"][2:]]
    assert legend == ["special", "whole word", "piece of a word", "unknown", "the lesson's focused token"]
    assert set(COLOURS) == set(tokens_view.KINDS)
    assert all(t["textfont"]["size"] >= 15 for t in fig["data"][:2])


def test_token_boxes_of_a_short_sentence_without_focus():
    fig = token_boxes(["[CLS]", "hi", "[SEP]"], [101, 7632, 102], ["special", "whole word", "special"]).to_dict()
    assert len(fig["layout"]["shapes"]) == 3 and all(s["line"]["width"] == 1 for s in fig["layout"]["shapes"])
    assert [t["name"] for t in fig["data"][2:]] == ["special", "whole word"]


def test_operations_figure_draws_both_curves_the_sentence_and_the_crossover():
    n, a, b = complexity.curves(384, complexity.axis_end(16, 384, 512))
    assert n[0] == 1 and n[-1] == 10_000 and np.all(np.diff(n) > 0)
    fig = operations(n, a, b, 16, 384, 512).to_dict()
    np.testing.assert_array_equal(array(fig["data"][0]["y"]), array(fig["data"][0]["x"]).astype(np.int64) ** 2 * 384)
    np.testing.assert_array_equal(array(fig["data"][1]["y"]), array(fig["data"][1]["x"]).astype(np.int64) * 384**2)
    assert list(fig["data"][2]["x"]) == [16, 16] and list(fig["data"][2]["y"]) == [16**2 * 384, 16 * 384**2]
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"
    assert fig["layout"]["shapes"][0]["x0"] == 384
    assert "n = d = 384" in fig["layout"]["annotations"][0]["text"]
    assert fig["layout"]["annotations"][0]["y"] == pytest.approx(3 * math.log10(384))


def test_a_byte_level_note_says_a_start_marker_only_where_the_tokenizer_adds_one():
    # a Llama tokenizer puts <s> before the text; GPT-2's and SmolLM2's add nothing
    marked = " ".join(tokens_view.notes(["<s>", "▁The", "▁cat"], False, 32000, word_start="▁"))
    assert "<s> is put before the text" in marked and "no marker tokens" not in marked
    bare = " ".join(tokens_view.notes(["The", "Ġcat"], False, 50257, word_start="Ġ"))
    assert "no marker tokens are added around the text" in bare and "<s>" not in bare
