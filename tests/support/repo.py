"""The repository under test: its root folder and its assignments."""
from __future__ import annotations

from pathlib import Path

from autograder.assignment import discover

REPO = Path(__file__).resolve().parents[2]

# Every assignment of the repository (the missing-parts test checks each is complete).
ASSIGNMENT_IDS = discover(REPO)
