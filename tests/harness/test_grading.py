"""The trusted grading runner and local grading, end to end.

`make grade` (python -m autograder.grade: the Gradescope package run in an /autograder-like
folder) on the reference, the starter and broken submissions; in-process mode; and the batch grader.
The runner on a small synthetic assignment whose student file misbehaves in every way a test can
see, and the grader faults found there: test_grading_toy.py.
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import kvlab.blas as kvlab_blas
from autograder.grade_reference import full_marks_problem
from autograder.harness.backends import InProcessBackend
from autograder.harness.plugin import submitted_file_problem
from autograder.harness.results import validate
from autograder.harness.run import hypothesis_home
from support.repo import REPO, run_module

REFERENCE = REPO / "solutions" / "lecture02"
STARTER = REPO / "starter" / "lecture02"


def make_grade(submission: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`make grade A=lecture02 SUB=submission OUT=out`: the process and the results it wrote."""
    done = run_module("autograder.grade", "--assignment", "lecture02", "--submission", submission, "--out", out)
    assert out.is_file(), f"make grade wrote no results (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    results = json.loads(out.read_text())
    validate(results)
    return done, results


def test_reference_gets_full_marks(tmp_path: Path) -> None:
    done, results = make_grade(REFERENCE, tmp_path / "results.json")
    assert done.returncode == 0, f"make grade exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    failed = {t["name"]: t["output"] for t in results["tests"] if t["status"] != "passed"}
    assert not failed, f"the reference failed tests: {failed}"
    assert results["score"] == results["extra_data"]["max_score"] == 100, f"reference scored {results['score']}"
    assert "total" in done.stdout and "100" in done.stdout, f"make grade must print the score table:\n{done.stdout}"
    seed = results["extra_data"].get("seed")
    assert seed is not None and f"seed {seed}:" in done.stdout, (
        f"make grade must print the draws' seed results.json keeps ({seed}):\n{done.stdout}")


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` CPU-bound loops running beside the block, stopped after it."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_reference_gets_full_marks_beside_busy_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-call limit counts the worker's CPU time: two busy processes on the machine (which has
    two cores here, and Gradescope's are shared too) must not cost the reference a point, even at
    the hostile suite's 2 s per call."""
    monkeypatch.setenv("KVLAB_CALL_TIMEOUT", "2")
    with busy_processes(2):
        done, results = make_grade(REFERENCE, tmp_path / "results.json")
    failed = {t["name"]: t["output"][:300] for t in results["tests"] if t["status"] != "passed"}
    assert not failed, f"under load the reference failed tests: {failed}\n{done.stderr[-2000:]}"
    assert results["score"] == 100, f"under load the reference scored {results['score']}"
    switches = results["extra_data"].get("switches", [])
    assert "KVLAB_CALL_TIMEOUT=2" in switches, f"results.json must name the lowered call timeout: {switches}"


def test_starter_gets_zero_and_each_test_says_not_implemented(tmp_path: Path) -> None:
    done, results = make_grade(STARTER, tmp_path / "results.json")
    assert done.returncode == 0, f"make grade exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert results["score"] == 0 and results["tests"], f"the starter must score 0 on every test: {results['score']}"
    for test in results["tests"]:
        assert "not implemented" in test["output"].lower(), f"{test['name']}: output {test['output']!r}"
    assert "tests failed this way" in results["output"] and results["output"] in done.stdout, (
        f"make grade must print what the student reads, results.json's output:\n{done.stdout}")


BROKEN = {
    # name: (files in the submission, what every test's output must say)
    "missing": ({"notes.txt": "I ran out of time\n"}, ["expected the file kv_decode.py", "notes.txt"]),
    "misnamed": ({"kv-decode.py": "x = 1\n"}, ["expected the file kv_decode.py", "kv-decode.py",
                                                "Rename it to kv_decode.py"]),
    "syntax error": ({"kv_decode.py": "import numpy as np\n\ndef greedy_decode(:\n    pass\n"},
                     ["kv_decode.py could not be imported", "SyntaxError", "line 3"]),
}


@pytest.mark.parametrize(("files", "expected"), BROKEN.values(), ids=BROKEN.keys())
def test_broken_submission_gets_zero_and_says_why(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    for name, text in files.items():
        (submission / name).write_text(text)
    done, results = make_grade(submission, tmp_path / "results.json")
    assert done.returncode == 0, f"a broken submission is still graded (exit 0), got {done.returncode}:\n{done.stderr}"
    assert results["score"] == 0 and results["extra_data"]["status"] == "graded", (
        f"a broken submission scores 0 and is not a grader fault: {results['score']}, {results['extra_data']}"
    )
    for test in results["tests"]:
        missing = [text for text in expected if text not in test["output"]]
        assert not missing, f"{test['name']}: output lacks {missing}: {test['output']!r}"


@pytest.mark.parametrize(("args", "message"), [
    (["--assignment", "lecture99", "--submission", str(REFERENCE)], "unknown assignment 'lecture99'"),
    (["--assignment", "lecture02", "--submission", "/nonexistent/folder"], "does not exist"),
], ids=["unknown assignment", "missing submission"])
def test_usage_errors_exit_non_zero_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    done = run_module("autograder.grade", *args, "--out", tmp_path / "results.json")
    assert done.returncode == 2, f"a usage error exits 2, got {done.returncode}"
    assert message in done.stderr, f"stderr should say {message!r}:\n{done.stderr}"
    assert not (tmp_path / "results.json").exists(), "a usage error writes no results"


SUBMITTED_FILE_PROBLEMS = {
    # name: (paths in the submission (a str value: file text; None: a symlink to kv_decode_real.py), message parts)
    "in a folder": ({"lecture02/kv_decode.py": "x = 1\n"},
                    ["expected the file kv_decode.py", "found: lecture02", "inside a folder (lecture02/kv_decode.py)"]),
    "a symlink": ({"kv_decode_real.py": "x = 1\n", "kv_decode.py": None}, ["kv_decode.py", "symbolic link"]),
    "nothing": ({}, ["expected the file kv_decode.py", "found: nothing"]),
}


@pytest.mark.parametrize(("paths", "parts"), SUBMITTED_FILE_PROBLEMS.values(), ids=SUBMITTED_FILE_PROBLEMS.keys())
def test_submitted_file_problem_names_the_usual_mix_ups(tmp_path: Path, paths: dict[str, str | None],
                                                        parts: list[str]) -> None:
    for name, text in paths.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.symlink_to(tmp_path / "kv_decode_real.py")
        else:
            path.write_text(text)
    message = submitted_file_problem(tmp_path, "kv_decode.py")
    missing = [part for part in parts if part not in message]
    assert not missing, f"the message lacks {missing}: {message!r}"


def small_matmuls(steps: int) -> np.ndarray:
    """A few milliseconds of numpy work in many short calls, as a cached decode step makes them."""
    a, b = np.ones((8, 64)), np.full((64, 64), 0.01)
    for _ in range(steps):
        a = np.tanh(a @ b)
    return a


def test_in_process_timed_work_is_measured_whole(tmp_path: Path) -> None:
    """The CPU timer that stops timed work in-process (ITIMER_PROF) must not change what is
    measured: while it was armed, Linux's process CPU clock (time.process_time) lagged behind
    numpy work by milliseconds (here it often read nothing at all for 2 ms of it), and an honest
    decode's long run then looked 13-14 times its short ones (in-process gradings of the reference
    lost the position-budget points about once in 15). The same work timed by this thread's clock,
    with no timer armed, is the yardstick."""
    backend = InProcessBackend(tmp_path, call_timeout=10.0)
    ratios = []
    for _ in range(10):
        _, measured = backend.cpu_seconds(small_matmuls, 400)
        started = time.thread_time()
        small_matmuls(400)
        ratios.append(measured / (time.thread_time() - started))
    assert statistics.median(ratios) > 0.8, (
        f"timed work must be measured whole: measured / actual CPU time was {sorted(ratios)}")


def test_in_process_mode_gives_the_reference_full_marks(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = run_module("autograder.harness.run", "--assignment", "lecture02", "--submission", REFERENCE,
                      "--results", out, "--mode", "inprocess")
    results = json.loads(out.read_text())
    assert done.returncode == 0 and full_marks_problem(results) is None, (
        f"in-process reference: {full_marks_problem(results)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert any("inprocess" in line for line in results["extra_data"]["isolation"]), (
        f"the staff's isolation report must say the submission was not isolated: {results['extra_data']}")


@pytest.mark.parametrize("entry", ["autograder.harness.run", "kvlab.testing"])
def test_the_grader_and_the_students_tests_take_one_blas_thread(entry: str) -> None:
    """Both load kvlab.blas before numpy: on 2 busy cores OpenBLAS's thread per core made lecture 7's
    trusted forward about ten times slower, in CPU and wall time alike."""
    env = {name: value for name, value in os.environ.items() if name not in kvlab_blas.VARIABLES}
    done = subprocess.run([sys.executable, "-c", f"import {entry}, numpy, kvlab.blas; print(kvlab.blas.describe())"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "BLAS threads 1", f"importing {entry}: {done.stdout!r} {done.stderr[-2000:]}"


def test_hypothesis_writes_in_the_grading_folder_and_never_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis picks its folder once per process; a process grading many submissions (a batch)
    must not write a later grading's cached constants into an earlier grading's removed folder."""
    from hypothesis import configuration

    monkeypatch.chdir(tmp_path)
    for grading in ("first", "second"):
        with hypothesis_home(tmp_path / grading / ".hypothesis"):
            where = configuration.storage_directory("constants", intent_to_write=False).path
            assert where == tmp_path / grading / ".hypothesis" / "constants", f"grading {grading}: {where}"
        after = configuration.storage_directory("constants", intent_to_write=False).path
        assert after == tmp_path / ".hypothesis" / "constants", f"after grading {grading}: {after}"


def test_grade_all_grades_every_folder_and_survives_a_broken_one(tmp_path: Path) -> None:
    submissions = tmp_path / "submissions"
    (submissions / "alice").mkdir(parents=True)
    (submissions / "alice" / "kv_decode.py").write_text((REFERENCE / "kv_decode.py").read_text())
    (submissions / "bob").mkdir()
    (submissions / "bob" / "kv_decode.py").write_text("def broken(:\n")
    (submissions / "README.txt").write_text("not a submission\n")
    out = tmp_path / "out"
    done = run_module("autograder.grade_all", "--assignment", "lecture02", "--submissions", submissions,
                      "--out", out, "--jobs", "2")
    assert done.returncode == 0, f"grade_all exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    with (out / "scores.csv").open(newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"alice", "bob"}, f"one row per submission folder, got {sorted(rows)}"
    assert (rows["alice"]["score"], rows["alice"]["task:kv_cache"], rows["alice"]["status"]) == ("100", "40", "graded"), (
        f"alice (the reference) should have full marks: {rows['alice']}"
    )
    assert (rows["bob"]["score"], rows["bob"]["status"]) == ("0", "graded"), f"bob's syntax error scores 0: {rows['bob']}"
    for name in rows:
        validate(json.loads((out / name / "results.json").read_text()))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda r: None, None),
    (lambda r: r["tests"][0].update(status="failed", score=0), "1 test(s) failed: t"),
    (lambda r: r.update(score=1), "scored 1 of 2"),
    (lambda r: r["extra_data"].update(status="grader_fault"), "the grader failed"),
], ids=["full marks", "a failed test", "short of the maximum", "grader fault"])
def test_grade_reference_accepts_only_full_marks(change: Any, problem: str | None) -> None:
    results = {"score": 2, "tests": [{"name": "t", "status": "passed", "score": 2}],
               "extra_data": {"status": "graded", "max_score": 2}}
    change(results)
    assert full_marks_problem(results) == problem, f"full_marks_problem({results}) should be {problem!r}"
