"""The starter files: current, free of solution text, importable, every stub naming its task.

That the starter scores zero is checked where it is graded: by the grader, sandboxed and in-process,
against the public and hidden tests (test_suites.py), and by `make test` in the student's bundle
against the public tests (test_release.py)."""
from __future__ import annotations

import ast
import inspect
import json
import operator
import re
import sys
from pathlib import Path
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import NamedTuple

import pytest

from autograder.assignment import Task, load_assignment
from support.repo import ASSIGNMENT_IDS
from tools import make_starter

ROOT = Path(__file__).resolve().parents[2]
SOLUTION_FILES = sorted((ROOT / "solutions").glob("*/*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _region_lines(text: str) -> tuple[set[str], set[str]]:
    """(stripped non-blank lines inside solution regions, those outside), marker lines excluded."""
    inside, outside = set(), set()
    in_region = False
    for line in text.split("\n"):
        if "BEGIN SOLUTION" in line:
            in_region = True
        elif "END SOLUTION" in line:
            in_region = False
        elif line.strip():
            (inside if in_region else outside).add(line.strip())
    return inside, outside


def _starter_of(solution: Path) -> Path:
    starter = ROOT / "starter" / solution.parent.name / solution.name
    assert starter.is_file(), f"{_rel(starter)} is missing: run `make starter` and commit starter/"
    return starter


def _tasks(assignment_id: str) -> set[str]:
    return {task.name for task in load_assignment(assignment_id, ROOT).tasks}


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_starter_is_up_to_date(assignment_id: str, tmp_path: Path) -> None:
    make_starter.write_starters([assignment_id], tmp_path)
    fresh = {path.name: path.read_text() for path in (tmp_path / assignment_id).glob("*.py")}
    committed = {path.name: path.read_text() for path in (ROOT / "starter" / assignment_id).glob("*.py")}
    problems = [f"{name} is missing" for name in sorted(fresh.keys() - committed.keys())]
    problems += [f"{name} has no solution" for name in sorted(committed.keys() - fresh.keys())]
    problems += [f"{name} differs" for name in sorted(fresh.keys() & committed.keys()) if fresh[name] != committed[name]]
    assert not problems, (f"starter/{assignment_id}/ is out of date ({'; '.join(problems)}): run `make starter` "
                          "(and delete starter files whose solution is gone), then commit starter/")


@pytest.mark.parametrize("solution", SOLUTION_FILES, ids=_rel)
def test_no_solution_line_survives(solution: Path) -> None:
    inside, outside = _region_lines(solution.read_text())
    starter_lines = {line.strip() for line in _starter_of(solution).read_text().split("\n")}
    # A line that is also outside the regions (a blank `return`, a shared comment) is no answer.
    leaked = sorted((inside - outside) & starter_lines)
    assert not leaked, f"{_rel(_starter_of(solution))} keeps lines of the solution regions: {leaked}"


@pytest.mark.parametrize("solution", SOLUTION_FILES, ids=_rel)
def test_every_stub_names_its_function_and_task(solution: Path) -> None:
    source = _starter_of(solution).read_text()
    tasks = _tasks(solution.parent.name)
    regions = make_starter.check_markers(solution.read_text(), _rel(solution))
    stubs = _stubs(ast.parse(source))
    for stub in stubs:
        name, _, task = stub.message.partition(" (task ")
        assert name == stub.qualname and task.rstrip(")") in tasks and stub.message.endswith(")"), (
            f"the stub in {stub.qualname} raises NotImplementedError({stub.message!r}); expected "
            f"\"{stub.qualname} (task <one of {sorted(tasks)}>)\"")
    assert "raise NotImplementedError()" not in source, "a bare `raise NotImplementedError()` was left unnamed"
    assert len(stubs) == regions, f"{regions} solution regions but {len(stubs)} named stubs: {stubs}"


class Stub(NamedTuple):
    """A `raise NotImplementedError("...")` in a starter, and the function holding it."""

    qualname: str
    message: str
    whole_body: bool  # the function does nothing but raise (its docstring aside)


def _stubs(tree: ast.Module) -> list[Stub]:
    """Every `raise NotImplementedError("...")` of a module, in source order."""
    stubs = []

    def visit(node: ast.AST, prefix: str, function: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".", None)
            elif isinstance(child, ast.FunctionDef):
                visit(child, prefix + child.name + ".", child)
            elif (isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call)
                  and getattr(child.exc.func, "id", None) == "NotImplementedError" and child.exc.args):
                body = function.body if function else []
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]
                stubs.append(Stub(prefix.rstrip("."), ast.literal_eval(child.exc.args[0]), body == [child]))
            else:
                visit(child, prefix, function)

    visit(tree, "", None)
    return stubs


def _call_with_nones(module: ModuleType, qualname: str) -> None:
    """Call module.<qualname> with None for every required argument (a fresh instance for `self`)."""
    owner_name, _, name = qualname.rpartition(".")
    if not owner_name:
        function, instance = getattr(module, name), None
    else:
        owner = operator.attrgetter(owner_name)(module)
        raw = inspect.getattr_static(owner, name)
        # Made without __init__, which may itself be a stub.
        instance = object.__new__(owner)
        if isinstance(raw, property):
            function = raw.fget
        elif isinstance(raw, (staticmethod, classmethod)):
            function, instance = getattr(owner, name), None
        else:
            function = raw
    parameters = list(inspect.signature(function).parameters.values())
    positional = [None for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if instance is not None:
        positional[0] = instance
    function(*positional, **{p.name: None for p in parameters if p.kind == p.KEYWORD_ONLY})


@pytest.fixture
def import_starter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], ModuleType]]:
    """Import starter modules by file, restoring sys.modules afterwards.

    The starter's modules share names with the solutions' (and may import each other by bare
    name), so they must not stay in sys.modules for other tests to pick up.
    """
    saved: dict[str, ModuleType | None] = {}

    def load(path: Path) -> ModuleType:
        monkeypatch.syspath_prepend(str(path.parent))
        for sibling in path.parent.glob("*.py"):
            saved.setdefault(sibling.stem, sys.modules.pop(sibling.stem, None))
        __import__(path.stem)
        return sys.modules[path.stem]

    yield load
    for name, module in saved.items():
        sys.modules.pop(name, None)
        if module is not None:
            sys.modules[name] = module


@pytest.mark.parametrize("solution", SOLUTION_FILES, ids=_rel)
def test_stubs_raise_when_called(solution: Path, import_starter: Callable[[Path], ModuleType]) -> None:
    """Call every function that is nothing but a stub: it raises its own message."""
    module = import_starter(_starter_of(solution))
    pure = [stub for stub in _stubs(ast.parse(_starter_of(solution).read_text())) if stub.whole_body]
    assert pure, f"no function of {_rel(_starter_of(solution))} is a pure stub to call"
    for stub in pure:
        with pytest.raises(NotImplementedError) as raised:
            _call_with_nones(module, stub.qualname)
        assert str(raised.value) == stub.message, (
            f"{stub.qualname} raised NotImplementedError({str(raised.value)!r}); expected {stub.message!r}")


# A one-function solution file; its body starts on line 3.
SOLUTION_WITH = 'def f(x):\n    """Docstring."""\n{body}\n'


@pytest.mark.parametrize("body, table, error", [
    ("    return x", {"f": "t"}, "no BEGIN SOLUTION / END SOLUTION markers"),
    ("    # END SOLUTION\n    return x", {"f": "t"}, ":3: END SOLUTION without a BEGIN SOLUTION"),
    ("    # BEGIN SOLUTION\n    return x", {"f": "t"}, ":3: BEGIN SOLUTION is never closed"),
    ("    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    # END SOLUTION", {"f": "t"}, ":4: BEGIN SOLUTION inside the region opened at line 3"),
    ("    # BEGIN SOLUTION\n    return x\n    # END SOLUTION", {"g": "t"}, "the stub in f belongs to no task; add 'f'"),
], ids=["no markers", "stray end", "unclosed", "nested", "unmapped"])
def test_generator_rejects(body: str, table: dict[str, str], error: str) -> None:
    with pytest.raises(make_starter.StarterError, match=re.escape(error)) as raised:
        make_starter.starter_text(SOLUTION_WITH.format(body=body), table, "sol.py")
    assert str(raised.value).startswith("sol.py"), f"the message should name the file first: {raised.value}"


def test_generator_rejects_a_region_outside_functions() -> None:
    with pytest.raises(make_starter.StarterError, match="outside every function and class"):
        make_starter.starter_text("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", {"f": "t"}, "sol.py")


def test_task_table_rejects_a_name_in_two_tasks() -> None:
    tasks = [Task("a", "task a", 1, ("f",)), Task("b", "task b", 1, ("f",))]
    with pytest.raises(make_starter.StarterError, match="'f' is listed under both task 'a' and 'b'"):
        make_starter.task_table(tasks, "assignment.json")


def test_method_maps_through_its_class_and_most_specific_name_wins() -> None:
    solution = ("class C:\n    def m(self):\n        # BEGIN SOLUTION\n        return 1\n        # END SOLUTION\n\n"
                "    def n(self):\n        # BEGIN SOLUTION\n        return 2\n        # END SOLUTION\n")
    text, used = make_starter.starter_text(solution, {"C": "whole", "C.n": "just_n"}, "sol.py")
    assert 'raise NotImplementedError("C.m (task whole)")' in text, f"C.m should map through C:\n{text}"
    assert 'raise NotImplementedError("C.n (task just_n)")' in text, f"C.n should map to its own entry:\n{text}"
    assert used == {"C", "C.n"}, f"both table entries matched a stub, got {used}"


def test_starters_reject_a_table_name_without_a_stub(tmp_path: Path) -> None:
    (tmp_path / "assignments" / "a").mkdir(parents=True)
    (tmp_path / "solutions" / "a").mkdir(parents=True)
    spec = {"id": "a", "title": "A", "files": ["s.py"], "tasks": [{"name": "t", "title": "T", "points": 1,
                                                                   "functions": ["f", "typo"]}],
            "visibility": {"public": "visible", "hidden": "visible"}, "call_timeout_seconds": 1}
    (tmp_path / "assignments" / "a" / "assignment.json").write_text(json.dumps(spec))
    (tmp_path / "solutions" / "a" / "s.py").write_text(SOLUTION_WITH.format(body="    # BEGIN SOLUTION\n    # END SOLUTION"))
    with pytest.raises(make_starter.StarterError, match="lists typo, but no stub"):
        make_starter.starters("a", tmp_path)
