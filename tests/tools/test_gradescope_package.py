"""The Gradescope package (python -m autograder.build) of every assignment: exactly the grading files,
no solution text, runnable scripts, reproducible bytes; unpacked like /autograder, its run_autograder
grades the reference and the starter, and leaves the contact-the-staff result whenever the grader
breaks. Where the Mooncake traces an assignment needs are absent, the package carries stand-ins
(support.traces.stand_in_traces).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autograder.assignment import REGISTRY_FILES, Assignment, load_assignment
from autograder.build import build
from autograder.grade import unpack
from autograder.harness.results import FAULT_MESSAGE, validate
from autograder.harness.seeds import KEY_FILE
from support.repo import ASSIGNMENT_IDS
from support.traces import stand_in_traces
from support.tiers import FULL, sample

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = ("setup.sh", "run_autograder")


@pytest.fixture(scope="module", params=ASSIGNMENT_IDS)
def assignment(request: pytest.FixtureRequest) -> Assignment:
    return load_assignment(request.param, REPO)


@pytest.fixture(scope="module")
def package(assignment: Assignment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package, built with the real traces or their stand-ins; the same environment for rebuilds."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in stand_in_traces(assignment.traces, tmp_path_factory.mktemp("traces")).items():
            patch.setenv(name, value)
        yield build(assignment.id, tmp_path_factory.mktemp("dist"))


def repo_files(folder: str) -> set[str]:
    """Files under a repository folder, as the package should name them (no caches, no dot-files)."""
    return {
        path.relative_to(REPO).as_posix() for path in (REPO / folder).rglob("*")
        if path.is_file() and path.suffix != ".pyc"
        and not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(REPO).parts)
    }


def test_zip_holds_exactly_the_grading_files(assignment: Assignment, package: Path) -> None:
    expected = {
        *SCRIPTS, *(f"requirements/{path.name}" for path in (REPO / "requirements").glob("*.txt") if path.name != "instructor.txt"),
        "autograder/__init__.py", *REGISTRY_FILES, KEY_FILE,
        f"assignments/{assignment.id}/assignment.json",
        *repo_files("kvlab"), *repo_files("autograder/harness"), *repo_files(f"autograder/hidden/{assignment.id}"),
        *repo_files(f"assignments/{assignment.id}/tests"), *(f"data/mooncake/{name}" for name in assignment.traces),
    }
    names = set(zipfile.ZipFile(package).namelist())
    assert names == expected, f"extra: {sorted(names - expected)}; missing: {sorted(expected - names)}"
    assert any(name.startswith("autograder/harness/sandbox/") for name in names), "the sandbox must be packaged"
    assert any(name.startswith(f"autograder/hidden/{assignment.id}/test_") for name in names), "hidden tests missing"
    with zipfile.ZipFile(package) as archive:
        assert archive.read(KEY_FILE) == (REPO / KEY_FILE).read_bytes(), (
            f"the package's {KEY_FILE} must be the checkout's: the same files would draw otherwise on Gradescope")


def solution_regions() -> list[tuple[str, str]]:
    """(file, whitespace-normalised text) of the solution regions of 3 lines or more.

    A one-line region (`self.length += n`, a byte-count formula) also appears, legitimately, in the
    course library or in a hidden test computing the expected value; longer ones are the answers.
    """
    regions = []
    for path in sorted((REPO / "solutions").glob("*/*.py")):
        for body in re.findall(r"BEGIN SOLUTION[^\n]*\n(.*?)\n[^\n]*END SOLUTION", path.read_text(), re.S):
            if len([line for line in body.splitlines() if line.strip()]) >= 3:
                regions.append((path.relative_to(REPO).as_posix(), " ".join(body.split())))
    return regions


def test_zip_holds_no_solution_text(package: Path) -> None:
    regions = solution_regions()
    assert regions, "found no solution regions to look for"
    with zipfile.ZipFile(package) as archive:
        for name in archive.namelist():
            text = " ".join(archive.read(name).decode(errors="replace").split())
            assert "BEGIN SOLUTION" not in text, f"{name} carries a solution marker"
            for source, region in regions:
                assert region not in text, f"{name} contains a solution region of {source}: {region[:80]}..."
            assert Path(name).name not in {Path(s).name for s, _ in regions}, f"{name} is a solution file"


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_executable_bash(package: Path, script: str) -> None:
    with zipfile.ZipFile(package) as archive:
        info = archive.getinfo(script)
        text = archive.read(script).decode()
    assert (info.external_attr >> 16) & 0o777 == 0o755, f"{script} has mode {oct(info.external_attr >> 16)}"
    assert text.startswith("#!/usr/bin/env bash\n"), f"{script} must start with a #! line"
    assert re.search(r"@[A-Z_]+@", text) is None, f"{script} has an unfilled @PLACEHOLDER@"
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, f"{script} is not valid bash: {check.stderr}"


def test_setup_sh_prepares_the_ubuntu_image(package: Path) -> None:
    text = zipfile.ZipFile(package).read("setup.sh").decode()
    for needed in ("apt-get install -y --no-install-recommends python3-venv", "bubblewrap \\\n  || ",
                   'python3 -m venv "$ROOT/venv"', '-r "$SOURCE/requirements/grader.txt"',
                   '"$ROOT/venv/bin/python" -m compileall -q "$SOURCE"',
                   'chmod 700 "$SOURCE"'):
        assert needed in text, f"setup.sh lacks {needed!r}"


def test_build_is_deterministic(assignment: Assignment, package: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The same traces as the first build: unpack them from it.
    with zipfile.ZipFile(package) as archive:
        archive.extractall(tmp_path / "first", [f"data/mooncake/{name}" for name in assignment.traces])
    monkeypatch.setenv("KVLAB_MOONCAKE_DIR", str(tmp_path / "first" / "data" / "mooncake"))
    again = build(assignment.id, tmp_path)
    assert again.read_bytes() == package.read_bytes(), "two builds of the same sources must be byte-identical"
    infos = zipfile.ZipFile(again).infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos), "entries must be sorted"
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}, "timestamps must be fixed"


def autograder_root(tmp_path: Path, package: Path, submission: Path) -> Path:
    """A folder laid out like Gradescope's /autograder after setup.sh, holding `submission`."""
    root = tmp_path / "autograder"
    unpack(package, root / "source")
    (root / "source").chmod(0o700)
    shutil.copytree(submission, root / "submission")
    (root / "results").mkdir()
    return root


def run_autograder(root: Path, python: str = sys.executable) -> dict[str, Any]:
    """Run source/run_autograder as Gradescope does; the validated results.json it leaves."""
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "KVLAB_PYTHON": python}
    done = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"run_autograder exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert [p.name for p in (root / "results").iterdir()] == ["results.json"], "results/ holds results.json only"
    assert stat.S_IMODE((root / "results").stat().st_mode) == 0o700, "results/ must be root-only"
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results)
    return results


# The everyday tier runs the package of the one assignment that carries a trace (lecture 7's); the
# others grade as the test_suites.py baselines grade them, sandboxed, and `make test-all` runs theirs.
PACKAGE_RUNS = [pytest.param(a, marks=() if a == "lecture07" else (FULL,)) for a in ASSIGNMENT_IDS]
# A sabotaged grader fails the same way whatever the assignment: the everyday tier breaks the first.
SABOTAGED = sample(ASSIGNMENT_IDS, group=lambda _: "sabotaged")


@pytest.mark.parametrize("assignment", PACKAGE_RUNS, indirect=True)
@pytest.mark.parametrize(("submission", "full_marks"), [("solutions", True), ("starter", False)])
def test_run_autograder_grades_reference_and_starter(assignment: Assignment, package: Path, tmp_path: Path,
                                                     submission: str, full_marks: bool) -> None:
    score = assignment.max_score if full_marks else 0
    results = run_autograder(autograder_root(tmp_path, package, REPO / submission / assignment.id))
    assert results["extra_data"]["status"] == "graded", f"{submission}: {results['output']}"
    assert results["score"] == score, f"{submission} should score {score}, got {results['score']}"
    assert len(results["tests"]) > 0, f"{submission}: no per-test results"


def corrupt_hidden_test(root: Path) -> str:
    (hidden,) = (root / "source" / "autograder" / "hidden").iterdir()
    (hidden / "test_zz_corrupt.py").write_text("def broken(:\n")
    return sys.executable


def runner_writes_garbage(root: Path) -> str:
    (root / "source" / "autograder" / "harness" / "run.py").write_text(
        "import sys\nopen(sys.argv[sys.argv.index('--results') + 1], 'w').write('{\"score\": 100}')\n"
    )
    return sys.executable


def no_grading_key(root: Path) -> str:
    (root / "source" / KEY_FILE).unlink()
    return sys.executable


def no_python(root: Path) -> str:
    return str(root / "venv" / "bin" / "python")  # setup.sh never ran here: there is no venv


SABOTAGE: dict[str, Callable[[Path], str]] = {
    "a hidden test that does not import": corrupt_hidden_test,
    "a runner that writes an invalid file": runner_writes_garbage,
    "no grading key to seed the draws": no_grading_key,
    "no interpreter at all": no_python,
}


@pytest.mark.parametrize("assignment", SABOTAGED, indirect=True)
@pytest.mark.parametrize("sabotage", SABOTAGE.values(), ids=SABOTAGE.keys())
def test_a_broken_grader_gives_the_contact_staff_result(assignment: Assignment, package: Path, tmp_path: Path,
                                                        sabotage: Callable[[Path], str]) -> None:
    root = autograder_root(tmp_path, package, assignment.solution)
    results = run_autograder(root, python=sabotage(root))
    assert results["output"] == FAULT_MESSAGE, f"expected the contact-staff message, got {results['output']!r}"
    assert results["score"] == 0 and results["tests"] == [], f"a grader fault scores 0 with no tests: {results}"
    assert results["extra_data"]["status"] == "grader_fault", f"the fault must be recorded: {results['extra_data']}"
