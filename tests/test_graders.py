"""suite_support.Graders, the grading pool of tests/test_suites.py: a job that overruns its time
fails alone, with a message saying so, and the jobs after it are still graded."""
from __future__ import annotations

from pathlib import Path

import pytest

from suite_support import MODES, REPO, Graders, Job


def test_a_job_that_overruns_fails_alone(tmp_path: Path) -> None:
    starter = REPO / "starter" / "lecture02"
    jobs = [Job("lecture02", label, starter, REPO, tmp_path / label, seconds, {})
            for label, seconds in (("overruns", 0.01), ("first", 120.0), ("second", 120.0))]
    graders = Graders(jobs)
    try:
        with pytest.raises(AssertionError, match="took longer than 0.01 s"):
            graders.futures["lecture02", "overruns"].result(timeout=240)
        for label in ("first", "second"):
            graded = graders.futures["lecture02", label].result(timeout=240)
            for mode in MODES:
                assert graded.results[mode]["score"] == 0 and graded.outcomes(mode), (
                    f"{label} ({mode}): the starter should be graded, 0 points: {graded.results[mode]['output']}")
    finally:
        graders.stop()
