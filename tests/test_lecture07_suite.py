"""The lecture-7 tests, tested.

The reference solution passes every public and hidden test; the points add up to assignment.json;
every test file grades one task; every assert carries a message; the hidden tests' own oracles
(the trusted LRU/LFU) agree with the hand-derived tables; and every bug in the catalog
(autograder/mutants/lecture07.py) is caught in the tasks it names, with a message naming the bug.
Each suite runs in a subprocess the way the grader runs it (--noconftest --assert=plain), with the
in-process `student` fixture of kvlab.testing, and reports through --junitxml. A mutant's run is
restricted to the test files of its tasks (test_<task>.py and test_hidden_<task>.py), which keeps
this file near a minute.
"""
from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import mutants

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "lecture07"
SOLUTION = REPO / "solutions" / ASSIGNMENT
PUBLIC = REPO / "assignments" / ASSIGNMENT / "tests"
HIDDEN = REPO / "autograder" / "hidden" / ASSIGNMENT
TASKS = {t["name"]: t["points"] for t in json.loads((REPO / "assignments" / ASSIGNMENT / "assignment.json").read_text())["tasks"]}
CATALOG = mutants.load(ASSIGNMENT)

# Every function and method of the contract's paged_kv.py and prefix_cache.py that the catalog
# must break, by file.
CONTRACT = {
    "paged_kv.py": {
        "BlockPool.__init__", "BlockPool.allocate", "BlockPool.incref", "BlockPool.decref", "BlockPool.refcount",
        "BlockPool.num_free", "PagedSequence.reserve", "PagedSequence.slots", "PagedSequence.free",
    },
    "prefix_cache.py": {
        "block_hashes", "PrefixCache.lookup", "PrefixCache.register", "PrefixCache.clear", "PrefixCache.__len__",
        "prefill", "LRUCache.match", "LRUCache.insert", "LRUCache.__contains__", "LFUCache.match",
        "LFUCache.insert", "make_cache", "hit_ratio",
    },
}

# Mutant runs at a time: each is a pytest process keeping about one core busy.
PARALLEL_RUNS = 2

# The only test allowed to skip on the reference solution, and the reason it gives.
DATA_SKIP = "is not installed"


@dataclass(frozen=True)
class Outcome:
    """One test's result as the junit report gives it."""

    test: str
    task: str
    points: float
    passed: bool
    skipped: str
    message: str


def task_files(tasks: Sequence[str]) -> list[Path]:
    """The public and hidden test files of `tasks`."""
    return [path for task in tasks for path in (PUBLIC / f"test_{task}.py", HIDDEN / f"test_hidden_{task}.py")]


def run_suite(submission: Path, report: Path, paths: Sequence[Path] = (PUBLIC, HIDDEN)) -> list[Outcome]:
    """Run the tests in `paths` against `submission`; one Outcome per test."""
    command = [
        sys.executable, "-m", "pytest", "-p", "kvlab.testing", "--submission", str(submission),
        "--noconftest", "--assert=plain", "-q", "-p", "no:cacheprovider",
        "--timeout=120", f"--junitxml={report}", *map(str, paths),
    ]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1) and report.is_file(), (
        f"pytest exited with {run.returncode} (0 or 1 expected):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    )
    outcomes = []
    for case in ET.parse(report).iter("testcase"):
        task = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "task"), "")
        name, points = ast.literal_eval(task) if task else ("ungraded", 0.0)
        problems = [p for p in (case.find("failure"), case.find("error")) if p is not None]
        skipped = case.find("skipped")
        outcomes.append(Outcome(
            test=f"{case.get('classname')}.{case.get('name')}",
            task=name,
            points=points,
            passed=not problems and skipped is None,
            skipped="" if skipped is None else skipped.get("message", "skipped"),
            message=" | ".join(p.get("message", "") for p in problems),
        ))
    assert outcomes, f"the run reported no tests:\n{run.stdout[-3000:]}"
    return outcomes


def listing(outcomes: list[Outcome]) -> str:
    return "\n".join(f"  [{o.task}] {o.test}: {(o.message or o.skipped)[:300]}" for o in outcomes)


@pytest.fixture(scope="module")
def solution_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    return run_suite(SOLUTION, tmp_path_factory.mktemp("solution") / "report.xml")


def test_solution_passes_every_test(solution_outcomes: list[Outcome]) -> None:
    failed = [o for o in solution_outcomes if not o.passed and not (o.skipped and DATA_SKIP in o.skipped)]
    assert not failed, f"the reference solution fails {len(failed)} tests:\n{listing(failed)}"


def test_points_add_up_to_assignment_json(solution_outcomes: list[Outcome]) -> None:
    totals: dict[str, float] = defaultdict(float)
    for outcome in solution_outcomes:
        totals[outcome.task] += outcome.points
    assert dict(totals) == {task: float(points) for task, points in TASKS.items()}, (
        f"points per task in the tests {dict(totals)} differ from assignment.json {TASKS}"
    )
    public_tasks = {o.task for o in solution_outcomes if o.test.startswith("assignments.")}
    assert public_tasks == set(TASKS), f"every task needs public tests; found public tests for {sorted(public_tasks)}"


def test_each_test_file_grades_one_task(solution_outcomes: list[Outcome]) -> None:
    # A mutant's run selects its tasks by file name, so test_<task>.py / test_hidden_<task>.py must
    # hold that task's tests only.
    misplaced = [o for o in solution_outcomes
                 if o.test.split(".")[-2].removeprefix("test_").removeprefix("hidden_") != o.task]
    assert not misplaced, f"tests in a file not named after their task:\n{listing(misplaced)}"
    missing = [str(p.relative_to(REPO)) for p in task_files(sorted(TASKS)) if not p.is_file()]
    assert not missing, f"every task needs a public and a hidden test file; missing: {missing}"


@pytest.mark.parametrize("path", sorted([*PUBLIC.glob("*.py"), *HIDDEN.glob("*.py")]), ids=lambda p: p.name)
def test_every_assert_has_a_message(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"{path.relative_to(REPO)}: assert without a message at lines {bare}"


def enclosing_function(tree: ast.Module, line: int) -> str:
    """Qualified name (Class.method or function) of the innermost def spanning `line`."""
    found = "<module>"
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef) and member.lineno <= line <= (member.end_lineno or 0):
                found = f"{node.name}.{member.name}" if member is not node else member.name
    return found


def test_catalog_applies_and_covers_the_contract() -> None:
    assert len(CATALOG) >= 15, f"the catalog should hold at least 15 mutants; it holds {len(CATALOG)}"
    covered: dict[str, set[str]] = defaultdict(set)
    for mutant in CATALOG:
        assert mutant.file in CONTRACT, f"mutant {mutant.name} edits {mutant.file}, not a submitted file"
        text = (SOLUTION / mutant.file).read_text(encoding="utf-8")
        mutated = mutants.mutate(mutant, text)
        assert mutated != text, f"mutant {mutant.name} changes nothing"
        ast.parse(mutated)
        assert mutant.tasks and set(mutant.tasks) <= set(TASKS), f"mutant {mutant.name} names unknown tasks {mutant.tasks}"
        tree = ast.parse(text)
        for old, _ in mutant.replacements:
            covered[mutant.file].add(enclosing_function(tree, text[: text.index(old)].count("\n") + 1))
    for file, functions in CONTRACT.items():
        assert functions <= covered[file], f"no mutant breaks {sorted(functions - covered[file])} in {file}"


def test_trusted_references_follow_the_hand_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hidden tests take expected eviction orders and hit ratios from ReferenceLRU/ReferenceLFU;
    # here those references replay the hand-derived scripts and the hand trace.
    monkeypatch.syspath_prepend(str(HIDDEN))
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


def run_mutant(mutant: mutants.Mutant, folder: Path) -> list[Outcome]:
    """The tests of the mutant's tasks, run against the solution with the mutant applied."""
    submission = mutants.apply(mutant, SOLUTION, folder / "submission")
    return run_suite(submission, folder / "report.xml", task_files(mutant.tasks))


@pytest.fixture(scope="module")
def mutant_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future]]:
    """The run of every selected mutant, all submitted at once, PARALLEL_RUNS at a time, in test order."""
    selected = [item.callspec.params["mutant"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_mutant_is_caught" and item.module is request.module]
    with ThreadPoolExecutor(PARALLEL_RUNS) as runner:
        yield {m.name: runner.submit(run_mutant, m, tmp_path_factory.mktemp(m.name)) for m in selected}
        runner.shutdown(cancel_futures=True)


@pytest.mark.parametrize("mutant", CATALOG, ids=lambda m: m.name)
def test_mutant_is_caught(mutant: mutants.Mutant, mutant_runs: dict[str, Future]) -> None:
    outcomes = mutant_runs[mutant.name].result()
    failed = [o for o in outcomes if not o.passed]
    lost = {o.task for o in failed}
    assert lost == set(mutant.tasks), (
        f"mutant {mutant.name} ({mutant.description}) loses points in {sorted(lost)}; the catalog expects "
        f"{sorted(mutant.tasks)}:\n{listing(failed)}"
    )
    assert any(mutant.expect.casefold() in o.message.casefold() for o in failed), (
        f"no failure message of mutant {mutant.name} contains {mutant.expect!r}:\n{listing(failed)}"
    )
