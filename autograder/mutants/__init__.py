"""Bug catalogs: realistic student mistakes, applied to a reference solution at test time.

Each assignment's catalog is the module `autograder.mutants.<assignment id>` with a list
`MUTANTS` of `Mutant` records. A mutant is a set of exact text replacements in one of the
solution's files; the repository's tests apply it to a copy of `solutions/<id>/` and check that
the assignment's tests catch it: some test fails, none outside the tasks the mutant lists, and
one failure message contains the words that name the bug.
"""
from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    """One bug: `replacements` (old, new) pairs applied to `file`, each `old` occurring exactly once.

    `tasks`: the tasks that may lose points (a failing test of any other task is a finding).
    `expect`: words (matched case-insensitively) that at least one failing test's message must
    contain, naming the bug for the student.
    `public_blind`: empty when some public test fails on the mutant; otherwise why only the hidden
    tests can catch it (for example, the real trace is not shipped).
    """

    name: str
    file: str
    replacements: tuple[tuple[str, str], ...]
    description: str
    tasks: tuple[str, ...]
    expect: str
    public_blind: str = ""


class MutantError(ValueError):
    """A mutant does not apply to the solution text (an `old` string missing or repeated)."""


def load(assignment: str) -> list[Mutant]:
    """The catalog of `assignment` (e.g. "lecture02"): its module's MUTANTS, names unique."""
    mutants = list(importlib.import_module(f"{__name__}.{assignment}").MUTANTS)
    names = [m.name for m in mutants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MutantError(f"{assignment}: mutant names used more than once: {', '.join(duplicates)}")
    return mutants


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
