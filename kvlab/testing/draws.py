"""Seeded draws for hidden checks on fixed data: `drawn(low, high)` in a test, `restart_draws()` as a
grading run begins and `take_draws()` as each test ends (the grader calls both).

The draws come from the system's randomness, or from a seeded generator when the grader's own
environment sets $KVLAB_GRADING_SEED (see `_draws`).
"""
from __future__ import annotations

import os
import random
import secrets


def _draws() -> random.Random:
    """Where the hidden checks' draws come from: the system's randomness in a real grading; a seeded
    generator when the grader's own environment (never the student's process) sets
    $KVLAB_GRADING_SEED, so that the repository's tests of the tests can grade one submission twice
    (sandboxed, in-process) and compare."""
    seed = os.environ.get("KVLAB_GRADING_SEED", "")
    return random.Random(int(seed)) if seed.isdigit() else secrets.SystemRandom()


_DRAWS = _draws()


def restart_draws() -> None:
    """Draw anew from the start (the grader calls it as a grading run begins): a process that grades
    one submission after another, in both modes, then gives each run the same seeded draws."""
    global _DRAWS
    _DRAWS = _draws()


# The draws of the test running now, for the staff's record (the grader's take_draws()).
_DRAWN: list[int] = []


def drawn(low: int, high: int) -> int:
    """An int in low .. high drawn anew in every grading run, for hidden checks on fixed data (a real
    trace, a real model): resubmitting cannot collect a table of expected values to answer from.
    The grader records each test's draws in results.json (the test's extra_data, which Gradescope
    shows the staff, not the student)."""
    value = _DRAWS.randint(low, high)
    _DRAWN.append(value)
    return value


def take_draws() -> list[int]:
    """The values drawn since the last call, in order (the grader calls it as each test ends)."""
    values = _DRAWN[:]
    _DRAWN.clear()
    return values


# The seed of the conformance runs (kvlab.testing.conformance): one constant, so every grading and
# every student's `make test` generates the same call sequences.
CONFORMANCE_SEED = 20261206


def conformance_seed() -> int:
    """The seed of the generated call sequences of the conformance runs: the one place that decides it."""
    return CONFORMANCE_SEED
