"""Corrupted texts the patching page proposes for a clean one (no streamlit): the clean text with one token changed,
so that both have as many tokens, and the right and the wrong answer that the change should swap.

- A name swap (the indirect-object task of Wang et al. 2022): the last word said twice is replaced, at its second
  mention, by the other word said once before it: "..., John gave a drink to" -> "..., Mary gave a drink to". The
  clean text's answer is the word said once (Mary), the corrupted one's the word the change made single (John).
- A changed word after a repeated one (induction): the text ends on a word said earlier; the word after its earlier
  mention is what an induction head copies, and it is changed for a word the text does not hold (the label names the
  repeated word, since the changed one is said only once).
- A changed word (an encoder-decoder: a changed source word): any text; a word near its end is changed for a word
  the text does not hold, and the answers are what the change swaps (the caller's `answers`: the two runs' most likely
  next tokens, or an encoder-decoder's outputs where they first differ), as they are after a repeated word.

Every proposal is a real text: the changed token's characters are replaced in the clean text, and the text is read
again to check that it gives the same number of tokens with exactly that one changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attention_explorer.explorer.experiments import sample
from attention_explorer.models.registry import LoadedModel
from attention_explorer.models.tokenize import Encoding

# words a changed word becomes, where the vocabulary is not a toy task's: common, and one token each in most
# vocabularies with a space before them
SUBSTITUTES = ("blue", "river", "table", "seven", "garden", "yellow", "window", "music", "paper", "horse")
PROPER = ("Italy", "Spain", "London", "Peter", "Anna", "Tokyo", "Egypt", "Berlin")  # for a word with a capital
MARKERS = ("Ġ", "▁", "##")


@dataclass(frozen=True)
class Proposal:
    """A corrupted text, which token it changes, and the answers the change should swap."""

    name: str  # "name swap", "changed word after repeated “of”", "changed word"
    text: str
    position: int  # the changed token
    answer: str  # the clean run's right answer, as a token of the vocabulary
    wrong: str  # the corrupted run's


def bare(token: str) -> str:
    """A token without the mark of the space or word piece before it ('ĠMary' -> 'Mary')."""
    for marker in MARKERS:
        token = token.removeprefix(marker)
    return token


def _words(encoding: Encoding) -> list[int]:
    """The positions of tokens that are words (letters only), not specials or punctuation."""
    return [i for i, t in enumerate(encoding.tokens) if bare(t).isalpha() and encoding.word_ids[i] is not None]


def _replaced(loaded: LoadedModel, text: str, encoding: Encoding, position: int, surface: str) -> str | None:
    """The text with token `position`'s characters replaced by `surface`, if it reads as the same tokens but that one
    (None otherwise)."""
    start, end = encoding.offsets[position]
    if end <= start:
        return None
    spaced = text[start:end].startswith(" ") and not surface.startswith(" ")
    changed = text[:start] + (" " if spaced else "") + surface + text[end:]
    try:
        found = loaded.tokenizer.encode(changed, len(encoding) + 8)
    except ValueError:
        return None
    same = [a == b for a, b in zip(found.ids, encoding.ids, strict=False)]
    if len(found) != len(encoding) or same.count(False) != 1 or same[position]:
        return None
    return changed


def _surface(text: str, encoding: Encoding, position: int) -> str:
    start, end = encoding.offsets[position]
    return text[start:end].strip()


def name_swap(loaded: LoadedModel, text: str, encoding: Encoding) -> Proposal | None:
    """The last word said twice, at its second mention, replaced by the other word said once before it (the one
    nearest its first mention)."""
    ids, words = encoding.ids, _words(encoding)
    for j in reversed(words[:-1] if words and words[-1] == len(ids) - 1 else words):
        earlier = [i for i in words if i < j and ids[i] == ids[j]]
        if not earlier:
            continue
        if not _surface(text, encoding, j)[:1].isupper():
            continue  # names: a word with a capital said twice
        once = [i for i in words if i < j and ids.count(ids[i]) == 1 and _surface(text, encoding, i)[:1].isupper()]
        for i in sorted(once, key=lambda i: abs(i - earlier[0])):
            changed = _replaced(loaded, text, encoding, j, _surface(text, encoding, i))
            if changed is not None:
                return Proposal("name swap", changed, j, encoding.tokens[i], encoding.tokens[j])
    return None


def _substitutes(loaded: LoadedModel, encoding: Encoding, capital: bool = False, position: int = -1) -> list[str]:
    """Words to change a word for, none of them in the text: a toy task's own vocabulary, the words its sample texts
    of as many words hold at the same place first (the same kind of word: a noun for a noun); else SUBSTITUTES
    (PROPER for a word with a capital)."""
    held = {bare(t) for t in encoding.tokens}
    if loaded.task is not None:
        vocabulary = [w for w in loaded.task.source.words if w.isalnum()]  # no <bos>, <eos>, <pad>
        word = encoding.word_ids[position] if 0 <= position < len(encoding) else None
        n_words = len({w for w in encoding.word_ids if w is not None})
        if word is not None:
            same = [t.split() for t in sample.texts(loaded) if len(t.split()) == n_words]
            found = Counter(words[word] for words in same)
            vocabulary = [w for w, _ in found.most_common()] + [w for w in vocabulary if w not in found]
        return [w for w in vocabulary if w not in held]
    held = {w.lower() for w in held}
    return [w for w in (PROPER if capital else SUBSTITUTES) if w.lower() not in held]


# (the clean text's ids, the corrupted one's) -> the answers the change swaps, (right, wrong), as tokens of the output
# vocabulary, or None where it swaps none: the two runs' most likely next tokens (decoder-only), or an
# encoder-decoder's two outputs where they first differ
Answers = Callable[[Sequence[int], Sequence[int]], "tuple[str, str] | None"]


def in_distribution(loaded: LoadedModel, text: str) -> bool:
    """Whether a toy task's model could have been trained on this text: its task's grammar has an answer for it
    (translate: articles, adjectives and verbs agree with their noun, so no "a big rabbits"). A model with no task:
    always (its texts are any text)."""
    if loaded.task is None:
        return True
    return loaded.task.expected(tuple(w for w, _ in loaded.task.source.words_of(text))) is not None


def _changed(
    loaded: LoadedModel, text: str, encoding: Encoding, position: int, name: str, answers: Answers
) -> Proposal | None:
    """Token `position` changed for the first substitute that reads as one token and keeps the text in the model's
    distribution (in_distribution), if the change swaps answers."""
    capital = _surface(text, encoding, position)[:1].isupper()
    for word in _substitutes(loaded, encoding, capital, position):
        changed = _replaced(loaded, text, encoding, position, word)
        if changed is None or not in_distribution(loaded, changed):
            continue
        found = answers(encoding.ids, loaded.tokenizer.encode(changed, len(encoding) + 8).ids)
        return None if found is None else Proposal(name, changed, position, *found)
    return None


def repeated_word(loaded: LoadedModel, text: str, encoding: Encoding, answers: Answers | None) -> Proposal | None:
    """The text ends on a word said before: the word after that earlier mention (what an induction head copies)
    changed for one the text lacks. The answers: what `answers` says, or without it (a long text, where each is
    another run) the word an induction head would copy in each."""
    ids, words = encoding.ids, _words(encoding)
    last = len(ids) - 1
    if not words or words[-1] != last:
        return None
    earlier = [i for i in words if i < last - 1 and ids[i] == ids[last]]
    if not earlier or earlier[-1] + 1 not in words:
        return None
    copied = earlier[-1] + 1
    # what is changed is not the word said twice but the one after its earlier mention: the label says which
    name = f"changed word after repeated “{bare(encoding.tokens[last])}”"
    if answers is not None:
        return _changed(loaded, text, encoding, copied, name, answers)
    for word in _substitutes(loaded, encoding, _surface(text, encoding, copied)[:1].isupper(), copied):
        changed = _replaced(loaded, text, encoding, copied, word)
        if changed is not None and in_distribution(loaded, changed):
            new = loaded.tokenizer.encode(changed, len(encoding) + 8)
            return Proposal(name, changed, copied, encoding.tokens[copied], new.tokens[copied])
    return None


TRIES = 4  # words a changed-word proposal tries, nearest the end first: each try is one more run of the text


def changed_word(
    loaded: LoadedModel, text: str, encoding: Encoding, answers: Answers, name: str = "changed word"
) -> Proposal | None:
    """A word near the end (not the last token; words said once first) whose change swaps answers, changed for one
    the text lacks; at most TRIES words are tried."""
    ids = encoding.ids
    words = [i for i in _words(encoding) if i < len(ids) - 1]
    once = [i for i in words if ids.count(ids[i]) == 1]
    order = [*reversed(once), *(i for i in reversed(words) if i not in once)]
    for j in order[:TRIES]:
        if (found := _changed(loaded, text, encoding, j, name, answers)) is not None:
            return found
    return None


def proposals(loaded: LoadedModel, text: str, max_tokens: int, answers: Answers | None) -> list[Proposal]:
    """Every kind of corruption this text allows, the most telling first (at most one of each); with no `answers` (a
    long text) none that needs more runs of the model. An encoder-decoder's: a changed source word."""
    encoding = loaded.tokenizer.encode(text, max_tokens)
    if encoding.truncated:
        text = text[: encoding.offsets[-1][1]]
        encoding = loaded.tokenizer.encode(text, max_tokens)
    if loaded.is_encoder_decoder:
        found = [changed_word(loaded, text, encoding, answers, "changed source word")] if answers else []
        return [p for p in found if p is not None]
    found = [name_swap(loaded, text, encoding), repeated_word(loaded, text, encoding, answers)]
    if not any(found) and answers is not None:
        found.append(changed_word(loaded, text, encoding, answers))
    return [p for p in found if p is not None]
