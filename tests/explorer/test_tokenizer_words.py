"""The lesson's tokens line says the tokenizer's kind as the model's family descriptor names it, never by how its
tokens are spelt: one sentence per kind, the same for every model of that kind."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from attention_explorer.explorer.lesson import then_and_now
from attention_explorer.models.config import PAPER_BASE
from attention_explorer.models.families import descriptor

CONFIG = replace(PAPER_BASE, vocab_size=1234)


def tokens_line(marks: dict, config=CONFIG) -> str:
    family = descriptor.for_config(config, "some family", "random", **marks)
    return then_and_now.now(SimpleNamespace(family=family, model=SimpleNamespace(config=config)), "tokens")


@pytest.mark.parametrize(
    ("marks", "said"),
    [
        (descriptor.BYTE_BPE_MARKS, "byte-level BPE of 1,234 tokens: any text can be read"),
        (descriptor.SENTENCEPIECE_MARKS, "a SentencePiece BPE of 1,234 tokens ('▁' marks a token that starts a word)"),
        (descriptor.WORDPIECE_MARKS, "WordPiece of 1,234 tokens ('##' marks a piece that continues a word)"),
        (descriptor.WORD_LIST_MARKS, "whole words, a vocabulary of 1,234"),
    ],
    ids=["byte-level", "sentencepiece", "wordpiece", "word-list"],
)
def test_each_kind_of_tokenizer_has_its_sentence(marks, said):
    assert tokens_line(marks) == said


def test_the_kind_not_the_spelling_decides():
    """A descriptor that names no kind is read as whole words, whatever marks it carries."""
    assert tokens_line({"word_start": "Ġ", "continuation": "##"}) == "whole words, a vocabulary of 1,234"
    target = replace(CONFIG, tgt_vocab_size=99, share_embeddings=False)
    assert tokens_line(descriptor.WORD_LIST_MARKS, target) == "whole words: 1,234 source words and 99 target words"
