"""Toy tasks: deterministic generators, disjoint splits, vocabularies that round-trip, known alignments."""

from __future__ import annotations

import random

import pytest

from attention_explorer.models import lexicon, tasks


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


def _read(task: tasks.Task, words: tuple[str, ...]) -> tuple[str, ...]:
    """The tokens a task's model reads for these words: the source then <eos>, or <bos> then the text."""
    return ("<bos>", *words) if task.decoder_only else (*words, "<eos>")


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_pairs_fit_the_vocabularies_and_the_length_limit(name):
    task = tasks.get(name)
    lengths = set()
    for pair in tasks.pairs(task, 500, seed=5):
        lengths.add(len(pair.source))
        assert len(pair.alignment) == len(pair.target)
        assert task.source.ids(pair.source) and task.target.ids([w for w in pair.target if w])  # KeyError if unknown
        encoded = task.source.encode(" ".join(pair.source), 32)
        assert encoded.tokens == _read(task, pair.source)
    assert min(lengths) >= 2 and max(lengths) == task.max_words


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
        assert enc.tokens == _read(task, tuple(example.split()))
        assert [task.source.id_to_token(i) for i in enc.ids] == list(enc.tokens)
        words = [i for i, w in enumerate(enc.word_ids) if w is not None]
        assert [example[enc.offsets[i][0] : enc.offsets[i][1]] for i in words] == example.split()


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
        pair = task.expected(tuple(example.split()))
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
    assert info.value.known == ("the", "cat", "sees", "a")  # the typed words it does know, each once, as typed
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


def test_induction_is_a_decoder_only_task_of_distinct_words_said_twice():
    task = tasks.get("induction")
    assert task.decoder_only and not tasks.get("reverse").decoder_only
    assert task.source is task.target and set(task.source.known) == set(tasks.REVERSE_WORDS)
    halves = set()
    for pair in tasks.pairs(task, 300, seed=6):
        n = tasks.repeat_start(pair.source)
        assert tasks.INDUCTION_MIN_WORDS <= n <= tasks.MAX_WORDS and len(pair.source) == 2 * n
        assert pair.source[:n] == pair.source[n:] and len(set(pair.source[:n])) == n
        halves.add(n)
    assert halves == set(range(tasks.INDUCTION_MIN_WORDS, tasks.MAX_WORDS + 1))


def test_induction_reference_is_the_next_word_of_the_repeat():
    words = ("alpha", "bravo", "seven", "kilo") * 2
    pair = tasks.get("induction").expected(words)
    assert pair.target == ("", "", "", "", "bravo", "seven", "kilo", "alpha")  # the last: the cycle continued
    assert pair.alignment == (-1, -1, -1, -1, 1, 2, 3, 4)
    assert all(pair.source[a] == t for a, t in zip(pair.alignment, pair.target, strict=True) if a >= 0)
    # typed text may repeat a word within its first half: the latest earlier occurrence decides
    pair = tasks.next_by_induction(("one", "two", "one", "three", "one"))
    assert pair.target == ("", "", "two", "", "three") and pair.alignment == (-1, -1, 1, -1, 3)
    assert tasks.next_by_induction(("one", "two", "three")) is None  # nothing repeats: nothing to predict


def test_induction_encoding_starts_with_bos_and_has_no_end_marker():
    vocabulary = tasks.get("induction").source
    enc = vocabulary.encode("Alpha  bravo alpha bravo", 4)
    assert enc.ids[0] == tasks.BOS_ID and tasks.EOS_ID not in enc.ids
    assert enc.tokens == ("<bos>", "alpha", "bravo", "alpha") and enc.truncated == 1
    assert enc.word_ids == (None, 0, 1, 2) and enc.offsets == ((0, 0), (0, 5), (7, 12), (13, 18))
    with pytest.raises(tasks.UnknownWordError, match="did you mean 'bravo'"):
        vocabulary.encode("alpha brav alpha", 32)
    with pytest.raises(tasks.TokenizeError, match="at least 2"):
        vocabulary.encode("alpha", 1)


# words a class reads as statistics or machine learning, not as a word of the task ("uniform uniform uniform"); the
# translator's nouns ("train") read as the sentence's things and are not listed
ML_WORDS = frozenset(
    [
        "uniform",
        "normal",
        "gaussian",
        "mean",
        "median",
        "mode",
        "random",
        "sample",
        "bias",
        "weight",
        "weights",
        "loss",
        "gradient",
        "softmax",
        "logit",
        "variance",
        "sigma",
        "lambda",
        "epsilon",
        "beta",
        "gamma",
        "token",
        "attention",
        "layer",
        "head",
        "probability",
        "entropy",
        "noise",
        "label",
        "batch",
        "epoch",
        "dropout",
        "norm",
    ]
)


@pytest.mark.parametrize("name", list(tasks.TASKS))
def test_no_vocabulary_word_reads_as_a_statistics_or_ml_term(name):
    task = tasks.get(name)
    words = set(task.source.known) | set(task.target.known)
    assert not words & ML_WORDS, sorted(words & ML_WORDS)


def test_the_shipped_checkpoints_keep_the_tasks_vocabularies_and_ids():
    from attention_explorer.models import train

    for name in tasks.TASKS:
        _, task, record = train.load(name)  # raises when the stored vocabulary differs from the task's
        assert record["source_vocabulary"] == list(task.source.words)
