"""The lecture-2 tests, tested.

The reference solution passes every public and hidden test; the points add up to assignment.json;
every assert carries a message; and every bug in the catalog (autograder/mutants/lecture02.py) is
caught: some test fails, none outside the tasks the mutant lists, with a message naming the bug.
Each suite runs in a subprocess the way the grader runs it (--noconftest --assert=plain), with the
in-process `student` fixture of kvlab.testing, and reports through --junitxml.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import mutants

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "lecture02"
SOLUTION = REPO / "solutions" / ASSIGNMENT
PUBLIC = REPO / "assignments" / ASSIGNMENT / "tests"
HIDDEN = REPO / "autograder" / "hidden" / ASSIGNMENT
TASKS = {t["name"]: t["points"] for t in json.loads((REPO / "assignments" / ASSIGNMENT / "assignment.json").read_text())["tasks"]}
CATALOG = mutants.load(ASSIGNMENT)

# Every function and method of the contract's kv_decode.py: the catalog must break each of them.
CONTRACT = {
    "KVCache.__init__", "KVCache.update", "KVCache.advance", "KVCache.nbytes",
    "greedy_decode", "kv_bytes_per_token", "kv_cache_bytes",
}


@dataclass(frozen=True)
class Outcome:
    """One test's result as the junit report gives it."""

    test: str
    task: str
    points: float
    passed: bool
    message: str


def failure_message(node: ET.Element) -> str:
    """The whole exception message of a failure: pytest shortens the `message` attribute, but the
    element text holds the report, whose "E" lines are the message (never the test's source)."""
    lines = [re.sub(r"^E\s{1,7}", "", line) for line in (node.text or "").splitlines() if line.startswith("E ")]
    return "\n".join(lines) or node.get("message", "")


def run_suite(submission: Path, report: Path) -> list[Outcome]:
    """Run the public and hidden tests against `submission`; one Outcome per test."""
    command = [
        sys.executable, "-m", "pytest", "-p", "kvlab.testing", "--submission", str(submission),
        "--noconftest", "--assert=plain", "-q", "-p", "no:cacheprovider",
        # Not used by these tests; skipping its import saves half a second per run.
        "-p", "no:hypothesispytest",
        "--timeout=60", f"--junitxml={report}", str(PUBLIC), str(HIDDEN),
    ]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1) and report.is_file(), (
        f"pytest exited with {run.returncode} (0 or 1 expected):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    )
    outcomes = []
    for case in ET.parse(report).iter("testcase"):
        task = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "task"), "")
        name, points = ast.literal_eval(task) if task else ("ungraded", 0.0)
        problems = [p for p in (case.find("failure"), case.find("error")) if p is not None]
        outcomes.append(Outcome(
            test=f"{case.get('classname')}.{case.get('name')}",
            task=name,
            points=points,
            passed=not problems and case.find("skipped") is None,
            message=" | ".join(failure_message(p) for p in problems),
        ))
    assert outcomes, f"the run reported no tests:\n{run.stdout[-3000:]}"
    return outcomes


def listing(outcomes: list[Outcome]) -> str:
    return "\n".join(f"  [{o.task}] {o.test}: {o.message[:300]}" for o in outcomes)


@pytest.fixture(scope="module")
def solution_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    return run_suite(SOLUTION, tmp_path_factory.mktemp("solution") / "report.xml")


def test_solution_passes_every_test(solution_outcomes: list[Outcome]) -> None:
    failed = [o for o in solution_outcomes if not o.passed]
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


@pytest.mark.parametrize("path", sorted([*PUBLIC.glob("*.py"), *HIDDEN.glob("*.py")]), ids=lambda p: p.name)
def test_every_assert_has_a_message(path: Path) -> None:
    bare = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Assert) and node.msg is None]
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
    assert len(CATALOG) >= 12, f"the catalog should hold at least 12 mutants; it holds {len(CATALOG)}"
    text = (SOLUTION / "kv_decode.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    covered = set()
    for mutant in CATALOG:
        mutated = mutants.mutate(mutant, text)
        assert mutated != text, f"mutant {mutant.name} changes nothing"
        ast.parse(mutated)
        assert set(mutant.tasks) <= set(TASKS), f"mutant {mutant.name} names unknown tasks {mutant.tasks}"
        for old, _ in mutant.replacements:
            covered.add(enclosing_function(tree, text[: text.index(old)].count("\n") + 1))
    assert CONTRACT <= covered, f"no mutant breaks {sorted(CONTRACT - covered)}"


@pytest.mark.parametrize("mutant", CATALOG, ids=lambda m: m.name)
def test_mutant_is_caught(mutant: mutants.Mutant, tmp_path: Path) -> None:
    outcomes = run_suite(mutants.apply(mutant, SOLUTION, tmp_path / "submission"), tmp_path / "report.xml")
    failed = [o for o in outcomes if not o.passed]
    assert failed, f"mutant {mutant.name} ({mutant.description}) passes every test"
    lost = {o.task for o in failed}
    assert lost <= set(mutant.tasks), (
        f"mutant {mutant.name} loses points in {sorted(lost)}; the catalog expects only {sorted(mutant.tasks)}:\n{listing(failed)}"
    )
    assert any(mutant.expect.casefold() in o.message.casefold() for o in failed), (
        f"no failure message of mutant {mutant.name} contains {mutant.expect!r}:\n{listing(failed)}"
    )
