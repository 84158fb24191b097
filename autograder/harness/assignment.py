"""Load and validate `assignments/<id>/assignment.json`, the grader's description of an assignment.

The file says which files a student submits, which tasks the tests grade and for how many points,
who sees the public and the hidden tests' results (Gradescope visibility), and how long one call
into student code may take. Every consumer (the runner, the Gradescope package, local grading)
goes through `load_assignment`, so a typo in the file stops the build with a message naming the
field instead of silently grading with a default.
"""
from __future__ import annotations

import json
import keyword
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The repository (or the unpacked Gradescope source folder): autograder/harness/assignment.py.
REPO_ROOT = Path(__file__).resolve().parents[2]

# Gradescope's visibility values (see shared/reference/platforms.md).
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")

_TOP_KEYS = {"id", "title", "files", "tasks", "visibility", "call_timeout_seconds"}
# Optional: "data" (files shipped in the student bundle, see tools/release.py) and "traces"
# (Mooncake trace files the hidden tests read, packed into the Gradescope zip by autograder/build.py).
_OPTIONAL_KEYS = {"data", "traces"}
_TASK_KEYS = {"name", "title", "points", "functions"}
_VISIBILITY_KEYS = {"public", "hidden"}


class AssignmentError(ValueError):
    """assignment.json is missing, unknown or malformed."""


@dataclass(frozen=True)
class Task:
    """One graded task: the name the tests' `task` marker uses, a title, its points."""

    name: str
    title: str
    points: float
    functions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """A validated assignment.json, with the folders its tests live in under `root`."""

    id: str
    title: str
    files: tuple[str, ...]
    tasks: tuple[Task, ...]
    visibility: dict[str, str]
    call_timeout_seconds: float
    root: Path
    traces: tuple[str, ...] = ()

    @property
    def modules(self) -> tuple[str, ...]:
        """The submitted files' module names (kv_decode.py -> kv_decode)."""
        return tuple(name[:-3] for name in self.files)

    @property
    def max_score(self) -> float:
        return sum(task.points for task in self.tasks)

    @property
    def directory(self) -> Path:
        return self.root / "assignments" / self.id

    @property
    def public_tests(self) -> Path:
        return self.directory / "tests"

    @property
    def hidden_tests(self) -> Path:
        return self.root / "autograder" / "hidden" / self.id

    def task(self, name: str) -> Task:
        """The task called `name`; AssignmentError naming the known tasks otherwise."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise AssignmentError(f"{self.id}: no task {name!r}; tasks: {', '.join(t.name for t in self.tasks)}")


def known_assignments(root: Path = REPO_ROOT) -> list[str]:
    """Ids of the assignments under `root`/assignments (folders holding an assignment.json)."""
    return sorted(p.parent.name for p in (Path(root) / "assignments").glob("*/assignment.json"))


def load_assignment(assignment_id: str, root: Path = REPO_ROOT) -> Assignment:
    """Read and validate `root`/assignments/<assignment_id>/assignment.json."""
    root = Path(root).resolve()
    path = root / "assignments" / assignment_id / "assignment.json"
    # A bare name only: an id such as "../x" must not reach outside assignments/.
    if not assignment_id or Path(assignment_id).name != assignment_id or not path.is_file():
        known = ", ".join(known_assignments(root)) or "none"
        raise AssignmentError(f"unknown assignment {assignment_id!r}; known assignments: {known}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AssignmentError(f"{path}: not readable JSON: {error}") from error
    return parse_assignment(data, root, where=str(path))


def parse_assignment(data: Any, root: Path, where: str = "assignment.json") -> Assignment:
    """Validate the parsed JSON `data` and build an Assignment whose tests live under `root`."""
    _require(isinstance(data, dict), where, "the top level must be an object")
    _no_unknown_keys(data, _TOP_KEYS | _OPTIONAL_KEYS, where)
    for key in sorted(_TOP_KEYS):
        _require(key in data, where, f"missing field {key!r}")
    assignment_id, title = data["id"], data["title"]
    _require(isinstance(assignment_id, str) and assignment_id.isidentifier(), where,
             f"id must be an identifier-like string, got {assignment_id!r}")
    _require(isinstance(title, str) and title.strip() != "", where, "title must be a non-empty string")
    files = _files(data["files"], where)
    tasks = _tasks(data["tasks"], where)
    visibility = data["visibility"]
    _require(isinstance(visibility, dict) and set(visibility) == _VISIBILITY_KEYS, where,
             f"visibility must be an object with exactly the keys {sorted(_VISIBILITY_KEYS)}")
    for audience, value in visibility.items():
        _require(value in VISIBILITIES, where,
                 f"visibility.{audience} must be one of {', '.join(VISIBILITIES)}, got {value!r}")
    timeout = data["call_timeout_seconds"]
    _require(_is_number(timeout) and timeout > 0, where,
             f"call_timeout_seconds must be a positive number, got {timeout!r}")
    traces = data.get("traces", [])
    _require(isinstance(traces, list) and all(isinstance(t, str) and "/" not in t for t in traces), where,
             "traces must be a list of file names in the Mooncake trace folder")
    return Assignment(id=assignment_id, title=title, files=files, tasks=tasks,
                      visibility=dict(visibility), call_timeout_seconds=float(timeout), root=Path(root),
                      traces=tuple(traces))


def _files(files: Any, where: str) -> tuple[str, ...]:
    _require(isinstance(files, list) and files != [], where, "files must be a non-empty list")
    for name in files:
        # Each file is imported as a top-level module by its stem, so it must be a plain
        # identifier + .py with no folder part.
        stem = name[:-3] if isinstance(name, str) and name.endswith(".py") else None
        _require(stem is not None and stem.isidentifier() and not keyword.iskeyword(stem), where,
                 f"files: {name!r} is not a module file name such as kv_decode.py")
    _require(len(set(files)) == len(files), where, "files lists a file twice")
    return tuple(files)


def _tasks(tasks: Any, where: str) -> tuple[Task, ...]:
    _require(isinstance(tasks, list) and tasks != [], where, "tasks must be a non-empty list")
    parsed = []
    for index, task in enumerate(tasks):
        at = f"{where}: tasks[{index}]"
        _require(isinstance(task, dict), at, "each task must be an object")
        _no_unknown_keys(task, _TASK_KEYS, at)
        name, title, points = task.get("name"), task.get("title"), task.get("points")
        _require(isinstance(name, str) and name.isidentifier(), at, f"name must be an identifier, got {name!r}")
        _require(isinstance(title, str) and title.strip() != "", at, "title must be a non-empty string")
        _require(_is_number(points) and points > 0, at, f"points must be a positive number, got {points!r}")
        functions = task.get("functions", [])
        _require(isinstance(functions, list) and all(isinstance(f, str) for f in functions), at,
                 "functions must be a list of names")
        parsed.append(Task(name=name, title=title, points=float(points), functions=tuple(functions)))
    names = [task.name for task in parsed]
    _require(len(set(names)) == len(names), where, "two tasks share a name")
    return tuple(parsed)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _no_unknown_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    _require(not unknown, where, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _require(condition: bool, where: str, problem: str) -> None:
    if not condition:
        raise AssignmentError(f"{where}: {problem}")
