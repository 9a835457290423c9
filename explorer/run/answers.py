"""What an experiment is measured against: a run's answer (the rows, their targets and which rows count)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """What a run is measured against: the source ids, and for a model with an output the decoder's input rows, the
    token each row should write and which rows count (those whose right answer is known)."""

    source_ids: tuple[int, ...]
    decoder_input: tuple[int, ...] | None = None  # None: encoder-only (measured by its sentence embedding)
    targets: tuple[int, ...] | None = None
    counted: tuple[bool, ...] = ()
    where: str = ""  # where the targets come from, as a sentence says it
    # a decoder-only text's last row is read too (with_text_end): nothing in the text follows it, so its target is the
    # model's own top next token, and it is not counted (no right answer is known there)
    text_end: bool = False

    @property
    def measured_by_embedding(self) -> bool:
        return self.decoder_input is None

    def own_row(self, row: int) -> bool:
        """Whether a row's target is the model's own top token because the text ends there (with_text_end)."""
        return self.text_end and self.targets is not None and row == len(self.targets) - 1
