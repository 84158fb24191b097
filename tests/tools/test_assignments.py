"""Every assignment is complete, and `make new A=<id>` makes one that passes every repository check.

An assignment is its folders (autograder.assignment): discovery, validation and the parts a
repository assignment needs. The scaffold test copies the repository (its git-listed files) to a
temporary folder, runs `make new` there, then the instructor's path (starter, release, autograder,
grade: full marks for the reference, zero for the starter) and the repository's own checks of the
new assignment, as `make test` would run them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.assignment import AssignmentError, discover, load_assignment, parse_assignment
from support.repo import ASSIGNMENT_IDS, REPO

NEW_ID = "scaffold99"
# The checks of a new assignment, by test file; the fresh-venv bundle test installs from the
# network and stays with the repository's own assignments.
CHECK_FILES = ("tests/tools/test_assignments.py", "tests/suites/test_suites.py", "tests/tools/test_starter.py",
               "tests/tools/test_release.py", "tests/tools/test_gradescope_package.py")


def test_discovery_finds_the_assignments() -> None:
    assert ASSIGNMENT_IDS, "discover() found no assignment"
    listed = subprocess.run([sys.executable, "-m", "autograder.assignment"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    assert listed == ASSIGNMENT_IDS == discover(REPO), (
        f"the Makefile's list {listed} and discover() {ASSIGNMENT_IDS} should agree")


@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS)
def test_assignment_has_every_part(assignment_id: str) -> None:
    missing = load_assignment(assignment_id, REPO).missing_parts()
    assert not missing, f"{assignment_id} lacks: {', '.join(missing)}"


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    lecture = load_assignment(ASSIGNMENT_IDS[0], REPO)
    copy = replace(lecture, root=tmp_path)
    shutil.copytree(lecture.directory, copy.directory)
    missing = copy.missing_parts()
    assert f"solution (solutions/{copy.id})" in missing and f"mutant catalog (autograder/mutants/{copy.id}.py)" in missing, (
        f"a copy with only assignments/{copy.id}/ should lack its solution and catalog; missing_parts says {missing}")
    assert not any(part.startswith(("handout", "public tests", "demo")) for part in missing), (
        f"assignments/{copy.id}/ holds the handout, public tests and demo; missing_parts says {missing}")


VALID = {"id": "toy", "title": "Toy", "files": ["toy.py"], "tasks": [{"name": "t", "title": "T", "points": 1}],
         "visibility": {"public": "visible", "hidden": "visible"}, "call_timeout_seconds": 1}


@pytest.mark.parametrize(("change", "field"), [
    ({"title": ""}, "title"),
    ({"files": ["class.py"]}, "files"),
    ({"files": ["toy"]}, "files[0]"),
    ({"tasks": [{"name": "t", "title": "T", "points": 0}]}, "tasks[0].points"),
    ({"visibility": {"public": "sometimes", "hidden": "visible"}}, "visibility.public"),
    ({"call_timeout_seconds": True}, "call_timeout_seconds"),
    ({"traces": ["../x.jsonl"]}, "traces[0]"),
    ({"data": "notes.txt"}, "data"),
    ({"extra": 1}, "the top level"),
], ids=["title", "keyword-file", "file-name", "points", "visibility", "timeout", "traces", "data", "unknown-key"])
def test_a_malformed_assignment_json_names_the_field(change: dict, field: str) -> None:
    with pytest.raises(AssignmentError) as raised:
        parse_assignment({**VALID, **change}, REPO, where="toy.json")
    assert str(raised.value).startswith(f"toy.json: {field}"), f"the error should name {field!r}: {raised.value}"


def test_data_files_are_kept() -> None:
    assignment = parse_assignment({**VALID, "data": ["notes/a.txt"]}, REPO)
    assert assignment.data == ("notes/a.txt",) and assignment.data_files == (REPO / "assignments/toy/notes/a.txt",), (
        f"the data key must survive loading: {assignment.data}, {assignment.data_files}")


def repository_copy(target: Path) -> Path:
    """The repository's files as git lists them (committed or not, ignored files aside), copied to target."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file() and not (REPO / name).is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)
    return target


def run(root: Path, *command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ADDOPTS"}},
           "PYTHONPATH": str(root)}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


# Its gradings wait for the test run's grading slots (tests/support/slots.py) like every batch.
@pytest.mark.timeout(1200)
def test_make_new_scaffolds_an_assignment_that_passes_every_check(tmp_path: Path) -> None:
    root = repository_copy(tmp_path / "repo")
    # -o: this interpreter's environment stands in for .venv; make must not try to build one.
    made = run(root, "make", "--no-print-directory", "-o", ".venv/.installed", "new", f"A={NEW_ID}",
               f"PY={sys.executable}")
    assert NEW_ID in run(root, sys.executable, "-m", "autograder.assignment").stdout.split(), (
        f"discover() does not see the new assignment:\n{made.stdout}")
    run(root, sys.executable, "-m", "tools.make_starter")
    run(root, sys.executable, "-m", "tools.release", NEW_ID)
    run(root, sys.executable, "-m", "autograder.build", NEW_ID)
    for submission, score in (("solutions", 10), ("starter", 0)):
        out = tmp_path / f"{submission}.json"
        run(root, sys.executable, "-m", "autograder.grade", "--assignment", NEW_ID, "--submission",
            f"{submission}/{NEW_ID}", "--out", str(out))
        results = json.loads(out.read_text())
        assert results["score"] == score, f"the new assignment's {submission} scores {results['score']}, not {score}"
    demo = run(root, sys.executable, f"assignments/{NEW_ID}/demo.py")
    assert "your mean" in demo.stdout, f"the demo should print its table on the reference:\n{demo.stdout}"
    checks = run(root, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CHECK_FILES,
                 "-k", f"{NEW_ID} and not venv", timeout=900)
    assert " passed" in checks.stdout and " failed" not in checks.stdout and " skipped" not in checks.stdout, (
        f"the repository's checks of {NEW_ID}:\n{checks.stdout[-3000:]}")
