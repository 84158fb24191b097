"""Bug catalogs: realistic student mistakes, applied to a reference solution at test time.

Each assignment's catalog is the module `autograder.mutants.<assignment id>` with a list
`MUTANTS` of `Mutant` records and, optionally, `CHECKS`: a `Checks` with that assignment's settings
of the tests of the tests (the defaults suit a small assignment, so a new catalog needs none).
A mutant is a set of exact text replacements in one of the solution's files; tests/suites/test_suites.py
applies it to a copy of `solutions/<id>/`, grades the copy with the grader that grades students
(sandboxed, and in-process) and checks that the assignment's tests catch it: some test fails, none
outside the tasks the mutant lists, one failure message contains the words that name the bug, and
(unless `public_blind` says why not) a public test fails too, so a student sees the bug before
submitting.
"""
from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True)
class Mutant:
    """One bug: `replacements` (old, new) pairs applied to `file`, each `old` occurring exactly once.

    `tasks`: the tasks that may lose points (a failing test of any other task is a finding).
    `expect`: words (matched case-insensitively) that at least one failing test's message must
    contain, naming the bug for the student.
    `public_blind`: empty when some public test fails on the mutant; otherwise why only the hidden
    tests can catch it (for example, the real trace is not shipped).
    `call_timeout`: for a bug whose cost passes any per-call limit (its call never finishes), the
    tests of the tests grade it with this lower limit, through KVLAB_CALL_TIMEOUT, which the grader
    honours in both modes: the same outcome, without waiting out the assignment's limit each time.
    `rule`: optional, the stub sentence it breaks, quoted as a corpus entry quotes it
    (autograder.corpus): its being caught then shows a test checks that rule.
    """

    name: str
    file: str
    replacements: tuple[tuple[str, str], ...]
    description: str
    tasks: tuple[str, ...]
    expect: str
    public_blind: str = ""
    call_timeout: float | None = None
    rule: str = ""


@dataclass(frozen=True)
class Checks:
    """One assignment's settings of the tests of the tests (`CHECKS` in its catalog module).

    `min_mutants`: the catalog holds at least this many. `run_seconds`: how long grading one
    submission (both modes) may take before the run counts as hung. `mutants_run_own_tasks`: True
    grades each mutant on the tests of its own tasks only (for a suite too slow to run once per
    mutant), and each of those tasks must lose points; False grades it on every test, and no task
    outside its list may lose points.
    """

    min_mutants: int = 1
    run_seconds: float = 300.0
    mutants_run_own_tasks: bool = False


class MutantError(ValueError):
    """A mutant does not apply to the solution text (an `old` string missing or repeated)."""


def load(assignment: str) -> list[Mutant]:
    """The catalog of `assignment` (e.g. "lecture02"): its module's MUTANTS, names unique."""
    mutants = list(_module(assignment).MUTANTS)
    names = [m.name for m in mutants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MutantError(f"{assignment}: mutant names used more than once: {', '.join(duplicates)}")
    return mutants


def checks(assignment: str) -> Checks:
    """The catalog's CHECKS, or the defaults when it sets none."""
    return getattr(_module(assignment), "CHECKS", Checks())


def _module(assignment: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{assignment}")


def mutate(mutant: Mutant, text: str) -> str:
    """`text` with every replacement of `mutant` applied; MutantError unless each `old` occurs once."""
    for old, new in mutant.replacements:
        found = text.count(old)
        if found != 1:
            raise MutantError(f"mutant {mutant.name}: {old!r} occurs {found} times in {mutant.file}; expected once")
        text = text.replace(old, new)
    return text


def apply(mutant: Mutant, solution: Path, destination: Path) -> Path:
    """Copy the solution folder to `destination` with `mutant` applied to its file; return `destination`."""
    shutil.copytree(solution, destination, ignore=shutil.ignore_patterns("__pycache__"))
    target = destination / mutant.file
    target.write_text(mutate(mutant, target.read_text(encoding="utf-8")), encoding="utf-8")
    return destination
