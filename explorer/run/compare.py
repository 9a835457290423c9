"""Two attention maps side by side: line up their positions (or words) and take the difference."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run.heads import MEAN
from attention_explorer.explorer.run.layers import LayerArray
from attention_explorer.models.registry import ENGLISH_EXAMPLES

# sentence pairs that differ in one thing; the second is the sidebar default's variant
MINIMAL_PAIRS = (
    ("The cat sat on the mat", "The cats sat on the mat"),
    (ENGLISH_EXAMPLES[0], ENGLISH_EXAMPLES[0].replace("too tired", "too wide")),
    ("The keys to the cabinet are on the table", "The key to the cabinets is on the table"),
    ("She gave him the book", "He gave her the book"),
)


# one-word swaps that keep a sentence grammatical: the first that applies makes a minimal pair
SWAPS = {
    "he": "she", "she": "he", "him": "her", "her": "him", "his": "her",
    "is": "was", "was": "is", "are": "were", "were": "are",
    "a": "the", "the": "a", "this": "that", "that": "this",
    "tired": "wide", "wide": "tired", "big": "small", "small": "big",
}  # fmt: skip


def _swapped(word: str, new: str) -> str:
    return new.capitalize() if word[:1].isupper() else new


def variants(text: str) -> list[str]:
    """Sentences that differ from `text` in one word, most telling first: its listed minimal pair, then one swap
    of SWAPS (the last swappable word first), then an alphabetic word with an 's' added or taken away (the last
    first). None equal `text`; empty when no word can change. Every candidate is listed, so a caller that reads
    only a sentence's first tokens can take the first one that changes a word it reads."""
    found = [b for a, b in MINIMAL_PAIRS if a == text] + [a for a, b in MINIMAL_PAIRS if b == text]
    words = text.split(" ")
    for i in reversed(range(len(words))):
        new = SWAPS.get(words[i].lower())
        if new:
            found.append(" ".join([*words[:i], _swapped(words[i], new), *words[i + 1 :]]))
    for i in reversed(range(len(words))):
        word = words[i]
        if word.isalpha() and len(word) > 2:
            changed = word[:-1] if word.endswith("s") else word + "s"
            found.append(" ".join([*words[:i], changed, *words[i + 1 :]]))
    return [t for t in dict.fromkeys(found) if t != text]


VARIANTS_TRIED = 64  # candidates checked at most: each is a tokenization


def first_variant(loaded, text: str, max_tokens: int) -> str:
    """The first of `variants(text)` the model can read that changes a token it reads (within max_tokens): past the
    cut a changed word would leave A and B identical. `text` itself when there is none. Only the first max_tokens
    words can hold a token the model reads (a word is at least one token), so only they are changed and tokenized:
    a 100,000-character sentence costs no more than a 512-word one."""
    words = text.split(" ")
    head, tail = " ".join(words[:max_tokens]), words[max_tokens:]
    try:
        reads = loaded.tokenizer.encode(head, max_tokens).ids
    except Exception:  # noqa: BLE001 -- A itself unreadable: the page says so; B just starts equal
        return text
    for twin in variants(head)[:VARIANTS_TRIED]:
        if loaded.can_read(twin) and loaded.tokenizer.encode(twin, max_tokens).ids != reads:
            return " ".join([twin, *tail])
    return text


@dataclass(frozen=True)
class Alignment:
    """Which position of A goes with which of B, and a label for each pair ('cat' or 'cat / cats')."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    labels: tuple[str, ...]
    unmatched_a: tuple[str, ...] = ()  # what A has that nothing in B lines up with
    unmatched_b: tuple[str, ...] = ()


def _label(x: str, y: str) -> str:
    return x if x == y else f"{x} / {y}"


def by_position(tokens_a: Sequence[str], tokens_b: Sequence[str]) -> Alignment:
    """Position i with position i, up to the shorter of the two."""
    n = min(len(tokens_a), len(tokens_b))
    return Alignment(
        tuple(range(n)),
        tuple(range(n)),
        tuple(_label(tokens_a[i], tokens_b[i]) for i in range(n)),
        tuple(tokens_a[n:]),
        tuple(tokens_b[n:]),
    )


def by_word(words_a: Sequence[str], words_b: Sequence[str]) -> Alignment:
    """Equal words with equal words, in order (difflib); a replaced run of the same length pairs word for word
    ('cat' / 'cats'), so a minimal pair lines up completely. Inserted and deleted words are left out."""
    pairs: list[tuple[int, int]] = []
    unmatched_a: list[str] = []
    unmatched_b: list[str] = []
    matcher = difflib.SequenceMatcher(a=list(words_a), b=list(words_b), autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal" or (op == "replace" and a1 - a0 == b1 - b0):
            pairs.extend(zip(range(a0, a1), range(b0, b1), strict=True))
        else:
            unmatched_a.extend(words_a[a0:a1])
            unmatched_b.extend(words_b[b0:b1])
    return Alignment(
        tuple(i for i, _ in pairs),
        tuple(j for _, j in pairs),
        tuple(_label(words_a[i], words_b[j]) for i, j in pairs),
        tuple(unmatched_a),
        tuple(unmatched_b),
    )


def aligned(weights: np.ndarray, rows: Sequence[int]) -> np.ndarray:
    """weights (..., T, T) restricted to the aligned positions, in alignment order: (..., N, N); a view, not a copy,
    when they are the first N positions in order (lined up by position, or words of which none were left out)."""
    n = len(rows)
    if tuple(rows) == tuple(range(n)):
        return weights[..., :n, :n]
    index = np.asarray(rows, dtype=int)
    return weights[..., index[:, None], index[None, :]]


def difference(weights_a: np.ndarray, weights_b: np.ndarray, alignment: Alignment) -> np.ndarray:
    """A - B over the aligned positions (float64, so a zero is a zero): (..., T, T) x 2 -> (..., N, N)."""
    a = aligned(weights_a, alignment.a).astype(np.float64)
    b = aligned(weights_b, alignment.b).astype(np.float64)
    return a - b


def layer_differences(weights_a, weights_b, alignment: Alignment) -> LayerArray:
    """difference of every layer, (L, H, N, N), each layer's taken when read (a long text's layers are recomputed)."""
    n_layers, n_heads = weights_a.shape[:2]
    n = len(alignment.a)
    return LayerArray(n_layers, (n_heads, n, n), lambda i: difference(weights_a[i], weights_b[i], alignment))


def left_out(alignment: Alignment) -> str:
    """What neither side lines up with, as 'A: x, y; B: nothing.'; '' when everything lined up."""
    if not (alignment.unmatched_a or alignment.unmatched_b):
        return ""
    return f"A: {', '.join(alignment.unmatched_a) or 'nothing'}; B: {', '.join(alignment.unmatched_b) or 'nothing'}."


def changed_most(difference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the largest |A - B| of its lined-up cells, and that number as cell text: (L, H, N, N) -> (L, H) x 2,
    a layer at a time."""
    worst = np.stack([np.abs(difference[i]).max(axis=(-2, -1)) for i in range(len(difference))])
    return worst, cell_text(worst)


def cell_text(worst: np.ndarray) -> np.ndarray:
    """(L, H) numbers as the grid's cell text."""
    return np.array([[f"{d:.3g}" for d in row] for row in worst], dtype=object)


def largest_changes(weights_a, weights_b, alignment: Alignment, step: Callable[[int, int], None] | None = None):
    """Per head, the largest |A - B| of its lined-up cells, (L, H, T, T) x 2 -> (L, H): one layer of each read at a
    time (a long text's layers are recomputed), a head at a time, subtracted in the weights' own float32. Each
    difference is then exact to within half a float32 step of itself (a relative 6e-8), and the largest of them the
    float64 largest rounded to float32 (rounding keeps order): what changed_most(difference) gives, without a float64
    copy of every layer (302 MB a layer for SmolLM2 at 2,048 tokens). `step(done, total)` after each layer."""
    n_layers, n_heads = weights_a.shape[:2]
    worst = np.zeros((n_layers, n_heads))
    for i in range(n_layers):
        a, b = aligned(weights_a[i], alignment.a), aligned(weights_b[i], alignment.b)  # (H, N, N) each
        for h in range(n_heads):
            worst[i, h] = np.abs(a[h] - b[h]).max()
        if step is not None:
            step(i + 1, n_layers)
    return worst


def head_difference(weights_a, weights_b, alignment: Alignment, layer: int, head: int) -> np.ndarray:
    """A - B of one head, or of the layer's mean over heads (heads.MEAN), (N, N) in float64: the numbers
    head_or_mean(layer_differences(...), layer, head) gives, from one head of each side at a time."""
    if head != MEAN:
        return difference(weights_a[layer, head], weights_b[layer, head], alignment)
    n_heads = weights_a.shape[1]
    total = difference(weights_a[layer, 0], weights_b[layer, 0], alignment)
    for h in range(1, n_heads):  # in head order, as numpy's mean over the first axis adds them
        total += difference(weights_a[layer, h], weights_b[layer, h], alignment)
    return total / n_heads
