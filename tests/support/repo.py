"""The repository under test: its root folder, its assignments, and its modules run as make runs them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autograder.assignment import discover

REPO = Path(__file__).resolve().parents[2]

# Every assignment of the repository (the missing-parts test checks each is complete).
ASSIGNMENT_IDS = discover(REPO)

# Seconds one `run_module` may take (a whole grading of lecture 2, say).
RUN_TIMEOUT = 300


def run_module(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """python -m <args> from the repository, as make does."""
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
