"""CSV that a spreadsheet opens as data. A text cell that starts with =, +, -, @, a tab or a carriage return is run as
a formula by Excel, LibreOffice and Google Sheets (CSV injection: a token "=HYPERLINK(...)" in a downloaded table),
so every CSV the app, the command line and the API write puts a ' before such a cell: the spreadsheet shows the
text, the ' is not shown. Numbers are written as they are (a negative weight stays a number)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """A text that a spreadsheet would run, as text (a leading '); anything else as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class Writer:
    """csv.writer (one line ending, "\\n"), every cell through `cell`. A row with a carriage return in a cell is
    written with every cell quoted: Python 3.11's csv quotes only the line ending's own characters, and a bare \\r
    would end the line for a reader."""

    def __init__(self, out: TextIO) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        self._quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, row: Iterable[Any]) -> None:
        cells = [cell(value) for value in row]
        carriage = any(isinstance(value, str) and "\r" in value for value in cells)
        (self._quoted if carriage else self._writer).writerow(cells)

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)
