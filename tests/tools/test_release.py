"""The student bundle: exactly the expected files, no answers or private files, a working Makefile,
and (the slow test) `make test` in the virtual environment the bundle's `make` builds (kept between
runs while what it is built from stays the same, see student_venv), failing on the starter and
passing with the solution."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import pytest

from autograder.assignment import Assignment, load_assignment
from autograder.harness.seeds import KEY_FILE
from support.repo import ASSIGNMENT_IDS
from support.verdicts import assert_all_not_implemented, listing, read_junit
from tools import release

ROOT = Path(__file__).resolve().parents[2]
# Files the bundle never carries; their copies anywhere in it would be a leak.
PRIVATE_FOLDERS = ("autograder", "tests", "solutions")
CACHE_NAMES = {"__pycache__", ".pytest_cache", ".hypothesis"}


class Bundle(NamedTuple):
    assignment_id: str
    folder: Path
    archive: Path


def _files(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def _assignment(assignment_id: str) -> Assignment:
    return load_assignment(assignment_id, ROOT)


@pytest.fixture(scope="module", params=ASSIGNMENT_IDS)
def bundle(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    folder, archive = release.write_bundle(request.param, tmp_path_factory.mktemp("dist"))
    return Bundle(request.param, folder, archive)


def test_bundle_holds_exactly_the_expected_files(bundle: Bundle) -> None:
    assignment = _assignment(bundle.assignment_id)
    source = assignment.directory
    public_tests = {
        f"tests/{path.relative_to(source / 'tests').as_posix()}" for path in (source / "tests").rglob("*")
        if path.is_file() and path.suffix != ".pyc" and not CACHE_NAMES & set(path.parts)
    }
    expected = (
        {path.name for path in assignment.solution.glob("*.py")}
        | {f"kvlab/{path.relative_to(ROOT / 'kvlab').as_posix()}" for path in (ROOT / "kvlab").rglob("*")
           if path.is_file() and path.suffix != ".pyc" and not CACHE_NAMES & set(path.parts)}
        | public_tests
        | ({"demo.py"} if (source / "demo.py").is_file() else set())
        | set(assignment.data)
        | {"README.md", "Makefile", "requirements.txt", "pytest.ini", "assignment.json"}
    )
    found = _files(bundle.folder)
    assert found == expected, f"unexpected files: {sorted(found - expected)}; missing: {sorted(expected - found)}"
    with zipfile.ZipFile(bundle.archive) as archive:
        zipped = {name: archive.read(name) for name in archive.namelist()}
    on_disk = {f"{bundle.assignment_id}/{name}": (bundle.folder / name).read_bytes() for name in found}
    assert zipped == on_disk, (f"{bundle.archive.name} should hold the folder's files under {bundle.assignment_id}/: "
                               f"only in the zip {sorted(zipped.keys() - on_disk.keys())}, only in the folder "
                               f"{sorted(on_disk.keys() - zipped.keys())}, or some contents differ")


def test_make_test_finds_the_points_of_each_task(bundle: Bundle) -> None:
    """`make test`'s closing table says what each task is worth: kvlab.testing reads the points from
    the assignment.json beside the bundle's tests/ (the tasks only, none of the grader's settings)."""
    from kvlab.testing import _assignment_points

    tests = sorted((bundle.folder / "tests").glob("test_*.py"))
    found = _assignment_points([SimpleNamespace(path=path) for path in tests])
    want = {task.name: task.points for task in _assignment(bundle.assignment_id).tasks}
    assert found == want, f"the bundle's make test would name the points {found}; assignment.json has {want}"
    shipped = json.loads((bundle.folder / "assignment.json").read_text(encoding="utf-8"))
    assert set(shipped) == {"id", "title", "tasks"}, f"the bundle's assignment.json holds more than the tasks: {shipped}"


def test_bundle_demo_run_from_another_folder_names_the_folder_it_searched(bundle: Bundle, tmp_path: Path) -> None:
    """A bundle has no solutions/: its demo.py run from a folder without the student's files must say
    where it looked and how to point it at the files, not only that it found nothing."""
    if not (bundle.folder / "demo.py").is_file():
        pytest.skip(f"{bundle.assignment_id} has no demo")
    env = {key: value for key, value in os.environ.items() if key != "KVLAB_SUBMISSION"}
    run = subprocess.run([sys.executable, str(bundle.folder / "demo.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    searched = bundle.folder / "solutions" / bundle.assignment_id
    assert run.returncode == 2 and f"in {searched}" in run.stderr and str(tmp_path) in run.stderr, (
        f"the demo should exit 2 naming the folder it searched ({searched}) and the current one ({tmp_path}); "
        f"exit {run.returncode}:\n{run.stderr[-2000:]}")
    assert "--submission" in run.stderr and "Traceback" not in run.stderr, f"unclear error:\n{run.stderr[-2000:]}"


def test_bundle_holds_no_solution_line(bundle: Bundle) -> None:
    lines = set()
    for solution in (ROOT / "solutions" / bundle.assignment_id).glob("*.py"):
        inside = False
        for line in solution.read_text().split("\n"):
            if "BEGIN SOLUTION" in line or "END SOLUTION" in line:
                inside = "BEGIN SOLUTION" in line
            elif inside and len(line.strip()) >= release.MIN_LEAK_LINE:
                lines.add(line.strip())
    assert lines, f"solutions/{bundle.assignment_id}/ has no solution line to look for"
    leaks = {name: sorted(line for line in lines if line in (bundle.folder / name).read_text(errors="replace"))
             for name in _files(bundle.folder)}
    leaks = {name: found for name, found in leaks.items() if found}
    assert not leaks, f"solution lines in the bundle: {leaks}"


def test_bundle_holds_no_private_file(bundle: Bundle) -> None:
    private = {
        hashlib.sha256(path.read_bytes()).hexdigest(): path.relative_to(ROOT).as_posix()
        for folder in PRIVATE_FOLDERS for path in (ROOT / folder).rglob("*")
        if path.is_file() and path.stat().st_size and not CACHE_NAMES & set(path.parts)
    }
    copies = {name: private[digest] for name in _files(bundle.folder)
              if (digest := hashlib.sha256((bundle.folder / name).read_bytes()).hexdigest()) in private}
    assert not copies, f"bundle files that are copies of private files: {copies}"


def test_bundle_holds_no_grading_key(bundle: Bundle) -> None:
    """The key that seeds the hidden tests' draws is the grader's: no file of the bundle holds its text
    or its bytes (the zip holds the same files; the Gradescope package holds the key:
    test_gradescope_package.py)."""
    text = (ROOT / KEY_FILE).read_text().strip()
    forms = (text.encode(), text.upper().encode(), bytes.fromhex(text))
    leaks = [name for name in _files(bundle.folder) if any(form in (bundle.folder / name).read_bytes() for form in forms)]
    assert not leaks, f"the grading key ({KEY_FILE}) is in the bundle's {leaks}"


def test_a_file_quoting_the_grading_key_is_found() -> None:
    """bundle_contents refuses a bundle any file of which holds the key (a handout quoting it, say)."""
    key = (ROOT / KEY_FILE).read_bytes().strip()
    files = {"README.md": b"# Handout\nkey: " + key + b"\n", "kvlab/x.py": b"x = 1\n"}
    assert release.grading_key_leaks(files, ROOT) == ["README.md"], "a file holding the key must be found"


def test_bundle_requirements_are_the_students(bundle: Bundle) -> None:
    shipped = (bundle.folder / "requirements.txt").read_text()
    pins = [line for name in ("student.txt", "serving.txt")
            for line in (ROOT / "requirements" / name).read_text().splitlines() if "==" in line]
    assert all(pin in shipped.splitlines() for pin in pins) and "-r " not in shipped, (
        f"requirements.txt should be requirements/student.txt with its includes inlined; got:\n{shipped}")
    assert "nbgrader" not in shipped and "jsonschema" not in shipped, f"instructor packages in requirements.txt:\n{shipped}"


# The lab sheet's own client scripts: students have them from the lab sheet, not from the bundle.
LAB_SHEET_SCRIPTS = {"prefix_cache_bench.py", "lmcache_test.py"}
# Modules the bundle's venv provides (requirements.txt) or the standard library.
INSTALLED_MODULES = {"pip", "pytest", "venv", "zipfile"}
# Module 6's own make targets: its bundle has them, the others do not.
MODULE06_TARGETS = {"serve", "kv-store", "bench-kvstore"}


def _code_in(handout: str) -> list[str]:
    """The handout's code: fenced blocks and inline spans, whitespace runs made single spaces."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", handout, re.MULTILINE | re.DOTALL)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", handout, flags=re.MULTILINE | re.DOTALL)
    return [" ".join(code.split()) for code in fenced + re.findall(r"`([^`]+)`", rest)]


def _module_in_bundle(folder: Path, module: str) -> bool:
    path = folder / module.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def test_everything_the_handout_runs_is_in_the_bundle(bundle: Bundle) -> None:
    """Every `make TARGET`, `python -m MODULE` and `python FILE.py` the handout (or the bundle's
    Makefile) tells a student to run names a target, module or file of the bundle."""
    makefile = (bundle.folder / "Makefile").read_text()
    targets = {name for line in re.findall(r"^([\w. -]+):(?!=)", makefile, re.MULTILINE) for name in line.split()}
    assert "@IF" not in makefile and "@END@" not in makefile, "the bundle's Makefile kept a template @IF/@END@ line"
    code = _code_in((bundle.folder / "README.md").read_text())
    wanted_targets = {found for text in code for found in re.findall(r"(?:^|[;&|] *)make ([\w-]+)", text)}
    missing = sorted(wanted_targets - targets)
    assert not missing, f"the handout of {bundle.assignment_id} says `make {missing[0]}`; the bundle's Makefile has targets {sorted(targets)}"
    modules = {found for text in code + [makefile] for found in re.findall(r"python3? -m ([\w.]+)|\$\(PY\) -m ([\w.]+)", text)
               for found in found if found}
    absent = sorted(m for m in modules - INSTALLED_MODULES if not _module_in_bundle(bundle.folder, m))
    assert not absent, f"{bundle.assignment_id}: `python -m {absent[0]}` is in the handout or Makefile; the bundle has no such module"
    scripts = {found for text in code for found in re.findall(r"python3? ([\w/.-]+\.py)\b", text)}
    absent = sorted(s for s in scripts - LAB_SHEET_SCRIPTS if not (bundle.folder / s).is_file())
    assert not absent, f"{bundle.assignment_id}: the handout runs {absent[0]}, which the bundle lacks"
    if bundle.assignment_id == "module06":
        assert MODULE06_TARGETS <= targets, f"module 6's bundle Makefile lacks {sorted(MODULE06_TARGETS - targets)}"
    else:
        assert not MODULE06_TARGETS & targets, (
            f"{bundle.assignment_id}'s Makefile has module 6's targets {sorted(MODULE06_TARGETS & targets)}")


def test_make_serve_runs_the_server_as_the_handout_says(tmp_path: Path) -> None:
    """module 6's `make serve` (dry run): the lab's model name and length, PORT, SUB, CACHING, KV_STORE."""
    folder = tmp_path  # the bundle's Makefile alone: a dry run needs nothing else
    (folder / "Makefile").write_bytes(release._student_makefile(_assignment("module06")))
    (folder / "requirements.txt").write_bytes(release._requirements(ROOT))
    run = _make(folder, "-n", "serve", "PORT=8123", "SUB=work", "CACHING=off", "KV_STORE=redis://127.0.0.1:6379")
    command = " ".join(line.rstrip("\\") for line in run.stdout.splitlines() if "kvlab.serving.server" in line
                       or line.startswith("  --"))
    for flag in ("--port 8123", "--submission work", "--served-model-name Qwen/Qwen2.5-0.5B-Instruct kvlab-serve",
                 "--max-model-len 4096", "--no-enable-prefix-caching", "--kv-store redis://127.0.0.1:6379"):
        assert flag in " ".join(command.split()), f"make serve should pass {flag!r}; it runs:\n{run.stdout}{run.stderr}"
    run = _make(folder, "-n", "serve", "CACHING=maybe")
    assert run.returncode != 0 and "CACHING must be on or off" in run.stderr, (
        f"make serve CACHING=maybe should stop with a message; exit {run.returncode}:\n{run.stdout}{run.stderr}")


def _student_env(**extra: str) -> dict[str, str]:
    """This environment minus what would leak the repository's own runs into the bundle's."""
    env = {name: value for name, value in os.environ.items()
           if name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ADDOPTS", "KVLAB_SUBMISSION",
                           "VIRTUAL_ENV", "PYTHONPATH"}}
    return {**env, **extra}


def _make(folder: Path, *targets: str, junit: Path | None = None) -> subprocess.CompletedProcess:
    env = _student_env(**({"PYTEST_ADDOPTS": f"--junitxml={junit}"} if junit else {}))
    # The interpreter running these tests stands in for the student's python3.
    return subprocess.run(["make", "--no-print-directory", *targets, f"PYTHON={sys.executable}"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=240)


def test_make_submit_zips_exactly_the_submitted_files(bundle: Bundle, tmp_path: Path) -> None:
    work = shutil.copytree(bundle.folder, tmp_path / "work")
    run = _make(work, "submit")
    files = sorted(_assignment(bundle.assignment_id).files)
    assert run.returncode == 0, f"make submit failed:\n{run.stdout}{run.stderr}"
    with zipfile.ZipFile(work / "submission.zip") as archive:
        assert sorted(archive.namelist()) == sorted(files), f"submission.zip holds {archive.namelist()}; expected {files}"
    assert all(name in run.stdout for name in files), f"make submit should say which files it took:\n{run.stdout}"


def test_make_submit_names_a_missing_file(bundle: Bundle, tmp_path: Path) -> None:
    work = shutil.copytree(bundle.folder, tmp_path / "work")
    missing = _assignment(bundle.assignment_id).files[0]
    (work / missing).unlink()
    run = _make(work, "submit")
    assert run.returncode != 0, f"make submit should fail without {missing}:\n{run.stdout}"
    assert f"{missing} is missing" in run.stdout + run.stderr, f"make submit should name {missing}:\n{run.stdout}{run.stderr}"
    assert not (work / "submission.zip").exists(), "make submit should not leave a submission.zip behind on failure"


class StudentVenv(NamedTuple):
    folder: Path  # a fresh bundle folder whose .venv is the built one
    requirements: str  # the requirements.txt it was built from
    log: str  # what the `make` that built it printed


# Built venvs, one per build input (see student_venv), per user, as the grading slots' folder is.
VENVS = Path(tempfile.gettempdir()) / f"kvlab-test-venvs-{os.geteuid()}"
# A built venv no run has used for this long is deleted when another is built.
STALE_VENV_SECONDS = 7 * 24 * 3600


@pytest.fixture(scope="module")
def student_venv(tmp_path_factory: pytest.TempPathFactory) -> StudentVenv:
    """A fresh bundle of the first assignment whose .venv is what the bundle's `make` builds from its
    requirements.txt: every bundle ships the same requirements.txt, so each bundle test below runs in
    this venv instead of installing its own.

    The install (the serving lab's packages: half a minute of a core) is kept between test runs, as
    pre-commit keeps its hooks' environments: in VENVS, under a hash of everything the build reads
    (requirements.txt, the Makefile, the interpreter standing in for python3), built again only when
    one of them changes, and on a clean machine (CI) always. A lock makes a concurrent run wait for
    the build instead of racing it."""
    folder, _ = release.write_bundle(ASSIGNMENT_IDS[0], tmp_path_factory.mktemp("venv"))
    inputs = [(folder / "requirements.txt").read_bytes(), (folder / "Makefile").read_bytes(),
              os.path.realpath(sys.executable).encode(), sys.version.encode()]
    key = hashlib.sha256(b"\0".join(inputs)).hexdigest()[:16]
    built = VENVS / key
    VENVS.mkdir(mode=0o700, exist_ok=True)
    with open(VENVS / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (built / ".venv" / ".installed").is_file():
            log = f"the venv was kept from an earlier run in {built} (delete that folder to build it again)"
        else:
            for stale in VENVS.iterdir():
                if stale.is_dir() and stale != built and time.time() - stale.stat().st_mtime > STALE_VENV_SECONDS:
                    shutil.rmtree(stale, ignore_errors=True)
                    (VENVS / f"{stale.name}.lock").unlink(missing_ok=True)
            shutil.rmtree(built, ignore_errors=True)
            built.mkdir()
            for name in ("requirements.txt", "Makefile"):
                shutil.copy(folder / name, built / name)
            run = _make(built, ".venv/.installed")
            log = run.stdout + run.stderr
        built.touch()  # used now: not stale
    (folder / ".venv").symlink_to(built / ".venv")
    return StudentVenv(folder, (folder / "requirements.txt").read_text(), log)


def test_bundle_make_installs_a_venv_that_runs_the_tests(student_venv: StudentVenv) -> None:
    """The real student path's first step: `make` installs .venv from requirements.txt by itself, and
    this bundle's own kvlab and the tests' packages import there."""
    venv = student_venv.folder / ".venv"
    assert (venv / ".installed").is_file(), f"make did not install .venv:\n{student_venv.log[-3000:]}"
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import numpy, pytest, pytest_timeout, kvlab"],
                           cwd=student_venv.folder, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, (
        f"the installed .venv cannot import what the tests need:\n{check.stderr[-2000:]}\n{student_venv.log[-3000:]}")


# The everyday tier runs the first bundle's `make test`; `make test-all` every bundle's.
@pytest.mark.parametrize("assignment_id", [pytest.param(a, marks=() if a == ASSIGNMENT_IDS[0] else (pytest.mark.full,))
                                           for a in ASSIGNMENT_IDS])
def test_bundle_make_test_in_the_students_venv(assignment_id: str, student_venv: StudentVenv, tmp_path: Path) -> None:
    """The real student path: `make test` (a venv built from requirements.txt, see student_venv), then
    the tests on the starter, on one task, and on the solution."""
    folder, _ = release.write_bundle(assignment_id, tmp_path / "dist")
    assert (folder / "requirements.txt").read_text() == student_venv.requirements, (
        f"{assignment_id}'s bundle ships other requirements than {ASSIGNMENT_IDS[0]}'s: it needs its own venv here")
    (folder / ".venv").symlink_to(student_venv.folder / ".venv")
    (folder / ".venv" / ".installed").touch()  # newer than this bundle's requirements.txt: make keeps it

    starter_report = tmp_path / "starter.xml"
    run = _make(folder, "test", junit=starter_report)
    assert run.returncode != 0, f"make test should fail on the starter:\n{run.stdout[-3000:]}"
    assert_all_not_implemented(read_junit(starter_report), run.stdout)

    task = _assignment(assignment_id).tasks[0].name
    task_report = tmp_path / "task.xml"
    run = _make(folder, "test", f"TASK={task}", junit=task_report)
    tasks_run = {outcome.task for outcome in read_junit(task_report)}
    assert tasks_run == {task}, f"make test TASK={task} ran tests of {sorted(tasks_run)}:\n{run.stdout[-3000:]}"

    for solution in (ROOT / "solutions" / assignment_id).glob("*.py"):
        shutil.copy(solution, folder / solution.name)
    solution_report = tmp_path / "solution.xml"
    run = _make(folder, "test", junit=solution_report)
    not_passed = [outcome for outcome in read_junit(solution_report) if not outcome.passed]
    assert run.returncode == 0 and not not_passed, (
        f"make test should pass with the solution (exit {run.returncode}):\n{listing(not_passed)}\n{run.stdout[-3000:]}")
