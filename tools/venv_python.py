"""The interpreter to build `.venv` from (the Makefile's `venv` target): PYTHON, unless the grader's
sandbox could not run it.

Run as root, the grader runs student code as an unprivileged uid with the venv's interpreter. Where
bubblewrap works it binds that interpreter into the worker's view; where it does not (a machine
without the package, Gradescope's Docker) the uid must reach the interpreter through the file
permissions, and an interpreter installed under /root (pyenv's, mode 700) is out of its reach: every
grading then ends in the harness's refusal, `make`'s reference grading included. So, as root, when
no unprivileged uid can start PYTHON, this picks the system's python3 if it is 3.10 or newer, can
make a venv and can be started by that uid (as setup.sh's venv on Gradescope), and says so on
stderr. Otherwise it keeps PYTHON, and the grader's refusal says what to do.

    python3 tools/venv_python.py PYTHON      (prints the interpreter on stdout)

Standard library only: it runs before anything is installed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

# A uid that owns nothing and is in no group: what any of the sandbox's uids may run, it may run.
UNPRIVILEGED_UID = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
CAN_BUILD_A_VENV = "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))"


def runs(argv: list[str], uid: int | None = None) -> bool:
    """Whether argv exits 0 (as `uid` when given)."""
    try:
        done = subprocess.run(argv, user=uid, group=uid, extra_groups=[] if uid is not None else None,
                              cwd="/", stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def venv_python(python: str) -> str:
    """`python`, or the system's python3 when only that one is within an unprivileged uid's reach."""
    found = shutil.which(python)
    if os.geteuid() != 0 or found is None or runs([found, "-I", "-c", "pass"], UNPRIVILEGED_UID):
        return python
    if runs([SYSTEM_PYTHON, "-I", "-c", CAN_BUILD_A_VENV]) and runs([SYSTEM_PYTHON, "-I", "-c", "pass"], UNPRIVILEGED_UID):
        print(f"make: building .venv from {SYSTEM_PYTHON}, not {found}: as root the grader runs student code "
              f"as an unprivileged user, who cannot run {found} (make PYTHON=... chooses another)",
              file=sys.stderr)
        return SYSTEM_PYTHON
    return python


if __name__ == "__main__":
    print(venv_python(sys.argv[1] if len(sys.argv) > 1 else "python3"))
