"""Plain-text tables for the grader's own output: the score table a student reads at the top of
results.json (feedback_text's summary, which `python -m autograder.grade` prints too).

Standard library only: the grader's results do not hang on the course's table printer
(`kvlab.tables`, course material that students read and the demos' needs may change), and the
validation of results.json, a process of its own at every grading, loads no numpy. Layout, as the course's tables: the title, the header
row, a rule of dashes under each column, one line per row, then the notes; columns separated by two
spaces, right-aligned where `right` says (the numbers), no trailing whitespace.
"""
from __future__ import annotations

from collections.abc import Sequence


def text_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool],
               notes: Sequence[str] = ()) -> str:
    """The table as text; `rows` hold the cells already written as text, one per header."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(f"{cell:{'>' if r else '<'}{w}}" for cell, r, w in zip(cells, right, widths)).rstrip()

    return "\n".join([title, line(headers), "  ".join("-" * w for w in widths), *map(line, rows), *notes])
