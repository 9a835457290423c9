"""Toy tasks: deterministic generators, disjoint splits, vocabularies that round-trip, known alignments."""

from __future__ import annotations

import random

import pytest

from models import lexicon, tasks


def _translations() -> set[tuple[str, str]]:
    """Every (english, french) word pair the lexicon allows."""
    allowed = set(lexicon.PREPOSITIONS.items())
    for det, (_, singular, plural) in lexicon.DETERMINERS.items():
        allowed |= {(det, f) for f in (*(singular or ()), *([plural] if plural else []))}
    for en_sg, en_pl, fr_sg, fr_pl, _ in lexicon.NOUNS:
        allowed |= {(en_sg, fr_sg), (en_pl, fr_pl)}
    for en, m, f in lexicon.ADJECTIVES:
        allowed |= {(en, w) for w in (m, f, lexicon.french_plural(m), lexicon.french_plural(f))}
    for en_sg, en_pl, fr_sg, fr_pl in lexicon.VERBS:
        allowed |= {(en_sg, fr_sg), (en_pl, fr_pl)}
    return allowed


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_generators_are_deterministic_given_a_seed(name):
    task = tasks.get(name)
    assert tasks.pairs(task, 50, seed=3) == tasks.pairs(task, 50, seed=3)
    assert tasks.pairs(task, 50, seed=3) != tasks.pairs(task, 50, seed=4)
    first = [task.sample(random.Random(7)) for _ in range(3)]
    assert first[0] == first[1] == first[2]


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_training_and_heldout_sets_never_overlap(name):
    task = tasks.get(name)
    train = {p.source for p in tasks.pairs(task, 3000, seed=0, split="train")}
    heldout = {p.source for p in tasks.pairs(task, 300, seed=1, split="heldout")}
    assert len(heldout) == 300
    assert not train & heldout
    assert all(tasks.split_of(s) == "train" for s in train)


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_pairs_fit_the_vocabularies_and_the_length_limit(name):
    task = tasks.get(name)
    for pair in tasks.pairs(task, 500, seed=5):
        assert 2 <= len(pair.source) <= tasks.MAX_WORDS
        assert len(pair.alignment) == len(pair.target)
        assert task.source.ids(pair.source) and task.target.ids(pair.target)  # KeyError on an unknown word
        encoded = task.source.encode(" ".join(pair.source), 32)
        assert encoded.tokens == (*pair.source, "<eos>")


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_vocabulary_round_trips(name):
    task = tasks.get(name)
    for vocabulary in (task.source, task.target):
        assert vocabulary.words[:3] == tasks.SPECIALS
        assert len(set(vocabulary.words)) == vocabulary.vocab_size
        for i, word in enumerate(vocabulary.words):
            assert vocabulary.token_to_id(word) == i
            assert vocabulary.id_to_token(i) == word
    for example in task.examples:
        enc = task.source.encode(example, 32)
        assert " ".join(task.source.id_to_token(i) for i in enc.ids[:-1]) == example
        assert enc.ids[-1] == tasks.EOS_ID
        assert [example[a:b] for a, b in enc.offsets[:-1]] == list(enc.tokens[:-1])


def test_reversal_alignment_is_the_mirror():
    for pair in tasks.pairs(tasks.get("reverse"), 200, seed=2):
        n = len(pair.source)
        assert pair.target == pair.source[::-1]
        assert pair.alignment == tuple(n - 1 - i for i in range(n))


def test_translation_aligns_each_word_with_its_lexicon_entry_and_reorders():
    allowed = _translations()
    crossing = 0
    for pair in tasks.pairs(tasks.get("translate"), 500, seed=9):
        assert sorted(pair.alignment) == list(range(len(pair.source)))  # one french word per english word
        for i, j in enumerate(pair.alignment):
            assert (pair.source[j], pair.target[i]) in allowed
        crossing += pair.alignment != tuple(range(len(pair.source)))
    assert crossing > 250  # most sentences carry an adjective, so the alignment crosses


def test_the_papers_example_comes_out_in_french_order():
    pair = tasks.translate(("the", "european", "economic", "area", "signs", "a", "letter"))
    assert pair.target == ("la", "zone", "économique", "européenne", "signe", "une", "lettre")
    assert pair.alignment == (0, 3, 2, 1, 4, 5, 6)


@pytest.mark.parametrize("words", [("the", "big"), ("a", "cats", "see", "a", "dog"), ("dog", "sees"), ()])
def test_sentences_outside_the_grammar_have_no_reference(words):
    assert tasks.translate(words) is None


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_every_example_has_a_reference(name):
    task = tasks.get(name)
    for example in task.examples:
        pair = task.reference(tuple(example.split()))
        assert pair is not None and len(pair.target) == len(pair.source)


def test_agreement_follows_the_noun():
    for pair in tasks.pairs(tasks.get("translate"), 300, seed=11):
        if pair.source[0] == "the" and pair.source[1] in ("big", "small") and pair.source[2] == "cats":
            assert pair.target[:3] == ("les", "chats", "grands" if pair.source[1] == "big" else "petits")


def test_unknown_words_are_named_with_close_suggestions():
    vocabulary = tasks.get("translate").source
    with pytest.raises(tasks.UnknownWordError) as info:
        vocabulary.encode("the smal cat sees a dogg", 32)
    assert info.value.suggestions["smal"][0] == "small"
    assert "dog" in info.value.suggestions["dogg"]
    message = str(info.value)
    assert "'smal'" in message and "did you mean 'small'" in message and "'dogg'" in message
    with pytest.raises(tasks.UnknownWordError, match="This word is not"):
        vocabulary.encode("the cat sees a dog.", 32)
    with pytest.raises(tasks.UnknownWordError, match="'<'; 'bos'"):  # specials cannot be typed
        vocabulary.encode("<bos>", 32)


def test_encode_lowercases_cuts_and_rejects_empty_text():
    vocabulary = tasks.get("reverse").source
    enc = vocabulary.encode("One  TWO three", 3)
    assert enc.tokens == ("one", "two", "<eos>") and enc.truncated == 1 and enc.offsets == ((0, 3), (5, 8), (0, 0))
    with pytest.raises(tasks.TokenizeError, match="empty"):
        vocabulary.encode("   ", 5)
