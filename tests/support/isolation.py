"""What this machine's isolation lets a test do: an interpreter and a folder the worker's
unprivileged uid can reach, and whether a sandbox's worker runs in bubblewrap's view.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autograder.harness.sandbox import identity
from tools import venv_python


def readable_python() -> str | None:
    """A system interpreter of this version that the worker's unprivileged uid can run (as setup.sh's
    venv is on Gradescope; pyenv's under /root may not be), or None; None when not root, as only a
    root grader runs the worker as another user."""
    candidate = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if os.geteuid() != 0 or not os.path.exists(candidate):
        return None
    return candidate if venv_python.runs([candidate, "-c", "pass"], identity.PROBE_UID) else None


@contextlib.contextmanager
def folder_others_may_enter(prefix: str) -> Iterator[Path]:
    """A new folder of mode 755 in the temporary folder (pytest's tmp_path is root's, mode 700, out of
    an unprivileged uid's reach), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def bubblewrapped(isolation: list[str]) -> bool:
    """Whether a sandbox's isolation report (`Sandbox.isolation`) says its worker runs in bubblewrap's
    view (not where bubblewrap is missing or refused, as in Gradescope's Docker)."""
    return any(line.startswith("private filesystem view (bubblewrap)") for line in isolation)
