"""Every assignment's tests, tested through the grader that grades students.

For each assignment: the reference solution, the starter and every bug of the catalog
(autograder/mutants/<id>.py) are graded by `autograder.harness.run.run` (run_autograder's code
path), and the checks read the results.json files it writes. The reference, the starter and the
first SANDBOXED_MUTANTS mutants of each catalog are graded sandboxed and in-process, where both modes
must agree test by test; the other mutants in-process only (the sandbox's own behaviour is tested by
test_sandbox*, test_hostile and the gradings in both modes; grading every mutant twice doubled the
suite's largest fixture), without the growth guards that follow a failure of their task
(KVLAB_SKIP_SETTLED_GUARDS: what the checks read stays the same, see first_catch.mutant_switches).
The reference passes every test and the points add up to assignment.json; the starter passes none,
each failing with its NotImplementedError; every mutant is caught: some test fails, in the tasks it
lists, with a message naming the bug, and (unless its `public_blind` says why not) a public test
fails too. Statically: every test file grades one task, every assert
carries a message, and the catalog breaks every function the starter stubs.

The gradings run in long-lived subprocesses (tests/support/grade_batch.py), one per grading slot
(support.slots), that take the submissions from one queue, longest first; see support.graders.Graders.
The everyday tier (support.tiers) grades the baselines and, of each catalog, the first mutant of
each task (the first SANDBOXED_MUTANTS in both modes where they are among them); `make test-all`
grades every mutant and checks the rates over the whole catalog.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from autograder import mutants
from autograder.assignment import load_assignment
from support import first_catch
from support.checks import (
    check_asserts_have_messages, check_catalog, check_modes_agree, check_mutant_caught, check_points_add_up,
    check_solution_passes, fails_a_public_test,
)
from support.graders import BACKENDS, Graders, Job, JobResults
from support.repo import REPO
from support.suite import Suite, suites, task_markers
from support.tiers import FULL, params_of, sample, selected
from support.traces import stand_in_traces
from support.verdicts import assert_all_not_implemented, listing

SUITES = suites()
# Every submission is graded in the fixture's background runs; a test waits for the one it reads,
# which on a busy 2-core machine can take most of the session (the default per-test timeout is 300 s).
pytestmark = pytest.mark.timeout(1800)
# At least this share of each catalog's mutants must fail a public test.
PUBLIC_SHARE = 0.9
# Hidden walks are fixed scripts (module 6's block manager and free queue, lecture 7's pool, sequence,
# prefix cache and eviction scripts): their messages say how a value is off, never the value the step
# expected, so resubmitting cannot collect a table of expected states to replay (harvested values).
WALK_MESSAGE = re.compile(r"walk step \d+|\bstep \d+(?: of |[:,] )")
EXPECTED_VALUE = re.compile(r"expected (?:\d|\[|\(|the head, block)")
# The submissions every assignment grades besides its mutants.
BASELINES = ("reference", "starter")
# Mutants of each catalog (its first ones) graded sandboxed as well as in-process.
SANDBOXED_MUTANTS = 2


@pytest.fixture(scope="module")
def gradings(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[JobResults]]]:
    """The grading of every submission this session's selected tests read, by (assignment, label),
    all queued at once (support.graders.Graders)."""
    wanted: dict[str, set[str]] = {}
    for item in selected(request, "gradings"):
        for name in params_of([item], "assignment"):
            labels = wanted.setdefault(name, set())
            labels.update(mutant.name for mutant in params_of([item], "mutant"))
            if "graded_baseline" in item.fixturenames:
                labels.update(BASELINES)
            if "graded_catalog" in item.fixturenames:
                labels.update(m.name for m in SUITES[name].catalog)
    jobs = []
    for name, labels in sorted(wanted.items()):
        suite = SUITES[name]
        base = tmp_path_factory.mktemp(name)
        # Stand-ins even where the real traces are installed: the same code paths at a quarter of the
        # size (3,000 requests, not Mooncake's 12,031), in about 30 gradings. The real trace is graded
        # by test_gradescope_package and test_stated_rules, and by `make`.
        env = stand_in_traces(suite.assignment.traces, base / "traces", real_if_present=False)
        whole = suite.tests_root(base / "root-all")
        jobs += [Job(name, label, getattr(suite.assignment, "solution" if label == "reference" else "starter"), whole,
                     base / label, suite.checks.run_seconds, env) for label in BASELINES if label in labels]
        both = sandboxed(name)
        for mutant in suite.catalog:
            if mutant.name in labels:
                folder = base / mutant.name
                root = suite.tests_root(folder / "root", mutant.tasks) if suite.checks.mutants_run_own_tasks else whole
                submission = mutants.apply(mutant, suite.assignment.solution, folder / "submission")
                # Graded whole where the modes are compared test by test.
                jobs.append(Job(name, mutant.name, submission, root, folder, suite.checks.run_seconds,
                                {**env, **first_catch.mutant_switches(mutant, whole=mutant.name in both)},
                                modes=BACKENDS if mutant.name in both else ("inprocess",)))
    graders = Graders(sorted(jobs, key=longest_first))
    yield graders.futures
    # Leaving early (an interrupted session) must not wait for the runs nobody will read.
    graders.stop()


def sandboxed(assignment: str) -> set[str]:
    """The names of `assignment`'s mutants graded in both modes."""
    return {m.name for m in SUITES[assignment].catalog[:SANDBOXED_MUTANTS]}


def longest_first(job: Job) -> tuple[bool, float, bool]:
    """Sort key of the likely longest gradings first, so that the last two end close together: the
    references (every test), then the submissions of the assignments allowed the most time, the
    starters (each test fails at once) last."""
    return job.label != "reference", -job.seconds, job.label == "starter"


def graded(gradings: dict[tuple[str, str], Future[JobResults]], assignment: str, label: str) -> JobResults:
    return gradings[assignment, label].result()


@pytest.fixture
def graded_baseline(gradings: dict[tuple[str, str], Future[JobResults]],
                    assignment: str) -> dict[str, JobResults]:
    """The reference's and the starter's grades."""
    return {label: graded(gradings, assignment, label) for label in BASELINES}


@pytest.fixture
def graded_catalog(gradings: dict[tuple[str, str], Future[JobResults]], assignment: str) -> dict[str, JobResults]:
    """Every mutant's grade, by name."""
    return {m.name: graded(gradings, assignment, m.name) for m in SUITES[assignment].catalog}


ASSIGNMENTS = pytest.mark.parametrize("assignment", sorted(SUITES))


@ASSIGNMENTS
@pytest.mark.parametrize("mode", BACKENDS)
def test_solution_passes_every_test(graded_baseline: dict[str, JobResults], mode: str) -> None:
    check_solution_passes(graded_baseline["reference"].outcomes(mode))


@ASSIGNMENTS
def test_points_add_up_to_assignment_json(assignment: str, graded_baseline: dict[str, JobResults]) -> None:
    check_points_add_up(SUITES[assignment], graded_baseline["reference"].outcomes("sandbox"))


@ASSIGNMENTS
@pytest.mark.parametrize("mode", BACKENDS)
def test_starter_fails_every_test_not_implemented(graded_baseline: dict[str, JobResults], mode: str) -> None:
    starter = graded_baseline["starter"]
    assert_all_not_implemented(starter.outcomes(mode), starter.results[mode]["output"])
    assert starter.results[mode]["score"] == 0, f"the starter scores {starter.results[mode]['score']} ({mode}), not 0"


@ASSIGNMENTS
@pytest.mark.parametrize("label", BASELINES)
def test_modes_agree_on_baseline(graded_baseline: dict[str, JobResults], label: str) -> None:
    check_modes_agree(graded_baseline[label])


@ASSIGNMENTS
def test_each_test_file_grades_one_task(assignment: str) -> None:
    # A mutant's grading may hold only its tasks' files, so test_<task>.py / test_hidden_<task>.py
    # must hold that task's tests only.
    suite = SUITES[assignment]
    misplaced = {str(p.relative_to(REPO)): sorted(task_markers(p)) for p in suite.test_files
                 if p.name.startswith("test_")
                 and task_markers(p) != {p.stem.removeprefix("test_").removeprefix("hidden_")}}
    assert not misplaced, f"test files whose task markers are not (only) the task they are named after: {misplaced}"
    missing = [str(p.relative_to(REPO)) for p in suite.task_files(sorted(suite.tasks)) if not p.is_file()]
    assert not missing, f"every task needs a public and a hidden test file; missing: {missing}"


def test_tests_root_of_named_tests_splits_the_points(tmp_path: Path) -> None:
    # A hostile case graded on the tests its attack aims at (Suite.tests_root's `tests`): the root
    # defines those test functions only, and the task's points of two roots that split its tests
    # between them add up to assignment.json's.
    suite, task = SUITES["lecture07"], "paged_sequence"
    names = sorted({node.name for path in suite.task_files([task])
                    for node in ast.parse(path.read_text(encoding="utf-8")).body
                    if isinstance(node, ast.FunctionDef) and node.name.startswith("test")})
    halves = (names[::2], names[1::2])
    points = []
    for i, kept in enumerate(halves):
        root = load_assignment("lecture07", suite.tests_root(tmp_path / f"half-{i}", (task,), kept))
        defined = {node.name for path in [*root.public_tests.glob("test_*.py"), *root.hidden_tests.glob("test_*.py")]
                   for node in ast.parse(path.read_text(encoding="utf-8")).body
                   if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}
        assert defined == set(kept), f"a root of {kept} defines {sorted(defined)}"
        points += [t.points for t in root.tasks]
    assert len(points) == 2 and abs(sum(points) - suite.tasks[task]) < 1e-6 and min(points) > 0, (
        f"the two halves of {task}'s tests are worth {points}; assignment.json says {suite.tasks[task]}")
    with pytest.raises(AssertionError, match="test_no_such_test"):
        suite.tests_root(tmp_path / "typo", (task,), ("test_no_such_test",))


@pytest.mark.parametrize("path", [path for suite in SUITES.values() for path in suite.test_files],
                         ids=lambda path: str(path.relative_to(REPO)))
def test_every_assert_has_a_message(path: Path) -> None:
    check_asserts_have_messages(path)


@ASSIGNMENTS
def test_catalog_applies_and_covers_the_contract(assignment: str) -> None:
    check_catalog(SUITES[assignment])


@pytest.mark.parametrize("call_timeout", [0.0, 10.0, 60.0])
def test_catalog_refuses_a_call_timeout_the_grader_would_not_take(call_timeout: float) -> None:
    # A limit must be positive, and KVLAB_CALL_TIMEOUT only ever lowers one: lecture07 allows 10 s per
    # call, so 10 s or more would grade the mutant with that limit while its entry says otherwise.
    suite = Suite(SUITES["lecture07"].assignment)
    # Suite is a frozen dataclass: its cached catalog is replaced where cached_property keeps it.
    suite.__dict__["catalog"] = [dataclasses.replace(m, call_timeout=call_timeout) if m.call_timeout else m
                                 for m in SUITES["lecture07"].catalog]
    with pytest.raises(AssertionError, match="call_timeout"):
        check_catalog(suite)


# The everyday tier grades the first mutant of each task (the catalog's first is one, graded in both modes).
CATALOG = [(name, mutant) for name, suite in sorted(SUITES.items()) for mutant in suite.catalog]
MUTANTS = sample(CATALOG, group=lambda entry: (entry[0], entry[1].tasks[0]), args=lambda entry: entry,
                 ids=lambda entry: f"{entry[0]}-{entry[1].name}")


@pytest.mark.parametrize(("assignment", "mutant"), MUTANTS)
def test_mutant_is_caught(assignment: str, mutant: mutants.Mutant,
                          gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    grade = graded(gradings, assignment, mutant.name)
    check_mutant_caught(SUITES[assignment], mutant, grade.outcomes("inprocess"))
    if mutant.name in sandboxed(assignment):
        check_modes_agree(grade)


@pytest.mark.parametrize(("assignment", "mutant"), MUTANTS)
def test_mutant_keeps_its_first_catch(assignment: str, mutant: mutants.Mutant,
                                      gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    # No catch is lost: the recorded first hidden failure still comes from the same test, or from one
    # whose message quotes the same rule.
    outcomes = graded(gradings, assignment, mutant.name).outcomes("inprocess")
    first_catch.check_kept(assignment, "catalog", mutant.name, outcomes)


@pytest.mark.parametrize(("assignment", "mutant"), [p for p in MUTANTS if not p.values[1].public_blind])
def test_mutant_fails_a_public_test(assignment: str, mutant: mutants.Mutant,
                                    gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    outcomes = graded(gradings, assignment, mutant.name).outcomes("inprocess")
    assert fails_a_public_test(outcomes), (
        f"mutant {mutant.name} ({mutant.description}) passes every public test, so a student cannot see it "
        f"before submitting; strengthen a public test, or say in its public_blind why none can:\n"
        f"{listing([o for o in outcomes if not o.passed])}")


@FULL
@ASSIGNMENTS
def test_hidden_walks_show_no_expected_value(assignment: str, graded_catalog: dict[str, JobResults]) -> None:
    shown = [f"{name}: {outcome.test}: {outcome.message[:300]}" for name, grade in sorted(graded_catalog.items())
             for outcome in grade.outcomes("inprocess") if not outcome.public and not outcome.passed
             and WALK_MESSAGE.search(outcome.message) and EXPECTED_VALUE.search(outcome.message)]
    assert not shown, "hidden walk messages that show the expected value:\n" + "\n".join(shown[:20])


@FULL
@ASSIGNMENTS
def test_most_mutants_fail_a_public_test(assignment: str, graded_catalog: dict[str, JobResults]) -> None:
    blind = sorted(name for name, grade in graded_catalog.items() if not fails_a_public_test(grade.outcomes("inprocess")))
    share = 1 - len(blind) / len(graded_catalog)
    assert share >= PUBLIC_SHARE, (f"only {share:.0%} of {assignment}'s mutants fail a public test "
                                   f"({PUBLIC_SHARE:.0%} needed); public tests pass on: {', '.join(blind)}")
