"""The assertions test_suites.py and test_corpus.py make on what the grader wrote (`check_*`), and
what they ask of an outcome list (`fails_a_public_test`). Every assert carries a message.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from autograder import mutants
from support.graders import JobResults
from support.repo import REPO
from support.suite import Suite
from support.verdicts import Verdict, listing, not_passed


def enclosing_function(tree: ast.Module, line: int) -> str:
    """Qualified name (Class.method or function) of the innermost def spanning `line`."""
    found = "<module>"
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef) and member.lineno <= line <= (member.end_lineno or 0):
                found = f"{node.name}.{member.name}" if member is not node else member.name
    return found


def check_modes_agree(graded: JobResults) -> None:
    """The in-process grade has the sandboxed grade's tests with the same outcome each."""
    # By name alone: results.json numbers a task's failed tests first, so a test whose outcome
    # differs between the modes has another number in each.
    sandbox = {o.test.split(" ", 1)[-1]: o for o in graded.outcomes("sandbox")}
    inprocess = {o.test.split(" ", 1)[-1]: o for o in graded.outcomes("inprocess")}
    assert sandbox.keys() == inprocess.keys(), (
        f"{graded.job.label}: the modes graded different tests: only sandboxed {sorted(sandbox.keys() - inprocess.keys())}, "
        f"only in-process {sorted(inprocess.keys() - sandbox.keys())}")
    differ = [name for name in sandbox if sandbox[name].status != inprocess[name].status]
    assert not differ, (f"{graded.job.label}: sandboxed and in-process outcomes differ:\n"
                        + "\n".join(f"  sandbox {listing([sandbox[n]])}\n  in-process {listing([inprocess[n]])}"
                                    for n in differ))


def check_solution_passes(outcomes: Sequence[Verdict]) -> None:
    """The reference solution passes every test."""
    failed = not_passed(outcomes)
    assert not failed, f"the reference solution does not pass {len(failed)} tests:\n{listing(failed)}"


def check_points_add_up(suite: Suite, outcomes: Sequence[Verdict]) -> None:
    """The tests' points per task equal assignment.json's, and every task has public tests."""
    totals: dict[str, float] = defaultdict(float)
    for outcome in outcomes:
        totals[outcome.task] += outcome.points
    # Summed floats (25 cases of 0.04) drift in the last bits; results.json's six decimals do not.
    assert {task: round(total, 6) for task, total in totals.items()} == {task: float(points) for task, points in suite.tasks.items()}, (
        f"points per task in the tests {dict(totals)} differ from assignment.json {suite.tasks}"
    )
    public_tasks = {o.task for o in outcomes if o.public}
    assert public_tasks == set(suite.tasks), f"every task needs public tests; found public tests for {sorted(public_tasks)}"


def check_asserts_have_messages(path: Path) -> None:
    """Hidden tests run with --assert=plain: a bare assert would tell the student nothing."""
    bare = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"{path.relative_to(REPO)}: assert without a message at lines {bare}"


def check_catalog(suite: Suite) -> None:
    """Every mutant applies, stays valid Python, names known tasks, and together they break the contract."""
    assert len(suite.catalog) >= suite.checks.min_mutants, (
        f"the catalog should hold at least {suite.checks.min_mutants} mutants; it holds {len(suite.catalog)}")
    covered: dict[str, set[str]] = defaultdict(set)
    for mutant in suite.catalog:
        assert mutant.file in suite.contract, f"mutant {mutant.name} edits {mutant.file}, not a submitted file"
        text = (suite.assignment.solution / mutant.file).read_text(encoding="utf-8")
        mutated = mutants.mutate(mutant, text)
        assert mutated != text, f"mutant {mutant.name} changes nothing"
        try:
            ast.parse(mutated)
        except SyntaxError as error:
            raise AssertionError(f"mutant {mutant.name} makes {mutant.file} invalid Python: {error}") from error
        assert mutant.tasks and set(mutant.tasks) <= set(suite.tasks), f"mutant {mutant.name} names unknown tasks {mutant.tasks}"
        limit = suite.assignment.call_timeout_seconds
        assert mutant.call_timeout is None or 0 < mutant.call_timeout < limit, (
            f"mutant {mutant.name}'s call_timeout {mutant.call_timeout} must lie between 0 and the assignment's "
            f"{limit} s: the grader only ever lowers its limit")
        tree = ast.parse(text)
        for old, _ in mutant.replacements:
            covered[mutant.file].add(enclosing_function(tree, text[: text.index(old)].count("\n") + 1))
    for file, functions in suite.contract.items():
        assert functions, f"the starter's {file} stubs no function: the contract would be empty"
        assert functions <= covered[file], f"no mutant breaks {sorted(functions - covered[file])} in {file}"


def check_mutant_caught(suite: Suite, mutant: mutants.Mutant, outcomes: Sequence[Verdict]) -> None:
    """Some test of the sandboxed grade (what students get) fails, in the tasks the mutant names,
    and one message contains its `expect` words."""
    failed = not_passed(outcomes)
    about = f"mutant {mutant.name} ({mutant.description})"
    assert failed, f"{about} passes every test"
    lost = {o.task for o in failed}
    if suite.checks.mutants_run_own_tasks:
        assert lost == set(mutant.tasks), (
            f"{about} loses points in {sorted(lost)}; the catalog expects {sorted(mutant.tasks)}:\n{listing(failed)}")
    else:
        assert lost <= set(mutant.tasks), (
            f"{about} loses points in {sorted(lost)}; the catalog expects only {sorted(mutant.tasks)}:\n{listing(failed)}")
    assert any(mutant.expect.casefold() in o.message.casefold() for o in failed), (
        f"no failure message of {about} in results.json contains {mutant.expect!r}:\n{listing(failed)}")


def fails_a_public_test(outcomes: Sequence[Verdict]) -> bool:
    """Whether a public test (one a student runs before submitting) did not pass."""
    return any(o.public for o in not_passed(outcomes))
