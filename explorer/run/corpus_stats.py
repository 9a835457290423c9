"""A corpus's per-head statistics as a result (explorer/run/corpus.py computes them): the pooled means, each text's
own values and where in it each head's term is largest, and the table the command line writes (no streamlit, no
torch)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from attention_explorer.explorer.run import spreadsheet

STATISTICS = ("previous_token", "first_token", "self", "entropy", "mean_distance", "induction")
PREVIOUS, FIRST, SELF, ENTROPY, DISTANCE, INDUCTION = range(len(STATISTICS))
# the table's columns: the four statistics that pool every position and their count first, then the rest
COLUMNS = (
    "layer",
    "head",
    "positions",
    "previous_token",
    "first_token",
    "self",
    "entropy",
    "mean_distance",
    "previous_positions",
    "induction",
    "induction_positions",
)


@dataclass(frozen=True, eq=False)
class CorpusStats:
    """Every head's statistics over a corpus, layers and heads counted from 0 (STATISTICS, module docstring)."""

    model_key: str
    kind: str  # "encoder_self" or "decoder_self": the attention described
    causal: bool
    max_tokens: int
    means: np.ndarray  # (S, L, H) float64: each statistic pooled over the corpus; NaN where it pooled no position
    counts: np.ndarray  # (S,) int64: positions pooled per statistic
    per_text: np.ndarray  # (N, S, L, H) float32: each text's own value (NaN where it pools no position)
    strongest_at: np.ndarray  # (N, S, L, H) int16: the query position where that value's term is largest; -1: none
    texts: tuple[str, ...]  # (N,) the texts that ran, in the corpus's order
    lines: tuple[int, ...]  # (N,) each one's line in the file or paste, from 1
    tokens: tuple[tuple[str, ...], ...]  # (N,) each one's tokens as the model spells them (cut at max_tokens)
    readable_tokens: tuple[tuple[str, ...], ...]  # the same as the pages show them (models.tokenize.Spelling)
    notes: tuple[str, ...] = ()  # texts cut or left out, a line each

    @property
    def n_layers(self) -> int:
        return self.means.shape[1]

    @property
    def n_heads(self) -> int:
        return self.means.shape[2]

    def statistic(self, name: str) -> np.ndarray:
        """(L, H) one statistic pooled over the corpus."""
        return self.means[_position(name)]

    def count(self, name: str) -> int:
        """The query positions one statistic pooled."""
        return int(self.counts[_position(name)])

    def text_values(self, name: str) -> np.ndarray:
        """(N, L, H) float32: each text's own value of one statistic."""
        return self.per_text[:, _position(name)]

    def top_texts(self, name: str, layer: int, head: int, k: int = 10) -> list[tuple[int, float]]:
        """The k texts where a head's statistic is highest, as (text, value), highest first; texts without a value
        (NaN) left out."""
        values = self.text_values(name)[:, layer, head]
        order = [int(i) for i in np.argsort(-values, kind="stable") if not np.isnan(values[i])]
        return [(i, float(values[i])) for i in order[:k]]

    def strongest(self, name: str, text: int, layer: int, head: int) -> int | None:
        """The query position of text `text` where a head's term of the statistic is largest (None: it pools none)."""
        found = int(self.strongest_at[text, _position(name), layer, head])
        return None if found < 0 else found

    def rows(self) -> list[dict[str, float | int | None]]:
        """One row a (layer, head), keys COLUMNS; a statistic that pooled no position is None."""
        counts = {name: int(c) for name, c in zip(STATISTICS, self.counts, strict=True)}
        found = []
        for layer in range(self.n_layers):
            for head in range(self.n_heads):
                value = {name: _number(self.means[s, layer, head]) for s, name in enumerate(STATISTICS)}
                found.append(
                    {"layer": layer, "head": head, "positions": counts["first_token"]}
                    | {name: value[name] for name in STATISTICS[:5]}
                    | {"previous_positions": counts["previous_token"]}
                    | {"induction": value["induction"], "induction_positions": counts["induction"]}
                )
        return [{column: row[column] for column in COLUMNS} for row in found]

    def document(self) -> dict:
        """The statistics as JSON values: the run's settings, the notes, the columns and one row a head."""
        return {
            "model": self.model_key,
            "kind": self.kind,
            "texts": len(self.texts),
            "max_tokens": self.max_tokens,
            "notes": list(self.notes),
            "columns": list(COLUMNS),
            "rows": self.rows(),
        }


def _position(name: str) -> int:
    if name not in STATISTICS:
        raise ValueError(f"unknown statistic {name!r}; choose from {', '.join(STATISTICS)}")
    return STATISTICS.index(name)


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def to_csv(stats: CorpusStats) -> str:
    """The table as CSV: COLUMNS, then one row a (layer, head), layers and heads from 0; an empty cell where a
    statistic pooled no position (python -m explorer corpus --out stats.csv writes this)."""
    out = io.StringIO()
    writer = spreadsheet.Writer(out)
    writer.writerow(COLUMNS)
    writer.writerows([("" if v is None else v) for v in row.values()] for row in stats.rows())
    return out.getvalue()
