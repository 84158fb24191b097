"""Build the student bundle of an assignment: `dist/<id>/` and `dist/<id>.zip` (`make release A=<id>`).

The bundle is everything a student needs to work offline and nothing they must not see:

    <starter files>     from starter/<id>/ (checked against a fresh `make starter` first)
    kvlab/*.py          the course library, complete
    tests/              the public tests, from assignments/<id>/tests/
    demo.py             assignments/<id>/demo.py, when the assignment has a demo
    <data files>        the assignment's "data" list, paths relative to assignments/<id>/
    README.md           the handout, assignments/<id>/README.md
    Makefile            `make test [TASK=...]`, `make demo`, `make submit` (tools/student_files/), and
                        the assignment's own targets: the template's `# @IF <id>@` ... `# @END@` blocks
                        are kept for that assignment only (module 6: `make serve`, `make kv-store`)
    requirements.txt    requirements/student.txt
    assignment.json     the tasks' names, titles and points from assignments/<id>/assignment.json, for
                        the table at the end of `make test` (kvlab.testing reads it beside tests/)
    pytest.ini          tools/student_files/pytest.ini

Never solutions, hidden tests, mutants, the grading key or the repository's own tests: the bundle is
assembled from the list above only, and the build fails if any line of a solution region, or the
grading key (autograder/grading.key, which seeds the hidden tests' draws), turns up in it.

    python -m tools.release [ID ...] [--out DIR]     (default: every assignment)
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from autograder.assignment import Assignment, AssignmentError, load_assignment
from autograder.build import command_line, files_under, zip_bytes
from autograder.harness.seeds import KEY_FILE
from tools import make_starter

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = Path(__file__).resolve().parent / "student_files"
# Solution lines shorter than this are too generic to flag: the given reference `generate` in
# kvlab/model.py shares lines such as `return tokens, step_logits` (26 characters) with the answer.
MIN_LEAK_LINE = 30


class ReleaseError(Exception):
    """The bundle cannot be built as asked; the message says what to fix."""


def _load_assignment(assignment_id: str, root: Path) -> Assignment:
    try:
        return load_assignment(assignment_id, root)
    except AssignmentError as error:
        raise ReleaseError(str(error)) from error


def _starter_files(assignment_id: str, assignment: Assignment, root: Path) -> dict[str, bytes]:
    """The committed starter, refusing a stale one: a bundle must never ship outdated stubs."""
    try:
        fresh = make_starter.starters(assignment_id, root)
    except make_starter.StarterError as error:
        raise ReleaseError(f"the starter cannot be generated: {error}") from error
    files = {}
    for name, text in fresh.items():
        path = assignment.starter / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            raise ReleaseError(f"starter/{assignment_id}/{name} is missing or out of date: run `make starter`")
        files[name] = path.read_bytes()
    missing = [name for name in assignment.files if name not in files]
    if missing:
        raise ReleaseError(f"assignment.json lists {', '.join(missing)} under \"files\", "
                           f"but solutions/{assignment_id}/ has no such file")
    return files


def _public_tests(assignment: Assignment) -> dict[str, bytes]:
    folder = assignment.public_tests
    files = files_under(folder.parent, folder.name)  # named tests/..., as in the bundle
    if not any(Path(name).name.startswith("test_") for name in files):
        raise ReleaseError(f"{folder} holds no test_*.py: a bundle without public tests cannot check anything")
    return files


def _data_files(assignment: Assignment) -> dict[str, bytes]:
    folder = assignment.directory.resolve()
    files = {}
    for name, given in zip(assignment.data, assignment.data_files):
        path = given.resolve()
        if folder not in path.parents or not path.is_file():
            raise ReleaseError(f"data file {name!r} of {assignment.id} must be a file inside {folder}")
        files[path.relative_to(folder).as_posix()] = path.read_bytes()
    return files


# An assignment's own block of the Makefile template, between comment lines `# @IF <id>@ ...` and
# `# @END@` (comments, so that the template itself stays a valid Makefile).
_MAKEFILE_BLOCK = re.compile(r"^# @IF ([\w-]+)@[^\n]*\n(.*?)^# @END@\n", re.MULTILINE | re.DOTALL)


def _student_makefile(assignment: Assignment) -> bytes:
    names = list(assignment.files)
    if any(" " in name for name in names):
        raise ReleaseError(f"submitted file names must not contain spaces (make splits on them): {names}")
    text = (TEMPLATES / "Makefile").read_text(encoding="utf-8")
    text = _MAKEFILE_BLOCK.sub(lambda block: block.group(2) if block.group(1) == assignment.id else "", text)
    if "@IF " in text or "@END@" in text:
        raise ReleaseError("tools/student_files/Makefile: a `# @IF <id>@` line without its `# @END@` (or the reverse)")
    text = text.replace("@TITLE@", assignment.title).replace("@FILES@", " ".join(names))
    return text.encode()


def _requirements(root: Path) -> bytes:
    """requirements/student.txt with each `-r FILE` include replaced by that file's lines: the bundle
    ships one requirements.txt, with no other requirement files for an include to point at."""
    lines = []
    for line in (root / "requirements" / "student.txt").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("-c"):
            raise ReleaseError("requirements/student.txt must not use constraint files: the bundle ships one file")
        if stripped.startswith("-r"):
            included = (root / "requirements" / stripped.removeprefix("-r").strip()).read_text(encoding="utf-8")
            if any(inner.lstrip().startswith(("-r", "-c")) for inner in included.splitlines()):
                raise ReleaseError(f"{stripped}: an included requirements file must not include others")
            lines += included.splitlines()
        else:
            lines.append(line)
    return ("\n".join(lines) + "\n").encode()


def _task_points(assignment: Assignment) -> bytes:
    """The assignment's id, title and tasks (name, title, points): what `make test`'s table names, and
    nothing of the grader's settings."""
    tasks = [{"name": task.name, "title": task.title, "points": task.points} for task in assignment.tasks]
    return (json.dumps({"id": assignment.id, "title": assignment.title, "tasks": tasks}, indent=2,
                       ensure_ascii=False) + "\n").encode()


def solution_lines(assignment_id: str, root: Path = ROOT) -> set[str]:
    """Stripped lines of the solution regions, at least MIN_LEAK_LINE characters long."""
    lines = set()
    for path in sorted((root / "solutions" / assignment_id).glob("*.py")):
        inside = False
        for line in path.read_text(encoding="utf-8").split("\n"):
            if "BEGIN SOLUTION" in line:
                inside = True
            elif "END SOLUTION" in line:
                inside = False
            elif inside and len(line.strip()) >= MIN_LEAK_LINE:
                lines.add(line.strip())
    return lines


def bundle_contents(assignment_id: str, root: Path = ROOT) -> dict[str, bytes]:
    """Bundle path (posix, relative to the bundle's root) -> bytes, for every file of the bundle."""
    assignment = _load_assignment(assignment_id, root)
    handout = assignment.handout
    if not handout.is_file():
        raise ReleaseError(f"{handout} is missing: every bundle carries the assignment's handout")
    files = {
        **_starter_files(assignment_id, assignment, root),
        # The course library, subpackages and their data included.
        **files_under(root, "kvlab"),
        **_public_tests(assignment),
        **_data_files(assignment),
        "README.md": handout.read_bytes(),
        "Makefile": _student_makefile(assignment),
        "requirements.txt": _requirements(root),
        "pytest.ini": (TEMPLATES / "pytest.ini").read_bytes(),
        "assignment.json": _task_points(assignment),
    }
    if assignment.demo.is_file():
        files["demo.py"] = assignment.demo.read_bytes()
    for line in sorted(solution_lines(assignment_id, root)):
        leaks = [name for name, data in files.items() if line.encode() in data]
        if leaks:
            raise ReleaseError(f"solution line {line!r} appears in {', '.join(leaks)}: the bundle would leak it")
    leaks = grading_key_leaks(files, root)
    if leaks:
        raise ReleaseError(f"the grading key ({KEY_FILE}) appears in {', '.join(leaks)}: the bundle would leak it")
    return files


def grading_key_leaks(files: dict[str, bytes], root: Path = ROOT) -> list[str]:
    """The names of `files` that hold the grading key's text (the hidden tests' draws would then be
    computable by students before they submit)."""
    key = (root / KEY_FILE).read_bytes().strip() if (root / KEY_FILE).is_file() else b""
    return [name for name, data in files.items() if key and key in data]


def write_bundle(assignment_id: str, out: Path, root: Path = ROOT) -> tuple[Path, Path]:
    """Write `out/<id>/` (replacing any old one) and `out/<id>.zip` (its files under `<id>/`)."""
    files = bundle_contents(assignment_id, root)
    folder = out / assignment_id
    if folder.exists():
        shutil.rmtree(folder)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    archive = out / f"{assignment_id}.zip"
    archive.write_bytes(zip_bytes({f"{assignment_id}/{name}": data for name, data in files.items()}))
    return folder, archive


def main(argv: list[str] | None = None) -> int:
    """Command line: build each named bundle, print where it went, exit 1 with the reason on error."""
    ids, out = command_line("python -m tools.release", __doc__, argv, ROOT)
    for assignment_id in ids:
        try:
            folder, archive = write_bundle(assignment_id, out)
        except ReleaseError as error:
            print(f"release: error: {error}", file=sys.stderr)
            return 1
        print(f"{assignment_id}: {folder}/ and {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
