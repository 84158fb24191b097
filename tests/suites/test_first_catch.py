"""No catch is lost: every corpus bug and catalog mutant recorded as caught (tests/support/first_catch.py)
is still caught by the hidden tests, first by the same test or by one whose message names the same rule.

The records are rewritten by `python -m tools.first_catch <id>` when a change is meant to move a
first catch; this test fails on a change that moves one without saying so, or lets a bug through.
Every bug is graded in-process, as test_corpus.py and test_suites.py grade them.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from support import first_catch
from support.graders import Graders, JobResults
from support.suite import suites

SUITES = suites()
RECORDED = [(a, kind) for a in sorted(SUITES) for kind in first_catch.KINDS if first_catch.record_path(a, kind).is_file()]
pytestmark = [pytest.mark.full, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def gradings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[JobResults]]]:
    jobs = [job for assignment, kind in RECORDED
            for job in first_catch.jobs(SUITES[assignment], kind, tmp_path_factory.mktemp(f"{assignment}-{kind}"))]
    graders = Graders(sorted(jobs, key=lambda job: job.label))
    yield graders.futures
    graders.stop()


@pytest.mark.parametrize(("assignment", "kind"), RECORDED)
def test_no_catch_is_lost(assignment: str, kind: str, gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    recorded = first_catch.load(assignment, kind)
    graded = {label: future.result() for (name, label), future in gradings.items()
              if name == assignment and label.startswith(f"{kind}/")}
    now = first_catch.records(graded)
    lost = [f"{bug}: {change}" for bug, then in sorted(recorded.items()) if then is not None
            for change in [first_catch.moved(then, now.get(bug))] if change]
    assert not lost, (
        f"{len(lost)} {kind} bugs of {assignment} are no longer caught as {first_catch.record_path(assignment, kind).name} "
        "records (rerun `python -m tools.first_catch` if the move is meant):\n" + "\n".join(lost))
