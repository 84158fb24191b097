"""The two tiers and the batches' shared limit (tests/support/tiers.py, tests/support/slots.py):
the everyday tier keeps a sample of every kind of check, a selection grades what it selects, and
gradings never run more at once than the slots allow."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.repo import REPO
from support.suite import suites

SLOT_HOLDER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from support.slots import grading_slot
with grading_slot():
    print(time.monotonic(), flush=True)
    time.sleep(float(sys.argv[2]))
    print(time.monotonic(), flush=True)
"""


def collected(*args: str) -> list[str]:
    """The node ids pytest collects from the repository's tests with `args`."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"collection failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(("jobs", "overlap"), [(1, False), (2, True)])
def test_gradings_never_exceed_the_slots(tmp_path: Path, jobs: int, overlap: bool) -> None:
    # A folder of slots of this test's own (TMPDIR), so the test run's real slots do not delay it.
    env = {**os.environ, "TEST_JOBS": str(jobs), "TMPDIR": str(tmp_path)}
    holders = [subprocess.Popen([sys.executable, "-c", SLOT_HOLDER, str(REPO / "tests"), "1.0"], env=env,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    spans = []
    for holder in holders:
        out, _ = holder.communicate(timeout=60)
        assert holder.returncode == 0, f"a slot holder failed with status {holder.returncode}"
        spans.append(tuple(map(float, out.split())))
    (start_a, end_a), (start_b, end_b) = sorted(spans)
    assert (start_b < end_a) is overlap, (
        f"with TEST_JOBS={jobs}, two gradings of 1 s held slots over {spans}: they should "
        f"{'overlap' if overlap else 'run one after the other'}")


def test_the_everyday_tier_samples_every_task_and_family(monkeypatch: pytest.MonkeyPatch) -> None:
    everyday = set(collected("-m", "not full", "tests/suites/test_suites.py", "tests/suites/test_corpus.py",
                             "tests/hostile"))
    everything = collected("tests/suites/test_suites.py", "tests/suites/test_corpus.py", "tests/hostile")
    assert len(everyday) < len(everything), "the everyday tier should leave out the full tier's tests"
    for name, suite in suites().items():
        caught = {m.tasks[0] for m in suite.catalog
                  if f"tests/suites/test_suites.py::test_mutant_is_caught[{name}-{m.name}]" in everyday}
        assert caught == {m.tasks[0] for m in suite.catalog}, (
            f"the everyday tier grades no mutant of {name}'s tasks {sorted({m.tasks[0] for m in suite.catalog} - caught)}")
    # The hostile modules by the names pytest imports them under, also when this file runs alone.
    monkeypatch.syspath_prepend(str(REPO / "tests" / "hostile"))
    from test_hostile import FAMILIES
    from test_hostile_modes import TASK_FAMILIES

    graded = " ".join(node for node in everyday if "test_hostile_submission" in node or "test_task_attack" in node)
    assert graded.count("test_hostile_submission") == len(FAMILIES), (
        f"one lecture 2 case per payload family ({len(FAMILIES)}) in the everyday tier: {graded}")
    assert graded.count("test_task_attack_gains_nothing") == len(TASK_FAMILIES), (
        f"one task case per payload family ({len(TASK_FAMILIES)}) in the everyday tier: {graded}")


def test_a_selected_hostile_case_is_the_only_one_graded() -> None:
    # -s shows the campaign's summary line; the honest part is graded beside the case.
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "tests/hostile/test_hostile.py::test_hostile_submission[SystemExit-from-a-call]"],
        cwd=REPO, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True, text=True, timeout=600)
    assert "1 passed" in done.stdout or "1 skipped" in done.stdout, done.stdout[-3000:]
    if "1 passed" in done.stdout:
        assert "hostile suite: 1 cases graded" in done.stdout, (
            f"one selected case should grade one case ({time.monotonic() - started:.0f} s):\n{done.stdout[-3000:]}")
