"""A checkout in a private folder, graded as root without bubblewrap.

Root's home and what `mktemp -d` makes are mode 0700: the worker's uid cannot enter them, so it
cannot import numpy from a `.venv` there. The grader stages a readable copy for it
(autograder/harness/sandbox/staging.py). Here the checkout's sources, a venv and the numpy the
grader imports lie in a 0700 folder: the venv reaches this one's packages through a .pth file (so
they are not among its site folders, which the worker searches), and numpy comes first on
PYTHONPATH, which the runner passes on to the grading process. The reference still gets full
marks, the results say what was staged, and nothing is left behind in the temporary folder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import site
import sysconfig

import numpy as np
import pytest

from autograder.assignment import load_assignment
from autograder.harness.sandbox import staging
from autograder.harness.sandbox.sandbox import WORKER_DISTRIBUTIONS
from support.isolation import folder_others_may_enter

REPO = Path(__file__).resolve().parents[2]
# What autograder.grade builds a package from (assignment registry, harness, library, references).
SOURCES = ("assignments", "autograder", "kvlab", "requirements", "solutions", "tools")
ASSIGNMENT = "lecture02"  # the quickest to grade; the staging is the same for every assignment

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the worker runs as a uid of its own only under root")


@pytest.fixture
def private() -> Iterator[Path]:
    """A 0700 folder, as `mktemp -d` makes, holding a copy of the checkout and of numpy."""
    folder = Path(tempfile.mkdtemp(prefix="kvlab-private-"))
    assert folder.stat().st_mode & 0o777 == 0o700
    try:
        for name in SOURCES:
            shutil.copytree(REPO / name, folder / "clone" / name, ignore=shutil.ignore_patterns("__pycache__"))
        numpy_home = Path(np.__file__).resolve().parent.parent
        for name in WORKER_DISTRIBUTIONS:
            if (numpy_home / name).is_dir():
                shutil.copytree(numpy_home / name, folder / "site" / name)
        venv = folder / "venv"
        subprocess.run([os.path.realpath(sys.executable), "-m", "venv", "--without-pip", str(venv)], check=True)
        purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
        (purelib / "grader-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """TMPDIR for the grading: a folder others may enter, checked empty afterwards."""
    with folder_others_may_enter("kvlab-scratch-") as folder:
        yield folder


def test_reference_gets_full_marks_from_a_private_checkout(private: Path, scratch: Path) -> None:
    assert not staging.reachable(private / "site" / "numpy"), "the fixture's numpy should be out of other users' reach"
    out = private / "results.json"
    env = {**os.environ, "PYTHONPATH": str(private / "site"), "KVLAB_NO_BUBBLEWRAP": "1", "TMPDIR": str(scratch)}
    done = subprocess.run(
        [str(private / "venv" / "bin" / "python"), "-m", "autograder.grade", "--assignment", ASSIGNMENT,
         "--submission", f"solutions/{ASSIGNMENT}", "--out", str(out)],
        cwd=private / "clone", env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert out.is_file(), f"no results.json (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    results = json.loads(out.read_text(encoding="utf-8"))
    isolation = "\n".join(results["extra_data"]["isolation"])
    expected = load_assignment(ASSIGNMENT, REPO).max_score
    assert results["score"] == expected, (
        f"the reference scored {results['score']} of {expected} from a private checkout; isolation:\n{isolation}\n"
        f"{results.get('output', '')[-3000:]}"
    )
    assert "staged readable for the worker" in isolation, f"numpy was not staged; isolation:\n{isolation}"
    assert "bubblewrap" not in isolation or "no bubblewrap" in isolation, f"bubblewrap was used:\n{isolation}"
    left = sorted(p.name for p in scratch.iterdir())
    assert not left, f"the grading left {left} in its temporary folder"
