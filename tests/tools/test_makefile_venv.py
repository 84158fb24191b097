"""The venv rules of both Makefiles (the repository's and the student bundle's), with a stand-in Python.

`make venv` on Python < 3.10 stops with "needs Python 3.10 or newer" before creating anything; an
install that fails leaves no stamp, and the next `make` deletes that venv and builds it again.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Stands in for python3: reports $FAKE_VERSION, "creates" a venv by copying itself, and answers
# `-m pip` with $FAKE_PIP_STATUS.
FAKE_PYTHON = """#!/bin/sh
case "$1" in
  --version) echo "Python $FAKE_VERSION" ;;
  -c) [ "$FAKE_VERSION" != 3.9.18 ] ;;
  -m) if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; else exit "$FAKE_PIP_STATUS"; fi ;;
esac
"""
MAKEFILES = {
    "repository": (REPO / "Makefile", ["requirements/student.txt", "requirements/grader.txt", "requirements/instructor.txt"]),
    "student bundle": (REPO / "tools" / "student_files" / "Makefile", ["requirements.txt"]),
}


def make_venv(folder: Path, version: str, pip_status: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FAKE_VERSION": version, "FAKE_PIP_STATUS": str(pip_status)}
    return subprocess.run(["make", "--no-print-directory", "PYTHON=./python3", ".venv/.installed"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(params=sorted(MAKEFILES))
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A folder with one of the Makefiles, its requirement files (empty) and the stand-in python3."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    makefile, requirements = MAKEFILES[request.param]
    shutil.copyfile(makefile, tmp_path / "Makefile")
    for name in requirements:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "python3").write_text(FAKE_PYTHON, encoding="utf-8")
    (tmp_path / "python3").chmod(0o755)
    return tmp_path


def test_old_python_is_named_before_anything_is_created(folder: Path) -> None:
    run = make_venv(folder, "3.9.18", 0)
    assert run.returncode != 0, f"Python 3.9 should stop make:\n{run.stdout}{run.stderr}"
    assert "needs Python 3.10 or newer" in run.stdout + run.stderr and "3.9.18" in run.stdout, \
        f"the message should name the requirement and the version found:\n{run.stdout}{run.stderr}"
    assert not (folder / ".venv").exists(), "no venv should be created with a Python that is too old"


def test_unfinished_install_is_rebuilt(folder: Path) -> None:
    failed = make_venv(folder, "3.11.7", 1)
    assert failed.returncode != 0 and (folder / ".venv" / "bin" / "python").is_file(), \
        f"the failing install should stop make after creating the venv:\n{failed.stdout}{failed.stderr}"
    assert not (folder / ".venv" / ".installed").exists(), "a failed install must leave no stamp"
    (folder / ".venv" / "leftover").write_text("", encoding="utf-8")
    rebuilt = make_venv(folder, "3.11.7", 0)
    assert rebuilt.returncode == 0, f"the second make should finish:\n{rebuilt.stdout}{rebuilt.stderr}"
    assert (folder / ".venv" / ".installed").is_file(), "a complete install should write the stamp"
    assert not (folder / ".venv" / "leftover").exists(), "a venv without the stamp should be deleted and built again"
