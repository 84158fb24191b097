"""Grading as an ordinary user: it still grades right, and the results say which isolation is reduced.

CI runs as root (as Gradescope does), so the test becomes an ordinary user itself: bubblewrap
gives user nobody a view in which this interpreter is reachable (it may live under /root, which
nobody cannot enter), and setpriv drops root. Only the runner's identity changes; the repository,
the venv and the submission are the real ones.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.harness.results import validate_file
from support.isolation import folder_others_may_enter

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("setpriv") is None,
    reason="becoming an ordinary user needs root, bubblewrap and setpriv",
)


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A folder user nobody can enter."""
    with folder_others_may_enter("kvlab-unprivileged-") as folder:
        yield folder


def as_nobody(argv: list[str], home: Path) -> list[str]:
    """argv run by user nobody, with the interpreter and the repository reachable even under /root."""
    view = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    needed = [Path(sys.base_prefix).resolve(), REPO]
    under_root = sorted({Path("/root", path.relative_to("/root").parts[0])
                         for path in needed if Path("/root") in path.parents})
    if under_root:
        # /root is mode 700: replace it with an empty folder and bind back the children we need.
        # Bind /root's children, not deeper folders: bubblewrap would create the folders between
        # /root and a deeper bind with mode 700, out of nobody's reach again.
        view += ["--tmpfs", "/root"]
        for top in under_root:
            view += ["--ro-bind", str(top), str(top)]
    for path in needed:
        closed = [str(folder) for folder in reversed(path.parents)
                  if folder != Path("/root") and not folder.stat().st_mode & 0o001]
        if closed:
            pytest.skip(f"user nobody cannot enter {closed[0]}, on the way to {path}")
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return [*view, "--", *drop, "env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", *argv]


def test_ordinary_user_grades_and_reports_reduced_isolation(public_tmp: Path) -> None:
    submission, out = public_tmp / "submission", public_tmp / "out"
    submission.mkdir()
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    shutil.copy(REPO / "solutions" / "lecture02" / "kv_decode.py", submission)
    results = out / "results.json"
    argv = [sys.executable, "-m", "autograder.harness.run", "--assignment", "lecture02",
            "--submission", str(submission), "--results", str(results)]
    done = subprocess.run(as_nobody(argv, out), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert results.is_file(), f"no results.json from an unprivileged grader:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    validate_file(results)
    graded = json.loads(results.read_text())
    assert graded["score"] == 100, f"the reference should get full marks as an ordinary user too; got {graded['score']}"
    isolation = graded["extra_data"]["isolation"]
    assert any(line.startswith("reduced: running as the grader's own user") for line in isolation), (
        f"an ordinary-user grader must say its isolation is reduced, not skip it silently: {isolation}"
    )
    # Without bubblewrap only Landlock hides them; where it is missing the report names them.
    assert any(line.startswith(("reduced: not hidden", "hidden by Landlock")) for line in isolation), (
        f"the hidden paths, and what hides them or that nothing does, must be named: {isolation}"
    )
