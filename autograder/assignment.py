"""An assignment is its folders: `discover` finds them, `load_assignment` reads one.

`assignments/<id>/assignment.json` says which files a student submits, which tasks the tests grade
and for how many points, who sees the public and the hidden tests' results (Gradescope visibility),
how long one call into student code may take, and which data files and traces it needs. It is
validated against `assignment_schema.json` (beside this file), so a typo stops the build with a
message naming the field instead of silently grading with a default.

Everything else about an assignment follows from its id by the repository's layout, and the
`Assignment` properties name it: the reference solution `solutions/<id>/`, the generated starter
`starter/<id>/`, the public tests, handout and demo in `assignments/<id>/`, the hidden tests
`autograder/hidden/<id>/` and the bug catalog `autograder/mutants/<id>.py`. The Gradescope package
holds only the grading parts; `missing_parts` lists what a complete repository assignment lacks.

Every consumer (the Makefile, tools/, the runner, the Gradescope package, local grading, the
repository's tests) finds assignments with `discover` and reads them with `load_assignment`.

    python -m autograder.assignment     # the assignment ids, one per line (the Makefile's list)
"""
from __future__ import annotations

import json
import keyword
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The repository (or the unpacked Gradescope source folder): autograder/assignment.py.
REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = Path(__file__).resolve().parent / "assignment_schema.json"
# The registry's own files, relative to REPO_ROOT: the Gradescope package carries them beside the
# harness (autograder/build.py), and a grading watches them as it watches the harness (run.py).
REGISTRY_FILES = ("autograder/assignment.py", "autograder/assignment_schema.json", "autograder/schema.py")

class AssignmentError(ValueError):
    """assignment.json is missing, unknown or malformed."""


@dataclass(frozen=True)
class Task:
    """One graded task: the name the tests' `task` marker uses, a title, its points, and the
    functions and classes whose stubs belong to it (tools/make_starter.py)."""

    name: str
    title: str
    points: float
    functions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """A validated assignment.json, with the folders of its parts under `root`."""

    id: str
    title: str
    files: tuple[str, ...]
    tasks: tuple[Task, ...]
    visibility: dict[str, str]
    call_timeout_seconds: float
    root: Path
    traces: tuple[str, ...] = ()
    # Files of the student bundle, relative to `directory` (tools/release.py ships them).
    data: tuple[str, ...] = ()

    @property
    def modules(self) -> tuple[str, ...]:
        """The submitted files' module names (kv_decode.py -> kv_decode)."""
        return tuple(name[:-3] for name in self.files)

    @property
    def max_score(self) -> float:
        return sum(task.points for task in self.tasks)

    @property
    def directory(self) -> Path:
        """assignments/<id>/: assignment.json, the handout, the public tests, the demo."""
        return self.root / "assignments" / self.id

    @property
    def public_tests(self) -> Path:
        return self.directory / "tests"

    @property
    def hidden_tests(self) -> Path:
        return self.root / "autograder" / "hidden" / self.id

    @property
    def solution(self) -> Path:
        """The reference solution's folder: the submitted files, with solution markers."""
        return self.root / "solutions" / self.id

    @property
    def starter(self) -> Path:
        """The starter's folder, generated from the solution by `make starter`."""
        return self.root / "starter" / self.id

    @property
    def catalog(self) -> Path:
        """The bug catalog, the module `autograder.mutants.<id>`."""
        return self.root / "autograder" / "mutants" / f"{self.id}.py"

    @property
    def handout(self) -> Path:
        return self.directory / "README.md"

    @property
    def demo(self) -> Path:
        return self.directory / "demo.py"

    @property
    def data_files(self) -> tuple[Path, ...]:
        """The `data` files, as paths (tools/release.py checks that they stay inside `directory`)."""
        return tuple(self.directory / name for name in self.data)

    def parts(self) -> dict[str, Path]:
        """Every part a repository assignment needs, by what it is."""
        return {"solution": self.solution, "starter": self.starter, "handout": self.handout,
                "public tests": self.public_tests, "hidden tests": self.hidden_tests,
                "mutant catalog": self.catalog, "demo": self.demo}

    def missing_parts(self) -> list[str]:
        """The parts that are absent (an empty folder counts as absent), as "what (path)"."""
        missing = []
        for what, path in self.parts().items():
            present = any(path.glob("*.py")) if path.suffix == "" else path.is_file()
            if not present:
                missing.append(f"{what} ({path.relative_to(self.root).as_posix()})")
        return missing

    def task(self, name: str) -> Task:
        """The task called `name`; AssignmentError naming the known tasks otherwise."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise AssignmentError(f"{self.id}: no task {name!r}; tasks: {', '.join(t.name for t in self.tasks)}")


def discover(root: Path = REPO_ROOT) -> list[str]:
    """Ids of the assignments under `root`/assignments (folders holding an assignment.json), sorted."""
    return sorted(p.parent.name for p in (Path(root) / "assignments").glob("*/assignment.json"))


def load_assignment(assignment_id: str, root: Path = REPO_ROOT) -> Assignment:
    """Read and validate `root`/assignments/<assignment_id>/assignment.json."""
    root = Path(root).resolve()
    path = root / "assignments" / assignment_id / "assignment.json"
    # A bare name only: an id such as "../x" must not reach outside assignments/.
    if not assignment_id or Path(assignment_id).name != assignment_id or not path.is_file():
        known = ", ".join(discover(root)) or "none"
        raise AssignmentError(f"unknown assignment {assignment_id!r}; known assignments: {known}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise AssignmentError(f"{path}: not readable JSON: {error}") from error
    assignment = parse_assignment(data, root, where=str(path))
    if assignment.id != assignment_id:
        raise AssignmentError(f"{path}: id is {assignment.id!r}, but the folder is {assignment_id!r}")
    return assignment


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def parse_assignment(data: Any, root: Path, where: str = "assignment.json") -> Assignment:
    """Validate the parsed JSON `data` and build an Assignment whose parts live under `root`."""
    # Imported here: `python -m autograder.assignment` (the Makefile's list) runs on any python3.
    from autograder import schema

    jsonschema = schema.jsonschema()

    errors = sorted(jsonschema.Draft202012Validator(load_schema()).iter_errors(data),
                    key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        error = jsonschema.exceptions.best_match(errors)
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
        raise AssignmentError(f"{where}: {field or 'the top level'}: {error.message}")
    for name in data["files"]:
        _require(not keyword.iskeyword(name[:-3]), where, f"files: {name!r} is a Python keyword, not a module name")
    tasks = tuple(Task(name=t["name"], title=t["title"], points=float(t["points"]),
                       functions=tuple(t.get("functions", []))) for t in data["tasks"])
    names = [task.name for task in tasks]
    _require(len(set(names)) == len(names), where, "tasks: two tasks share a name")
    return Assignment(id=data["id"], title=data["title"], files=tuple(data["files"]), tasks=tasks,
                      visibility=dict(data["visibility"]), call_timeout_seconds=float(data["call_timeout_seconds"]),
                      root=Path(root), traces=tuple(data.get("traces", [])), data=tuple(data.get("data", [])))


def _require(condition: bool, where: str, problem: str) -> None:
    if not condition:
        raise AssignmentError(f"{where}: {problem}")


if __name__ == "__main__":
    print("\n".join(discover(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT)))
