"""Seeded draws for the hidden checks and any other generator of test inputs.

- `drawn(low, high)`: an int for a hidden check on fixed data (a capacity, a seed, a length).
- `grading_seed()`: the grading's seed, for a generator of its own (Hypothesis, numpy).
- `restart_draws(seed, test)` and `take_draws()`: the grader's (it calls both).

In a grading the seed comes from the trusted grader, which computes it from the submitted files
and the course's grading key before any test runs (never from anything the student's code does):
the same files get the same draws, and so the same score, at every grading and in every way of
grading; other files get other draws, so outputs collected from one grading answer no other
submission. Outside a grading (a student's own run of the public tests, a test of this library)
the seed is drawn once per process from the system's randomness.
"""
from __future__ import annotations

import hashlib
import random
import secrets

# Bits of a seed, the grader's (autograder/harness/seeds.py) or one drawn outside a grading: a JSON
# number (results.json) holds it exactly.
SEED_BITS = 48


def _stream(seed: int, test: str) -> random.Random:
    """The draws of `test` (a test's name; "" outside any test) under `seed`: each test has its
    own, so what it draws depends on neither the tests that ran before it nor how they ended."""
    digest = hashlib.sha256(f"{seed}\0{test}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


_SEED = secrets.randbits(SEED_BITS)
_GRADING = False  # whether a grader gave the seed (restart_draws with a seed)
_DRAWS = _stream(_SEED, "")
# The draws of the test running now, for the staff's record (the grader's take_draws()).
_DRAWN: list[int] = []


def grading_seed() -> int:
    """The seed of the grading running now, a non-negative int: the same for the same submitted
    files in every grading, another for other files.

    For any generator of test inputs besides `drawn` (the draws of a test are already seeded by
    it): `hypothesis.seed(grading_seed())` on a test's `@given` function, or
    `numpy.random.default_rng([grading_seed(), k])`. Read it when a test runs or when its module is
    imported (a grading sets the seed before it collects the tests); never keep it across
    gradings, which one process may run one after another. A generator that wants a value of its
    own per test can take `drawn(0, 2**32 - 1)` instead: that is recorded for the staff.
    """
    return _SEED


def restart_draws(seed: int | None = None, test: str = "") -> None:
    """Start the draws over from `seed` (None: the current seed) for the test named `test`.

    The grader calls it with the grading's seed as a run begins and with each test's name as that
    test begins, so a process that grades one submission after another, or one submission in
    both modes, gives each run the draws of its own seed."""
    global _SEED, _DRAWS, _GRADING
    if seed is not None:
        _SEED, _GRADING = int(seed), True
    _DRAWS = _stream(_SEED, test)


def drawn(low: int, high: int) -> int:
    """An int in low .. high for a hidden check on fixed data (a real trace, a real model): drawn
    from the grading's seed, so one submission always sees the same values and no other
    submission can answer from a table of them. The grader records each test's draws in
    results.json (the test's extra_data, which Gradescope shows the staff, not the student)."""
    value = _DRAWS.randint(low, high)
    _DRAWN.append(value)
    return value


def take_draws() -> list[int]:
    """The values drawn since the last call, in order (the grader calls it as each test ends)."""
    values = _DRAWN[:]
    _DRAWN.clear()
    return values


# The seed of the conformance runs outside a grading (a student's `make test`): one constant, so the
# public runs find the same sequence at every run of the same code.
CONFORMANCE_SEED = 20261206


def conformance_seed() -> int:
    """The seed of the generated call sequences of the conformance runs (kvlab.testing.conformance),
    the one place that decides it: in a grading, the grading's seed (as every draw: the same files
    get the same sequences, other files other ones, so a sequence a message showed answers no other
    submission); outside one, CONFORMANCE_SEED."""
    return _SEED if _GRADING else CONFORMANCE_SEED
