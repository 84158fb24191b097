"""tools/venv_python.py: as root, `.venv` is built from an interpreter the sandbox's uid can run."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tools import venv_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root grader runs student code as another uid")


@pytest.fixture
def reachable_python() -> str:
    """This interpreter, when an unprivileged uid can run it (a venv built by the Makefile as root)."""
    if not venv_python.runs([sys.executable, "-I", "-c", "pass"], venv_python.UNPRIVILEGED_UID):
        pytest.skip(f"an unprivileged uid cannot run {sys.executable} here")
    return sys.executable


@pytest.fixture
def unreachable_python(tmp_path: Path) -> str:
    """The same interpreter behind a folder of mode 700, as pyenv's under /root."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    link = closed / "python3"
    link.symlink_to(sys.executable)
    return str(link)


@pytest.mark.parametrize(("given", "system", "chosen"), [
    ("unreachable", "reachable", "system"),
    ("reachable", "reachable", "given"),
    ("unreachable", "missing", "given"),
])
def test_venv_python_is_one_the_sandbox_can_run(given: str, system: str, chosen: str, reachable_python: str,
                                                unreachable_python: str, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pythons = {"reachable": reachable_python, "unreachable": unreachable_python, "missing": "/nonexistent/python3"}
    monkeypatch.setattr(venv_python, "SYSTEM_PYTHON", pythons[system])
    expected = pythons[system] if chosen == "system" else pythons[given]
    assert venv_python.venv_python(pythons[given]) == expected, (
        f"given a {given} PYTHON and a {system} system python3, the venv must be built from the {chosen} one")
    said = capsys.readouterr().err
    assert ("cannot run" in said) == (chosen == "system"), f"the switch, and only the switch, is said: {said!r}"
