"""The hostile campaign's third part: grade-all's submissions, graded at once in each of the four ways
a course grades (support.grading_modes.MODES), cannot read each other's files.

A file of its own so that the test runner's workers grade it beside the other parts
(tests/hostile/test_hostile.py, tests/hostile/test_hostile_modes.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder.build import build
from support import slots
from support.grading_modes import MODES, mode_env, mode_refusal, ordinary_user
from support.hostile_campaign import ASSIGNMENT, CALL_TIMEOUT, CAMPAIGN_TIMEOUT, HOSTILE_DIR, SOLUTION, all_text
from support.repo import REPO
from support.tiers import FULL, params_of, selected

# ----- grade-all: submissions graded at once cannot read each other ----------------------------------
# A victim (lecture 2's reference with a secret line) and three peeks (the reference with a payload that
# looks for the secret in another grading's copy of its files, in another sandbox's seed, or in the
# folder of submissions a batch grader's command line names) graded together by grade-all's
# `grade_one`, all at once, in each mode: every grading graded, the victim full marks, no peek's
# results show the secret.

PEEKS = ("peek_graded_copies", "peek_sandbox_seeds", "peek_submissions_folder")
SECRET = "KVLAB-SECRET-"
# mode -> peek -> why it cannot be held there (the results must then say the isolation is reduced)
PEEKS_UNHELD = {"neither": {"peek_submissions_folder": "the folder of submissions is readable by every user "
                                                       "here; with neither bubblewrap nor Landlock, file "
                                                       "permissions are the only barrier"}}
GRADE_BATCH = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from autograder.grade_all import grade_one
package, submissions, out = map(Path, sys.argv[1:4])
folders = sorted(submissions.iterdir())
with ThreadPoolExecutor(len(folders)) as pool:
    print(list(pool.map(lambda folder: grade_one(package, folder, out), folders)))
"""


@dataclass
class Batch:
    results: dict[str, dict[str, Any] | None]  # submission -> its results.json (None: none was written)
    log: str
    secret: str


@pytest.fixture(scope="session")
def batch_campaign(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Batch]]:
    """mode -> the victim and the peeks graded together in that mode (the modes the session's
    selected tests read that this machine grades in)."""
    base = tmp_path_factory.mktemp("hostile-batch")
    package = build(ASSIGNMENT, base / "dist")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KVLAB_", "TMPDIR"))},
           "KVLAB_CALL_TIMEOUT": str(CALL_TIMEOUT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}
    batches = {}
    items = selected(request, "batch_campaign")
    peeks = params_of(items, "peek")
    with ordinary_user() as user:
        for mode in (mode for mode in params_of(items, "mode") if mode_refusal(mode) is None):
            mode_user = user if mode == "user" else None
            home = user.work if mode_user else base
            folder = Path(tempfile.mkdtemp(prefix=f"batch-{mode}-", dir=home))
            folder.chmod(0o755)  # a staff member's folder of submissions, readable by all
            secret = f"{SECRET}{os.urandom(8).hex()}"
            solution = SOLUTION.read_text(encoding="utf-8")
            submissions = folder / "submissions"
            for name, text in [("victim", f"{solution}\n# {secret}\n"),
                               *((peek, f"{solution}\n\n{(HOSTILE_DIR / peek / 'payload.py').read_text()}")
                                 for peek in peeks)]:
                (submissions / name).mkdir(parents=True)
                (submissions / name / SOLUTION.name).write_text(text, encoding="utf-8")
            shutil.copy(package, folder / package.name)
            if mode_user:
                user.give(folder)
            out, graded_env = folder / "out", mode_env(mode, env, user)
            grading = [graded_env.get("KVLAB_PYTHON", sys.executable), "-c", GRADE_BATCH,
                       str(folder / package.name), str(submissions), str(out)]
            with slots.grading_slot():  # one slot for the batch: its gradings must overlap to be tested
                done = subprocess.run(mode_user.command(grading) if mode_user else grading,
                                      cwd=mode_user.work if mode_user else REPO, env=graded_env,
                                      capture_output=True, text=True, timeout=900)
            results = {}
            for name in ["victim", *peeks]:
                path = out / name / "results.json"
                results[name] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
            batches[mode] = Batch(results, (done.stdout + done.stderr)[-4000:], secret)
        yield batches


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
# The everyday tier grades the victim and the first peek as root with bubblewrap; `make test-all` every
# peek in every mode.
@pytest.mark.parametrize("peek", [pytest.param(peek, marks=() if peek == PEEKS[0] else (FULL,)) for peek in PEEKS])
@pytest.mark.parametrize("mode", [pytest.param(mode, marks=() if mode == "bubblewrap" else (FULL,)) for mode in MODES])
def test_grade_all_keeps_submissions_apart(batch_campaign: dict[str, Batch], mode: str, peek: str) -> None:
    refusal = mode_refusal(mode)
    if refusal is not None:
        pytest.skip(refusal)
    batch = batch_campaign[mode]
    for name in ("victim", peek):
        assert batch.results[name] is not None, f"{mode}: no results.json for {name}:\n{batch.log}"
        assert batch.results[name]["extra_data"]["status"] == "graded", (
            f"{mode}: {name} was not graded: {batch.results[name]['output'][:2000]}")
    victim = batch.results["victim"]
    assert victim["score"] == victim["extra_data"]["max_score"], f"{mode}: the victim scored {victim['score']}"
    isolation = batch.results[peek]["extra_data"]["isolation"]
    unheld = PEEKS_UNHELD.get(mode, {}).get(peek)
    if unheld is not None:
        assert any(line.startswith("reduced") for line in isolation), (
            f"{peek}: {unheld}; the results must say the isolation is reduced: {isolation}")
        return
    shown = all_text(batch.results[peek])
    assert batch.secret not in shown, (
        f"{mode}: {peek} read the victim's file while both were graded: "
        f"{shown[shown.index(batch.secret) - 200:shown.index(batch.secret) + 40]}")
