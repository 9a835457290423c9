"""Tokens as text a class can read (models.tokenize.Spelling): byte-level BPE decoded from GPT-2's byte alphabet, the
space and line break as marks, a piece of a character as its bytes; WordPiece and marker tokens as written."""

from __future__ import annotations

import pytest

from attention_explorer.models.config import TransformerConfig
from attention_explorer.models.families import descriptor as family
from attention_explorer.models.tokenize import NEWLINE_MARK, SPACE_MARK, Spelling

BYTE_LEVEL = Spelling("Ġ", ("<|endoftext|>", "<filename>"))
SENTENCEPIECE = Spelling("▁", ("<s>", "</s>"))
WORDPIECE = Spelling("", ("[CLS]", "[SEP]"))


@pytest.mark.parametrize(
    ("token", "shown"),
    [
        ("The", "The"),  # a first word carries no space
        ("Ġcapital", "␣capital"),
        ("Ċ", "↵"),
        ("ĊĊ", "↵↵"),
        ("ĠâĢĵ", "␣–"),  # an en dash: three bytes, one character
        ("ĠĠĠĠĠĠĠĠĠ", "␣" * 9),  # a first token of nine spaces
        ("ĠcafÃ©", "␣café"),
        ("ĠðŁĻĤ", "␣🙂"),
        ("æľ¬", "本"),
        ("æĹ", "<0xE6><0x97>"),  # the first two bytes of 日 (SmolLM2 splits it 'æĹ' + '¥')
        ("¥", "<0xA5>"),  # ... and its last byte
        ("âĢ", "<0xE2><0x80>"),
        ("ĉ", "⇥"),
        ("Ġ-", "␣-"),
        ("<filename>", "<filename>"),  # a marker token of the vocabulary stays as written
        ("<|endoftext|>", "<|endoftext|>"),
    ],
)
def test_byte_level_tokens_read_as_text(token, shown):
    assert BYTE_LEVEL.readable(token) == shown
    assert "Ġ" not in BYTE_LEVEL.readable(token) and "Ċ" not in BYTE_LEVEL.readable(token)


def test_the_marks_are_not_characters_a_text_holds_and_are_one_each():
    assert (SPACE_MARK, NEWLINE_MARK) == ("␣", "↵")
    assert BYTE_LEVEL.marks and SENTENCEPIECE.marks and not WORDPIECE.marks
    assert SPACE_MARK in BYTE_LEVEL.legend() and NEWLINE_MARK in BYTE_LEVEL.legend() and WORDPIECE.legend() == ""


def test_sentencepiece_gets_the_same_space_mark_and_its_byte_tokens_decoded():
    assert SENTENCEPIECE.labels(["<s>", "▁The", "▁capital", "<0x0A>", "<0xE2>"]) == (
        "<s>",
        "␣The",
        "␣capital",
        "↵",
        "<0xE2>",  # a byte of a longer character: as written, the same spelling as a byte-level piece's
    )


def test_wordpiece_tokens_keep_their_convention():
    tokens = ["[CLS]", "the", "café", "play", "##ing", "[SEP]"]  # 'é' is a byte of GPT-2's alphabet: never decoded
    assert WORDPIECE.labels(tokens) == tuple(tokens)


def test_a_family_gives_its_spelling():
    gpt2 = TransformerConfig(vocab_size=8, d_model=8, n_heads=2, n_encoder_layers=0, norm_first=True)
    described = family.for_config(gpt2, "GPT-2 family", "pretrained", **family.BYTE_BPE_MARKS)
    assert described.spelling == Spelling("Ġ", ("<|endoftext|>",))
    bert_config = TransformerConfig(vocab_size=8, d_model=8, n_heads=2, n_decoder_layers=0)
    bert = family.for_config(bert_config, "BERT family", "pretrained", **family.WORDPIECE_MARKS)
    assert bert.spelling.readable("##ing") == "##ing"


@pytest.mark.slow
def test_smollm2_tokens_read_back_as_the_text_with_marks(smollm2):
    text = "The capital – of\n\nFrance is         here 日本"
    encoding = smollm2.tokenizer.encode(text, 64)
    assert "ĠâĢĵ" in encoding.tokens and "Ċ" in encoding.tokens  # the tokenizer's own raw spelling
    shown = smollm2.family.spelling.labels(encoding.tokens)
    assert "␣–" in shown and "↵" in shown and not any("Ġ" in t or "Ċ" in t for t in shown)
    # every whole character comes back: the marks undone, the labels are the text (日 is split over two tokens)
    joined = "".join(shown).replace("␣", " ").replace("↵", "\n")
    assert joined.replace("<0xE6><0x97><0xA5>", "日") == text
