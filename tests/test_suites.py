"""Every assignment's tests, tested.

For each assignment: the reference solution passes every public and hidden test (the hidden test
on Mooncake's conversation trace may skip where that data is absent); the points add up to
assignment.json; every test file grades one task; every assert carries a message; and every bug
in the catalog (autograder/mutants/<id>.py) is caught: some test fails, none outside the tasks
the mutant lists, with a message naming the bug. Each suite runs in a subprocess the way the
grader runs it; see suite_support.Suite.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from autograder import mutants
from suite_support import (
    PARALLEL_RUNS, REPO, Outcome, Suite, check_asserts_have_messages, check_catalog, check_mutant_caught,
    check_points_add_up, check_solution_passes, listing,
)
from suites import SUITES


@pytest.fixture(scope="module", params=sorted(SUITES))
def suite(request: pytest.FixtureRequest) -> Suite:
    return SUITES[request.param]


@pytest.fixture(scope="module")
def solution_outcomes(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    """Every public and hidden test, run once against the reference solution."""
    return suite.run(suite.solution, tmp_path_factory.mktemp(f"{suite.assignment}-solution") / "report.xml")


def test_solution_passes_every_test(solution_outcomes: list[Outcome]) -> None:
    check_solution_passes(solution_outcomes)


def test_points_add_up_to_assignment_json(suite: Suite, solution_outcomes: list[Outcome]) -> None:
    check_points_add_up(suite, solution_outcomes)


def test_each_test_file_grades_one_task(suite: Suite, solution_outcomes: list[Outcome]) -> None:
    # A mutant's run may select its tasks by file name, so test_<task>.py / test_hidden_<task>.py
    # must hold that task's tests only.
    misplaced = [o for o in solution_outcomes
                 if o.test.split("[")[0].split(".")[-2].removeprefix("test_").removeprefix("hidden_") != o.task]
    assert not misplaced, f"tests in a file not named after their task:\n{listing(misplaced)}"
    missing = [str(p.relative_to(REPO)) for p in suite.task_files(sorted(suite.tasks)) if not p.is_file()]
    assert not missing, f"every task needs a public and a hidden test file; missing: {missing}"


@pytest.mark.parametrize("path", [path for name in sorted(SUITES) for path in SUITES[name].test_files],
                         ids=lambda path: str(path.relative_to(REPO)))
def test_every_assert_has_a_message(path: Path) -> None:
    check_asserts_have_messages(path)


def test_catalog_applies_and_covers_the_contract(suite: Suite) -> None:
    check_catalog(suite)


@pytest.fixture(scope="module")
def mutant_runs(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[list[Outcome]]]]:
    """The run of every mutant this session selects, by (assignment, name), all submitted at once so
    that they overlap, PARALLEL_RUNS at a time."""
    selected = [(item.callspec.params["assignment"], item.callspec.params["mutant"]) for item in request.session.items
                if getattr(item, "originalname", "") == "test_mutant_is_caught" and item.module is request.module]
    with ThreadPoolExecutor(PARALLEL_RUNS) as runner:
        yield {(name, mutant.name): runner.submit(SUITES[name].run_mutant, mutant,
                                                  tmp_path_factory.mktemp(f"{name}-{mutant.name}"))
               for name, mutant in selected}
        # Leaving early (an interrupted session) must not wait for the runs nobody will read.
        runner.shutdown(cancel_futures=True)


@pytest.mark.parametrize(("assignment", "mutant"),
                         [pytest.param(name, mutant, id=f"{name}-{mutant.name}")
                          for name in sorted(SUITES) for mutant in SUITES[name].catalog])
def test_mutant_is_caught(assignment: str, mutant: mutants.Mutant,
                          mutant_runs: dict[tuple[str, str], Future[list[Outcome]]]) -> None:
    check_mutant_caught(SUITES[assignment], mutant, mutant_runs[assignment, mutant.name].result())
