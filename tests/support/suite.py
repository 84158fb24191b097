"""One assignment as the tests of the tests see it (`Suite`): its `Assignment`
(autograder.assignment), its bug catalog and `Checks` (autograder/mutants/<id>.py), the contract
the catalog must break (derived from the starter's stubs), and tests roots for the grader.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from autograder import mutants
from autograder.assignment import Assignment, load_assignment
from support.repo import ASSIGNMENT_IDS, REPO

# In the tests root of these checks, hidden tests' results carry this visibility and public tests'
# "visible", so results.json says which tests are public; nothing else in grading reads it.
HIDDEN_MARK = "hidden"


def stubbed_functions(source: str) -> frozenset[str]:
    """Qualified names (function, Class.method) of the defs whose own body raises NotImplementedError."""
    tree = ast.parse(source)
    found = set()
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if not isinstance(member, ast.FunctionDef):
                continue
            raises = [n for n in ast.walk(member) if isinstance(n, ast.Raise) and n.exc is not None
                      and getattr(getattr(n.exc, "func", n.exc), "id", None) == "NotImplementedError"]
            if raises:
                found.add(f"{node.name}.{member.name}" if member is not node else member.name)
    return frozenset(found)


def task_markers(path: Path) -> set[str]:
    """The task names of the `task` markers in a test file (`pytest.mark.task("<name>", ...)`)."""
    return {node.args[0].value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "task"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


@dataclass(frozen=True)
class Suite:
    """One assignment's public and hidden tests and bug catalog, as the tests of the tests see them."""

    assignment: Assignment

    @property
    def id(self) -> str:
        return self.assignment.id

    @cached_property
    def catalog(self) -> list[mutants.Mutant]:
        """The bug catalog, autograder/mutants/<id>.py."""
        return mutants.load(self.id)

    @cached_property
    def checks(self) -> mutants.Checks:
        """The catalog's settings of these checks (its CHECKS, or the defaults)."""
        return mutants.checks(self.id)

    @cached_property
    def contract(self) -> dict[str, frozenset[str]]:
        """Submitted file -> the functions and methods the catalog must break: those the starter stubs."""
        return {name: stubbed_functions((self.assignment.starter / name).read_text(encoding="utf-8"))
                for name in self.assignment.files}

    @property
    def tasks(self) -> dict[str, float]:
        """Task name -> points, from assignment.json."""
        return {task.name: task.points for task in self.assignment.tasks}

    @property
    def test_files(self) -> list[Path]:
        """Every .py file of the public and hidden tests, helpers included."""
        return sorted([*self.assignment.public_tests.glob("*.py"), *self.assignment.hidden_tests.glob("*.py")])

    def task_files(self, tasks: Sequence[str]) -> list[Path]:
        """The public and hidden test files of `tasks`: test_<task>.py and test_hidden_<task>.py."""
        return [path for task in tasks for path in (self.assignment.public_tests / f"test_{task}.py",
                                                    self.assignment.hidden_tests / f"test_hidden_{task}.py")]

    def tests_root(self, destination: Path, tasks: Sequence[str] = (), tests: Sequence[str] = ()) -> Path:
        """A tests root for autograder.harness.run (`--tests-root`) grading `tasks` (default: all),
        of them only the test functions named in `tests` if any are (public and hidden alike).

        It holds assignment.json with only those tasks, each worth the points of its tests kept, and
        with HIDDEN_MARK as the hidden tests' visibility, their test files, and every helper (a file
        not named test_*.py).
        """
        chosen = set(tasks or self.tasks)
        source = self.assignment
        data = json.loads((source.directory / "assignment.json").read_text(encoding="utf-8"))
        data["tasks"] = [task for task in data["tasks"] if task["name"] in chosen]
        data["visibility"] = {"public": "visible", "hidden": HIDDEN_MARK}
        target = replace(source, root=destination)
        selected = set(self.task_files(sorted(chosen)))
        for folder, copy in ((source.public_tests, target.public_tests), (source.hidden_tests, target.hidden_tests)):
            copy.mkdir(parents=True)
            for path in folder.glob("*.py"):
                if path in selected or not path.name.startswith("test_"):
                    shutil.copyfile(path, copy / path.name)
        if tests:
            keep_tests(target, set(tests))
            points = collected_points(target)
            data["tasks"] = [{**task, "points": round(points[task["name"]], 6)} for task in data["tasks"]
                             if task["name"] in points]
        (target.directory / "assignment.json").write_text(json.dumps(data), encoding="utf-8")
        return destination


def keep_tests(assignment: Assignment, tests: set[str]) -> None:
    """Blank out every test function of `assignment`'s test files not named in `tests` (its
    decorators too; the lines stay, so tracebacks keep their numbers); each of `tests` must exist."""
    found = set()
    for path in sorted([*assignment.public_tests.glob("test_*.py"), *assignment.hidden_tests.glob("test_*.py")]):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                if node.name in tests:
                    found.add(node.name)
                    continue
                start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                lines[start - 1:node.end_lineno] = ["\n"] * (node.end_lineno - start + 1)
        path.write_text("".join(lines), encoding="utf-8")
    assert found == tests, f"no test function of {assignment.id}'s tests is named {sorted(tests - found)}"


# Collects the tests of the folders given (as the runner does: its plugin, no other) and prints their
# points per task.
COLLECT_POINTS = """
import json, os, sys
import pytest
from kvlab.testing import task_of
points = {}
class Points:
    def pytest_collection_modifyitems(self, items):
        for item in items:
            task, value = task_of(item)
            points[task] = points.get(task, 0.0) + value
code = pytest.main([*sys.argv[1:], "--collect-only", "-q", "--disable-plugin-autoload", "-p", "no:cacheprovider",
                    "--noconftest", "-p", "autograder.harness.plugin", "-c", os.devnull, "--rootdir", "."],
                   plugins=[Points()])
print(json.dumps(points) if code == 0 else "")
"""


def collected_points(assignment: Assignment) -> dict[str, float]:
    """Task -> the points of `assignment`'s tests as pytest collects them (in a process of its own:
    importing test modules here would leave them in this one's sys.modules)."""
    done = subprocess.run([sys.executable, "-c", COLLECT_POINTS, str(assignment.public_tests),
                           str(assignment.hidden_tests)], cwd=assignment.root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    last = done.stdout.strip().splitlines()[-1:] or [""]
    assert last[0], f"collecting the tests of {assignment.root} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return json.loads(last[0])


def suites() -> dict[str, Suite]:
    """Every assignment's Suite, by id."""
    return {name: Suite(load_assignment(name, REPO)) for name in ASSIGNMENT_IDS}
