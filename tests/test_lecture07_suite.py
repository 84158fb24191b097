"""The lecture-7 tests, tested.

The reference solution passes every public and hidden test (the hidden test on Mooncake's
conversation trace may skip where that data is absent); the points add up to assignment.json;
every test file grades one task; every assert carries a message; the hidden tests' own oracles
(the trusted LRU/LFU) agree with the hand-derived tables; and every bug in the catalog
(autograder/mutants/lecture07.py) is caught in the tasks it names, with a message naming the bug.
Each suite runs in a subprocess the way the grader runs it; see suite_support.Suite. A mutant's
run is restricted to the test files of its tasks (test_<task>.py and test_hidden_<task>.py), which
keeps this file near a minute.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from autograder import mutants
from suite_support import (
    REPO, Outcome, Suite, check_asserts_have_messages, check_catalog, check_mutant_caught, check_points_add_up,
    check_solution_passes, listing, selected_mutants,
)

SUITE = Suite(
    assignment="lecture07",
    # Every function and method of the contract's paged_kv.py and prefix_cache.py that the catalog
    # must break, by file.
    contract={
        "paged_kv.py": frozenset({
            "BlockPool.__init__", "BlockPool.allocate", "BlockPool.incref", "BlockPool.decref", "BlockPool.refcount",
            "BlockPool.num_free", "PagedSequence.reserve", "PagedSequence.slots", "PagedSequence.free",
        }),
        "prefix_cache.py": frozenset({
            "block_hashes", "PrefixCache.lookup", "PrefixCache.register", "PrefixCache.clear", "PrefixCache.__len__",
            "prefill", "LRUCache.match", "LRUCache.insert", "LRUCache.__contains__", "LFUCache.match",
            "LFUCache.insert", "make_cache", "hit_ratio",
        }),
    },
    min_mutants=15,
    # The hidden hit_ratio tests replay full-size traces; the hypothesis plugin stays (the hidden
    # paged tests use hypothesis).
    pytest_args=("--timeout=120",),
    run_timeout=600,
    # The whole suite takes too long to run once per mutant.
    mutants_run_own_tasks=True,
)


@pytest.fixture(scope="module")
def solution_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    """Every public and hidden test, run once against the reference solution."""
    return SUITE.run(SUITE.solution, tmp_path_factory.mktemp("solution") / "report.xml")


def test_solution_passes_every_test(solution_outcomes: list[Outcome]) -> None:
    check_solution_passes(solution_outcomes)


def test_points_add_up_to_assignment_json(solution_outcomes: list[Outcome]) -> None:
    check_points_add_up(SUITE, solution_outcomes)


def test_each_test_file_grades_one_task(solution_outcomes: list[Outcome]) -> None:
    # A mutant's run selects its tasks by file name, so test_<task>.py / test_hidden_<task>.py must
    # hold that task's tests only.
    misplaced = [o for o in solution_outcomes
                 if o.test.split(".")[-2].removeprefix("test_").removeprefix("hidden_") != o.task]
    assert not misplaced, f"tests in a file not named after their task:\n{listing(misplaced)}"
    missing = [str(p.relative_to(REPO)) for p in SUITE.task_files(sorted(SUITE.tasks)) if not p.is_file()]
    assert not missing, f"every task needs a public and a hidden test file; missing: {missing}"


@pytest.mark.parametrize("path", SUITE.test_files, ids=lambda p: p.name)
def test_every_assert_has_a_message(path: Path) -> None:
    check_asserts_have_messages(path)


def test_catalog_applies_and_covers_the_contract() -> None:
    check_catalog(SUITE)


def test_trusted_references_follow_the_hand_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hidden tests take expected eviction orders and hit ratios from ReferenceLRU/ReferenceLFU;
    # here those references replay the hand-derived scripts and the hand trace.
    monkeypatch.syspath_prepend(str(SUITE.hidden))
    checks = importlib.import_module("_eviction_checks")
    scripts = [("lru", 3, checks.LRU_SCRIPT), ("lfu", 3, checks.LFU_SCRIPT),
               ("lru", 1, checks.TINY_SCRIPT), ("lfu", 1, checks.TINY_SCRIPT)]
    for policy, capacity, script in scripts:
        cache = checks.REFERENCES[policy](capacity)
        universe = {block for _, blocks, _, _, _ in script for block in blocks}
        for number, (op, blocks, want, contents, _) in enumerate(script, 1):
            got = getattr(cache, op)(blocks)
            held = {block for block in universe if block in cache}
            assert (op == "insert" or got == want) and held == contents, (
                f"Reference{policy.upper()}({capacity}) disagrees with the script at step {number} {op}({blocks}): "
                f"returned {got}, holds {sorted(held)}; the script says {want}, {sorted(contents)}"
            )
    for (capacity, policy), want in checks.HAND_HITS.items():
        got = checks.reference_hits(checks.HAND_TRACE, capacity, policy, checks.HAND_BLOCK)
        assert got == want, f"reference hits of the hand trace at capacity {capacity}, {policy}: {got}; by hand {want}"


@pytest.fixture(scope="module")
def mutant_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future]]:
    """Every selected mutant's run, started together so that they overlap (see Suite.mutant_runs)."""
    with SUITE.mutant_runs(selected_mutants(request), tmp_path_factory) as runs:
        yield runs


@pytest.mark.parametrize("mutant", SUITE.catalog, ids=lambda m: m.name)
def test_mutant_is_caught(mutant: mutants.Mutant, mutant_runs: dict[str, Future]) -> None:
    check_mutant_caught(SUITE, mutant, mutant_runs[mutant.name].result())
