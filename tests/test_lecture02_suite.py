"""The lecture-2 tests, tested.

The reference solution passes every public and hidden test; the points add up to assignment.json;
every assert carries a message; and every bug in the catalog (autograder/mutants/lecture02.py) is
caught: some test fails, none outside the tasks the mutant lists, with a message naming the bug.
Each suite runs in a subprocess the way the grader runs it; see suite_support.Suite.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from autograder import mutants
from suite_support import (
    Outcome, Suite, check_asserts_have_messages, check_catalog, check_mutant_caught, check_points_add_up,
    check_solution_passes, selected_mutants,
)

SUITE = Suite(
    assignment="lecture02",
    # Every function and method of the contract's kv_decode.py: the catalog must break each of them.
    contract={"kv_decode.py": frozenset({
        "KVCache.__init__", "KVCache.update", "KVCache.advance", "KVCache.nbytes",
        "greedy_decode", "kv_bytes_per_token", "kv_cache_bytes",
    })},
    min_mutants=12,
    # No lecture-2 test uses hypothesis; skipping its plugin's import saves half a second per run.
    pytest_args=("-p", "no:hypothesispytest", "--timeout=60"),
    run_timeout=300,
    # The whole suite is short enough to run per mutant, which also catches points lost elsewhere.
    mutants_run_own_tasks=False,
)


@pytest.fixture(scope="module")
def solution_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    """Every public and hidden test, run once against the reference solution."""
    return SUITE.run(SUITE.solution, tmp_path_factory.mktemp("solution") / "report.xml")


def test_solution_passes_every_test(solution_outcomes: list[Outcome]) -> None:
    check_solution_passes(solution_outcomes)


def test_points_add_up_to_assignment_json(solution_outcomes: list[Outcome]) -> None:
    check_points_add_up(SUITE, solution_outcomes)


@pytest.mark.parametrize("path", SUITE.test_files, ids=lambda p: p.name)
def test_every_assert_has_a_message(path: Path) -> None:
    check_asserts_have_messages(path)


def test_catalog_applies_and_covers_the_contract() -> None:
    check_catalog(SUITE)


@pytest.fixture(scope="module")
def mutant_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future]]:
    """Every selected mutant's run, started together so that they overlap (see Suite.mutant_runs)."""
    with SUITE.mutant_runs(selected_mutants(request), tmp_path_factory) as runs:
        yield runs


@pytest.mark.parametrize("mutant", SUITE.catalog, ids=lambda m: m.name)
def test_mutant_is_caught(mutant: mutants.Mutant, mutant_runs: dict[str, Future]) -> None:
    check_mutant_caught(SUITE, mutant, mutant_runs[mutant.name].result())
