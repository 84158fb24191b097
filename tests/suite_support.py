"""What the repository's tests of an assignment's test suites share.

`Suite` names one assignment's reference solution, public and hidden tests, tasks and bug catalog,
and runs those tests against a submission folder the way the grader runs them (--noconftest
--assert=plain, with the in-process `student` fixture of kvlab.testing), reading the results from
--junitxml as `Outcome`s. The `check_*` functions are the assertions test_suites.py makes for every
assignment; `assert_all_not_implemented` is the starter's "worth zero
points" check of test_starter.py and test_release.py. Every assert carries a message, since a
failure here must say what went wrong without the reader opening this file.

Imported as `from suite_support import ...`: tests/ has no __init__.py, so pytest's default
("prepend") import mode puts tests/ on sys.path.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from autograder import mutants
from kvlab.trace import mooncake_dir

REPO = Path(__file__).resolve().parents[1]

# Assignments with both a task table and a reference solution: those with a starter to check.
ASSIGNMENT_IDS = sorted(
    path.parent.name for path in (REPO / "assignments").glob("*/assignment.json")
    if (REPO / "solutions" / path.parent.name).is_dir()
)

# The one skip a run may report: autograder/hidden/lecture07/test_hidden_hit_ratio.py's test on
# Mooncake's conversation trace, which the repository does not ship (kvlab.trace.mooncake_dir).
# Matched by its whole reason, so any other skip (or this one reworded) still fails the checks.
DATA_FILE = "conversation_trace.jsonl"
DATA_SKIP_REASON = f"Mooncake's {DATA_FILE} is not installed (see kvlab.trace.mooncake_dir)"

# Mutant runs at a time: each is a pytest process keeping about one core busy.
PARALLEL_RUNS = 2

# Characters of a message shown per test in a listing: enough for the first lines of a failure.
LISTED_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    """One test's result as the junit report gives it."""

    test: str  # "<classname>.<name>", e.g. "assignments.lecture02.tests.test_kv_cache.test_update"
    task: str  # from kvlab.testing's task property; "ungraded" for a test without the marker
    points: float
    status: str  # "passed", "failed", "error" or "skipped"
    message: str  # the failure and error messages joined by " | ", or the skip reason

    @property
    def passed(self) -> bool:
        """True only for a pass: a skip earns nothing either."""
        return self.status == "passed"

    @property
    def data_skip(self) -> bool:
        """The tolerated skip, and only while its cause holds: the Mooncake trace really is absent.

        The test runs inherit this process's environment, so both resolve mooncake_dir() alike.
        """
        return (self.status == "skipped" and self.message == DATA_SKIP_REASON
                and not (mooncake_dir() / DATA_FILE).is_file())


def failure_message(node: ET.Element) -> str:
    """The whole exception message of a failure or error element.

    pytest may shorten the `message` attribute; the element text holds the report, whose "E" lines
    are the exception (never the test's source). A `pytest.fail(..., pytrace=False)` report has no
    "E" lines: its text is the message itself.
    """
    text = node.text or ""
    lines = [re.sub(r"^E\s{1,7}", "", line) for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines) or text.strip() or node.get("message", "")


def read_junit(report: Path) -> list[Outcome]:
    """One Outcome per test case of a pytest --junitxml report, in report order."""
    assert report.is_file(), f"pytest wrote no junit report at {report}"
    outcomes = []
    for case in ET.parse(report).iter("testcase"):
        task = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "task"), "")
        name, points = ast.literal_eval(task) if task else ("ungraded", 0.0)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        problems = [node for node in (failure, error) if node is not None]
        if problems:
            # A failing test that also errors in teardown is a failure: the test itself went wrong.
            status = "failed" if failure is not None else "error"
            message = " | ".join(failure_message(node) for node in problems)
        elif skipped is not None:
            status, message = "skipped", skipped.get("message", "")
        else:
            status, message = "passed", ""
        outcomes.append(Outcome(f"{case.get('classname')}.{case.get('name')}", name, float(points), status, message))
    return outcomes


def listing(outcomes: Sequence[Outcome]) -> str:
    """One line per outcome for a failure message: task, test, status and the start of its message."""
    return "\n".join(f"  [{o.task}] {o.test}: {o.status}: {o.message[:LISTED_CHARS]}" for o in outcomes)


def not_passed(outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes that did not pass, the tolerated data skip aside."""
    return [o for o in outcomes if not o.passed and not o.data_skip]


def assert_all_not_implemented(outcomes: Sequence[Outcome], output: str) -> None:
    """Every test failed with a NotImplementedError (the data skip aside); none passed or errored.

    `output` is pytest's console output, shown when the report holds no test at all.
    """
    assert outcomes, f"no test ran; pytest's output:\n{output[-3000:]}"
    wrong = [o for o in outcomes
             if not (o.status == "failed" and "NotImplementedError" in o.message) and not o.data_skip]
    assert not wrong, (f"{len(wrong)} of {len(outcomes)} tests did not fail with NotImplementedError on the "
                       f"starter (a test that passes on a stub gives points for nothing):\n{listing(wrong)}")


def enclosing_function(tree: ast.Module, line: int) -> str:
    """Qualified name (Class.method or function) of the innermost def spanning `line`."""
    found = "<module>"
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef) and member.lineno <= line <= (member.end_lineno or 0):
                found = f"{node.name}.{member.name}" if member is not node else member.name
    return found


@dataclass(frozen=True)
class Suite:
    """One assignment's public and hidden tests, as the repository's suite tests run them.

    The fields are what differs between assignments; the paths, tasks and catalog follow from
    `assignment` by the repository's layout.
    """

    assignment: str
    # Submitted file -> the functions and methods of the student contract the catalog must break.
    contract: dict[str, frozenset[str]]
    min_mutants: int
    # Extra pytest options of every run: the per-test timeout, plugins to leave out.
    pytest_args: tuple[str, ...]
    # Seconds a whole run may take before it counts as hung.
    run_timeout: int
    # True: a mutant's run holds only the test files of its tasks, and each of them must lose points.
    # False: it runs every test, and no task outside the mutant's may lose points.
    mutants_run_own_tasks: bool

    @property
    def solution(self) -> Path:
        """The reference solution's folder (the files `files` of assignment.json)."""
        return REPO / "solutions" / self.assignment

    @property
    def public(self) -> Path:
        """The public tests, shipped to students."""
        return REPO / "assignments" / self.assignment / "tests"

    @property
    def hidden(self) -> Path:
        """The hidden tests, run by the grader only."""
        return REPO / "autograder" / "hidden" / self.assignment

    @cached_property
    def tasks(self) -> dict[str, int]:
        """Task name -> points, from assignment.json."""
        assignment = json.loads((REPO / "assignments" / self.assignment / "assignment.json").read_text())
        return {task["name"]: task["points"] for task in assignment["tasks"]}

    @cached_property
    def catalog(self) -> list[mutants.Mutant]:
        """The bug catalog, autograder/mutants/<assignment>.py."""
        return mutants.load(self.assignment)

    @property
    def test_files(self) -> list[Path]:
        """Every .py file of the public and hidden tests, helpers included."""
        return sorted([*self.public.glob("*.py"), *self.hidden.glob("*.py")])

    def task_files(self, tasks: Sequence[str]) -> list[Path]:
        """The public and hidden test files of `tasks`: test_<task>.py and test_hidden_<task>.py."""
        return [path for task in tasks for path in (self.public / f"test_{task}.py", self.hidden / f"test_hidden_{task}.py")]

    def run(self, submission: Path, report: Path, paths: Sequence[Path] = ()) -> list[Outcome]:
        """Run the tests in `paths` (default: all public and hidden tests) against `submission`."""
        command = [
            sys.executable, "-m", "pytest", "-p", "kvlab.testing", "--submission", str(submission),
            "--noconftest", "--assert=plain", "-q", "-p", "no:cacheprovider", *self.pytest_args,
            f"--junitxml={report}", *map(str, paths or (self.public, self.hidden)),
        ]
        run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=self.run_timeout)
        assert run.returncode in (0, 1) and report.is_file(), (
            f"pytest exited with {run.returncode} (0 or 1 expected):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        )
        outcomes = read_junit(report)
        assert outcomes, f"the run reported no tests:\n{run.stdout[-3000:]}"
        return outcomes

    def run_mutant(self, mutant: mutants.Mutant, folder: Path) -> list[Outcome]:
        """The mutant's tests (see `mutants_run_own_tasks`), run against the solution with the mutant applied."""
        submission = mutants.apply(mutant, self.solution, folder / "submission")
        return self.run(submission, folder / "report.xml", self.task_files(mutant.tasks) if self.mutants_run_own_tasks else ())


def check_solution_passes(outcomes: Sequence[Outcome]) -> None:
    """The reference solution passes every test (the data skip aside)."""
    failed = not_passed(outcomes)
    assert not failed, f"the reference solution does not pass {len(failed)} tests:\n{listing(failed)}"


def check_points_add_up(suite: Suite, outcomes: Sequence[Outcome]) -> None:
    """The tests' points per task equal assignment.json's, and every task has public tests."""
    totals: dict[str, float] = defaultdict(float)
    for outcome in outcomes:
        totals[outcome.task] += outcome.points
    assert dict(totals) == {task: float(points) for task, points in suite.tasks.items()}, (
        f"points per task in the tests {dict(totals)} differ from assignment.json {suite.tasks}"
    )
    public_tasks = {o.task for o in outcomes if o.test.startswith("assignments.")}
    assert public_tasks == set(suite.tasks), f"every task needs public tests; found public tests for {sorted(public_tasks)}"


def check_asserts_have_messages(path: Path) -> None:
    """Hidden tests run with --assert=plain: a bare assert would tell the student nothing."""
    bare = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"{path.relative_to(REPO)}: assert without a message at lines {bare}"


def check_catalog(suite: Suite) -> None:
    """Every mutant applies, stays valid Python, names known tasks, and together they break the contract."""
    assert len(suite.catalog) >= suite.min_mutants, (
        f"the catalog should hold at least {suite.min_mutants} mutants; it holds {len(suite.catalog)}")
    covered: dict[str, set[str]] = defaultdict(set)
    for mutant in suite.catalog:
        assert mutant.file in suite.contract, f"mutant {mutant.name} edits {mutant.file}, not a submitted file"
        text = (suite.solution / mutant.file).read_text(encoding="utf-8")
        mutated = mutants.mutate(mutant, text)
        assert mutated != text, f"mutant {mutant.name} changes nothing"
        try:
            ast.parse(mutated)
        except SyntaxError as error:
            pytest.fail(f"mutant {mutant.name} makes {mutant.file} invalid Python: {error}")
        assert mutant.tasks and set(mutant.tasks) <= set(suite.tasks), f"mutant {mutant.name} names unknown tasks {mutant.tasks}"
        tree = ast.parse(text)
        for old, _ in mutant.replacements:
            covered[mutant.file].add(enclosing_function(tree, text[: text.index(old)].count("\n") + 1))
    for file, functions in suite.contract.items():
        assert functions <= covered[file], f"no mutant breaks {sorted(functions - covered[file])} in {file}"


def check_mutant_caught(suite: Suite, mutant: mutants.Mutant, outcomes: Sequence[Outcome]) -> None:
    """Some test fails, in the tasks the mutant names, and one message contains its `expect` words."""
    failed = not_passed(outcomes)
    assert failed, f"mutant {mutant.name} ({mutant.description}) passes every test"
    lost = {o.task for o in failed}
    if suite.mutants_run_own_tasks:
        assert lost == set(mutant.tasks), (
            f"mutant {mutant.name} ({mutant.description}) loses points in {sorted(lost)}; the catalog expects "
            f"{sorted(mutant.tasks)}:\n{listing(failed)}"
        )
    else:
        assert lost <= set(mutant.tasks), (
            f"mutant {mutant.name} loses points in {sorted(lost)}; the catalog expects only "
            f"{sorted(mutant.tasks)}:\n{listing(failed)}"
        )
    assert any(mutant.expect.casefold() in o.message.casefold() for o in failed), (
        f"no failure message of mutant {mutant.name} contains {mutant.expect!r}:\n{listing(failed)}"
    )
