"""support.graders' grading pool and support.checks' mode check, of tests/suites/test_suites.py: a job
that overruns its time fails alone, with a message saying so, and the jobs after it are still
graded; the two modes' grades must agree on every test both graded (the public tests only, where
the in-process run graded only those)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.checks import check_modes_agree
from support.graders import BACKENDS, Graders, Job, JobResults
from support.repo import REPO
from support.suite import HIDDEN_MARK


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
            for mode in BACKENDS:
                assert graded.results[mode]["score"] == 0 and graded.outcomes(mode), (
                    f"{label} ({mode}): the starter should be graded, 0 points: {graded.results[mode]['output']}")
    finally:
        graders.stop()


def results(*tests: tuple[str, str, str]) -> dict[str, Any]:
    """A graded results.json holding `tests`, each (name, visibility, status)."""
    return {"extra_data": {"status": "graded"},
            "tests": [{"number": f"1.{i}", "name": name, "tags": ["kv_cache"], "max_score": 1.0, "status": status,
                       "output": "", "visibility": visibility}
                      for i, (name, visibility, status) in enumerate(tests, 1)]}


PUBLIC_PASSES, HIDDEN_FAILS = ("test_a", "visible", "passed"), ("test_b", HIDDEN_MARK, "failed")


@pytest.mark.parametrize(("inprocess", "problem"), [
    (results(PUBLIC_PASSES, HIDDEN_FAILS), None),
    (results(PUBLIC_PASSES), "the modes graded different tests"),
    (results(PUBLIC_PASSES, HIDDEN_FAILS, ("test_c", "visible", "passed")), "the modes graded different tests"),
    (results(("test_a", "visible", "failed"), HIDDEN_FAILS), "outcomes differ"),
    (results(PUBLIC_PASSES, ("test_b", HIDDEN_MARK, "passed")), "outcomes differ"),
], ids=["same-tests", "hidden-missing", "one-more", "public-differs", "hidden-differs"])
def test_modes_agree_on_every_test(tmp_path: Path, inprocess: dict[str, Any], problem: str | None) -> None:
    job = Job("lecture02", "bug", tmp_path, tmp_path, tmp_path, 1.0, {})
    graded = JobResults(job, {"sandbox": results(PUBLIC_PASSES, HIDDEN_FAILS), "inprocess": inprocess})
    if problem is None:
        check_modes_agree(graded)
    else:
        with pytest.raises(AssertionError, match=problem):
            check_modes_agree(graded)
