"""Lecture 7's growth guard measures again only inside the noise band, and keeps the pair that grew least.

`eviction_checks.base_growth_problem` runs on a stand-in student whose CPU times are scripted per
run, so which runs it asks for and what it concludes are exact: a busy machine's one slow pair
passes on a second look, a growth that stays over the limit fails with its smallest pair, one far
past the limit fails at once, and an insert that raises on a later run is reported.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from autograder.assignment import load_assignment
from support.repo import REPO

N_IDS = 400_000  # a limit of 1.0 s at 2.5 us per id


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(load_assignment("lecture07", REPO).public_tests))
    return importlib.import_module("eviction_checks")


Run = tuple[int, float, Any]  # capacity, CPU seconds, len(cache) afterwards or the exception insert raises


class ScriptedStudent:
    """`student` as the tests see it, each timed run scripted: `runs` in the order they must come."""

    def __init__(self, runs: list[Run]) -> None:
        self._runs: Iterator[Run] = iter(runs)
        self.left = len(runs)
        self.prefix_cache = SimpleNamespace(LFUCache=lambda capacity: SimpleNamespace(capacity=capacity))

    def cpu_seconds(self, function: Any, cache: SimpleNamespace, *args: Any) -> tuple[Any, float]:
        capacity, seconds, after = next(self._runs)
        self.left -= 1
        assert cache.capacity == capacity, f"the guard timed capacity {cache.capacity:,}; the script says {capacity:,}"
        if isinstance(after, BaseException):
            return ((None, after), [], [], (None, None)), seconds
        return ((None, None), [], [], (after, None)), seconds


def guard_runs(checks: ModuleType, growths: list[float]) -> list[Run]:
    """The runs of pairs that grew by `growths`, the first pair's capacity-100,000 run left out (the
    test times it before it asks base_growth_problem)."""
    runs: list[Run] = []
    for growth in growths:
        runs += [(checks.GUARD_CAPACITY, 0.5 + growth, checks.GUARD_CAPACITY),
                 (checks.GROWTH_BASE_CAPACITY, 0.5, checks.GROWTH_BASE_CAPACITY)]
    return runs[1:]


def guard_problem(checks: ModuleType, student: ScriptedStudent, first_growth: float) -> str | None:
    """base_growth_problem after a first capacity-100,000 run that grew by `first_growth` and answered len()
    = 100,000 (no match calls, no `in` questions)."""
    answered = ([], [], (checks.GUARD_CAPACITY, None))
    return checks.base_growth_problem(student, "LFUCache", [0] * N_IDS, [], [], "the sequence", 0.5 + first_growth,
                                      answered, 60)


@pytest.mark.parametrize(("growths", "fails_with"), [
    ([0.4], None),
    ([1.5, 0.4], None),
    ([1.5, 1.2, 1.4], "1.20 s more than the same calls at capacity 1,000 (0.50 s) (the smallest growth of 3"),
    ([3.5], "3.50 s more than the same calls at capacity 1,000 (0.50 s); the limit is 1.00 s"),
], ids=["within", "noise-once", "over-every-time", "far-over"])
def test_growth_is_measured_again_only_in_the_noise_band(checks: ModuleType, growths: list[float],
                                                         fails_with: str | None) -> None:
    student = ScriptedStudent(guard_runs(checks, growths))
    problem = guard_problem(checks, student, growths[0])
    assert student.left == 0, f"{student.left} scripted runs were never asked for"
    if fails_with is None:
        assert problem is None, f"growths {growths} should pass; the guard said: {problem}"
    else:
        assert problem is not None and fails_with in problem, f"growths {growths}: expected {fails_with!r} in {problem}"


@pytest.mark.parametrize(("after", "fails_with"), [
    (ValueError("cache full"), "measured again, LFUCache(100,000).insert(every block of make_trace()) raised"),
    (99_999, "answered otherwise than the first time"),
], ids=["raises", "answers-otherwise"])
def test_a_run_measured_again_is_checked_as_the_first(checks: ModuleType, after: Any, fails_with: str) -> None:
    # A second run that did less work (here: answered len() otherwise) must not decide the verdict.
    student = ScriptedStudent([*guard_runs(checks, [1.5]), (checks.GUARD_CAPACITY, 0.5, after)])
    problem = guard_problem(checks, student, 1.5)
    assert problem is not None and fails_with in problem, (
        f"the second run answered {after!r}; the guard said: {problem}")
