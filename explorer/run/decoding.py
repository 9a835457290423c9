"""Greedy decoding one step at a time, read off a trace: what each output position looked at and chose."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run.heads import MEAN, head_or_mean
from attention_explorer.explorer.run.trace import Trace
from attention_explorer.models.tasks import SPECIALS, Task


@dataclass(frozen=True)
class DecodedPosition:
    """Decoder row `index`: it reads target tokens 0..index and picks output token `index` (every token readable:
    Trace.readable)."""

    index: int
    chosen: str  # the token greedy decoding picked here
    target_tokens: tuple[str, ...]  # the decoder's whole input ([BOS] + output so far)
    visible: np.ndarray  # (T,) bool: the causal mask's row, True for 0..index
    self_weights: np.ndarray  # (T,) masked self-attention of this row (zero where not visible)
    source_tokens: tuple[str, ...]
    cross_weights: np.ndarray | None  # (S,) encoder-decoder attention of this row over the source (None: decoder-only)
    top_tokens: tuple[str, ...]  # final linear + softmax: the most probable next tokens
    top_probabilities: np.ndarray  # (k,)

    @property
    def done_so_far(self) -> tuple[str, ...]:
        """Output tokens already written before this step (a decoder-only model's: the text up to this position)."""
        if self.cross_weights is None:
            return self.target_tokens[: self.index + 1]
        return self.target_tokens[1 : self.index + 1]


def n_positions(trace: Trace) -> int:
    if trace.output_tokens is None:
        raise ValueError(f"model {trace.model_key!r} is encoder-only: it does not decode")
    return len(trace.output_tokens)


def step(trace: Trace, index: int, layer: int, head: int = MEAN) -> DecodedPosition:
    """Step `index` (0-based) as seen by one decoder layer and one head, or the mean over its heads."""
    total = n_positions(trace)
    if not 0 <= index < total:
        raise IndexError(f"step {index} is outside 0..{total - 1}")
    assert trace.decoder_self is not None and trace.top_probabilities is not None
    assert trace.target_tokens is not None and trace.top_tokens is not None and trace.output_tokens is not None

    def row(weights: np.ndarray) -> np.ndarray:  # (L, H, Tq, Tk) -> (Tk,): this step's row of one layer (a long
        return head_or_mean(weights[layer][None, :, index], 0, head)  # text's layers are recomputed when read)

    readable = trace.readable  # what a class reads: every token as the page shows it ('␣Paris', not 'ĠParis')
    return DecodedPosition(
        index=index,
        chosen=readable(trace.output_tokens[index : index + 1])[0],
        target_tokens=readable(trace.target_tokens),
        visible=trace.decoder_self.mask[index].copy(),
        self_weights=row(trace.decoder_self.weights),
        source_tokens=readable(trace.source_tokens),
        cross_weights=None if trace.cross is None else row(trace.cross.weights),
        top_tokens=readable(trace.top_tokens[index]),
        top_probabilities=trace.top_probabilities[index],
    )


@dataclass(frozen=True)
class Answer:
    """What a toy model wrote for its source, and what its task says is right (None: outside the grammar)."""

    written: tuple[str, ...]
    right: tuple[str, ...] | None

    @property
    def correct(self) -> bool:
        return self.written == self.right


def source_words(trace: Trace) -> tuple[str, ...]:
    """A toy model's source words as it read them (its special tokens left out)."""
    return tuple(t for t in trace.source_tokens if t not in SPECIALS)


def check(trace: Trace, task: Task) -> Answer:
    """The trace's output words against the task's right answer for its source words (special tokens left out)."""
    if trace.output_tokens is None:
        raise ValueError(f"model {trace.model_key!r} is encoder-only: it writes no answer")
    expected = task.expected(source_words(trace))
    written = tuple(t for t in trace.output_tokens if t not in SPECIALS)
    return Answer(written, None if expected is None else expected.target)
