"""The grader's score tables (autograder/harness/text_table.py): their layout, and that the trusted
side prints them without the course's table printer, kvlab.tables."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autograder.harness.text_table import text_table

REPO = Path(__file__).resolve().parents[2]


def test_numbers_align_right_and_no_line_ends_in_a_space() -> None:
    got = text_table("Scores", ["task", "score", "what"], [["alpha", "2.5", "x"], ["total", "120", ""]],
                     right=[False, True, False], notes=["", "a note"])
    want = "\n".join(["Scores",
                      "task   score  what",
                      "-----  -----  ----",
                      "alpha    2.5  x",
                      "total    120",
                      "",
                      "a note"])
    assert got == want, f"the table should read\n{want}\ngot\n{got}"


def test_the_grader_imports_no_course_table_printer() -> None:
    code = ("import sys, autograder.grade, autograder.harness.run, autograder.harness.results; "
            "print('kvlab.tables' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False", (
        f"the grader's modules should not import kvlab.tables; printed {done.stdout!r} {done.stderr[-500:]}")
