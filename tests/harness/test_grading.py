"""The trusted grading runner and local grading, end to end.

`make grade` (python -m autograder.grade: the Gradescope package run in an /autograder-like
folder) on the reference, the starter and broken submissions; the runner's per-test outputs on a
small synthetic assignment whose student file misbehaves in every way a test can see (a wrong
value, an exception, printing, a hang, a dead worker); grader faults, which must never be blamed on
the student; in-process mode; and the batch grader.
"""
from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from autograder.grade_reference import full_marks_problem
from autograder.harness.backends import InProcessBackend
from autograder.harness.plugin import submitted_file_problem
from autograder.harness.results import FAULT_MESSAGE, validate

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "solutions" / "lecture02"
STARTER = REPO / "starter" / "lecture02"
RUN_TIMEOUT = 300


def run_module(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """python -m <args> from the repository, as make does."""
    return subprocess.run([sys.executable, "-m", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)


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


def test_starter_gets_zero_and_each_test_says_not_implemented(tmp_path: Path) -> None:
    done, results = make_grade(STARTER, tmp_path / "results.json")
    assert done.returncode == 0, f"make grade exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert results["score"] == 0 and results["tests"], f"the starter must score 0 on every test: {results['score']}"
    for test in results["tests"]:
        assert "not implemented" in test["output"].lower(), f"{test['name']}: output {test['output']!r}"


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


# A small assignment whose student file misbehaves in each way a test can observe ------------------

TOY_STUDENT = '''
import os
import sys

def add(a, b):
    return a + b

def wrong(a, b):
    return a - b

def shout():
    print("hello from the student")
    print("and to stderr", file=sys.stderr)
    return 1

def boom():
    raise ValueError("student says no")

def stub():
    raise NotImplementedError("stub (task basics)")

def spin():
    while True:
        pass

def die():
    os._exit(3)
'''

TOY_PUBLIC = '''
import pytest

@pytest.mark.task("basics", points=1)
def test_passes(student):
    assert student.toy.add(1, 2) == 3, "add(1, 2) should be 3"

@pytest.mark.task("basics", points=1)
def test_wrong_value(student):
    got = student.toy.wrong(1, 2)
    assert got == 3, f"wrong(1, 2) should be 3; got {got}"

@pytest.mark.task("basics", points=1)
def test_student_raises(student):
    student.toy.boom()

@pytest.mark.task("basics", points=1)
def test_stub(student):
    student.toy.stub()

@pytest.mark.task("basics", points=1)
def test_prints_and_passes(student):
    assert student.toy.shout() == 1, "shout() returns 1"

@pytest.mark.task("basics", points=1)
def test_hangs(student):
    student.toy.spin()

@pytest.mark.task("basics", points=1)
def test_worker_dies(student):
    student.toy.die()

@pytest.mark.task("basics", points=1)
def test_passes_after_the_worker_died(student):
    assert student.toy.add(2, 2) == 4, "add(2, 2) should be 4"

@pytest.mark.task("basics", points=1)
def test_wrong_kind_of_value(student):
    assert len(student.toy.add(1, 2)) == 1, "add returns one item"
'''

TOY_HIDDEN = '''
import pytest

@pytest.mark.task("secret", points=2)
def test_hidden_passes(student):
    assert student.toy.add(40, 2) == 42, "add(40, 2) should be 42"
'''

# test name: (status, texts its output must contain, texts it must not contain)
TOY_EXPECTED = {
    "test_passes": ("passed", [], []),
    "test_wrong_value": ("failed", ["wrong(1, 2) should be 3; got -1"], ["got == 3", "assert"]),
    "test_student_raises": ("failed", ["ValueError: student says no", "toy.py", "line 17, in boom"],
                            ["test_toy.py", "student.toy.boom()"]),
    "test_stub": ("failed", ["Not implemented yet", "NotImplementedError: stub (task basics)"], []),
    "test_prints_and_passes": ("passed", ["printed by your code", "hello from the student", "and to stderr"], []),
    "test_hangs": ("failed", ["did not finish within the time limit of 1 s"], []),
    "test_worker_dies": ("failed", ["exited with status 3"], []),
    "test_passes_after_the_worker_died": ("passed", [], []),
    "test_wrong_kind_of_value": ("failed", ["the test could not check what your code returned",
                                            "TypeError: object of type 'int' has no len()"], ["len(student"]),
    "test_hidden_passes": ("passed", [], []),
}


def toy_assignment(root: Path, hidden: dict[str, str] | None = None) -> Path:
    """assignments/toy and autograder/hidden/toy (`hidden`: file name -> text) under root; returns
    the student's folder. The student's file leaves root/imported-by-the-grader if it is ever
    imported in a process where the trusted runner is loaded."""
    spec = {
        "id": "toy", "title": "Toy assignment", "files": ["toy.py"],
        "tasks": [{"name": "basics", "title": "the basics task", "points": 9},
                  {"name": "secret", "title": "the secret task", "points": 2}],
        "visibility": {"public": "visible", "hidden": "after_published"}, "call_timeout_seconds": 1,
    }
    (root / "assignments" / "toy" / "tests").mkdir(parents=True)
    (root / "assignments" / "toy" / "assignment.json").write_text(json.dumps(spec))
    (root / "assignments" / "toy" / "tests" / "test_toy.py").write_text(TOY_PUBLIC)
    (root / "autograder" / "hidden" / "toy").mkdir(parents=True)
    for name, text in (hidden or {"test_hidden_toy.py": TOY_HIDDEN}).items():
        (root / "autograder" / "hidden" / "toy" / name).write_text(text)
    submission = root / "submission"
    submission.mkdir()
    marker = root / "imported-by-the-grader"
    (submission / "toy.py").write_text(TOY_STUDENT + textwrap.dedent(f'''
        if "autograder.harness.run" in sys.modules:
            open({str(marker)!r}, "w").close()
    '''))
    return submission


def run_toy(root: Path, submission: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The trusted runner on the toy assignment; the process and its validated results."""
    out = root / "results" / "results.json"
    done = run_module("autograder.harness.run", "--assignment", "toy", "--submission", submission,
                      "--results", out, "--tests-root", root, *extra)
    results = json.loads(out.read_text())
    validate(results)
    return done, results


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(the toy's root folder, its results) after one sandboxed run."""
    root = tmp_path_factory.mktemp("toy")
    done, results = run_toy(root, toy_assignment(root))
    assert done.returncode == 0, f"the runner exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return root, results


@pytest.fixture
def toy_results(toy_run: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return toy_run[1]


@pytest.mark.parametrize(("name", "status", "present", "absent"),
                         [(name, *expected) for name, expected in TOY_EXPECTED.items()], ids=TOY_EXPECTED.keys())
def test_each_outcome_reaches_the_student_as_intended(toy_results: dict[str, Any], name: str, status: str,
                                                      present: list[str], absent: list[str]) -> None:
    test = next((t for t in toy_results["tests"] if t["name"] == name), None)
    assert test is not None, f"no result for {name}; got {[t['name'] for t in toy_results['tests']]}"
    assert test["status"] == status, f"{name}: {test['status']} (expected {status}); output {test['output']!r}"
    assert test["score"] == (test["max_score"] if status == "passed" else 0), f"{name}: score {test['score']}"
    for text in present:
        assert text in test["output"], f"{name}: output lacks {text!r}: {test['output']!r}"
    for text in absent:
        assert text not in test["output"], f"{name}: output shows {text!r} (test source?): {test['output']!r}"


def test_toy_results_carry_numbers_tags_and_visibility(toy_results: dict[str, Any]) -> None:
    by_name = {t["name"]: t for t in toy_results["tests"]}
    assert set(by_name) == set(TOY_EXPECTED), f"unexpected tests: {sorted(by_name)}"
    assert by_name["test_passes"]["number"] == "1.1" and by_name["test_hidden_passes"]["number"] == "2.1", (
        "tests are numbered <task>.<test> in assignment.json's task order"
    )
    assert by_name["test_hidden_passes"]["visibility"] == "after_published", "hidden tests use assignment.json's visibility"
    assert by_name["test_passes"]["visibility"] == "visible", "public tests use assignment.json's visibility"
    assert toy_results["score"] == 5, f"4 public passes and the 2-point hidden one make 5, got {toy_results['score']}"
    assert "Toy assignment: 5 / 11 points" in toy_results["output"], f"summary: {toy_results['output']}"
    assert "isolated" in toy_results["output"], "the summary must include the sandbox's isolation report"


# Each run combines several grader faults; every one must be detected (named in the staff's log)
# and the student must get only the contact-staff result.
GRADER_FAULTS = {
    "found while collecting": (
        {"test_hidden_broken.py": "import pytest\n\ndef test_broken(:\n    pass\n",
         "test_hidden_toy.py": TOY_HIDDEN.replace('"secret"', '"sekret"')},
        ["collecting test_hidden_broken.py failed", "task 'sekret' is not in assignment.json",
         "the tests of task secret are worth 0 points; assignment.json says 2"],
    ),
    "found while running": (
        {"test_hidden_toy.py": TOY_HIDDEN.replace("points=2", "points=0.5") + textwrap.dedent('''
            @pytest.mark.task("secret", points=0.5)
            def test_skips(student):
                pytest.skip("needs data the package lacks")

            @pytest.mark.task("secret", points=0.5)
            def test_passes_what_cannot_cross(student):
                student.toy.add(40, lambda: 2)

            @pytest.mark.task("secret", points=0.5)
            def test_asks_for_an_unlisted_module(student):
                # Catching every Exception, as the diagnoses do: the grader's fault still counts.
                try:
                    student.other.add(1, 2)
                except Exception as error:
                    assert False, f"your add failed: {error}"
        ''')},
        ["test_skips was skipped", "the grader raised TypeError: cannot pass the trusted-side callable",
         "a test asked for student.other, but assignment.json lists only toy.py"],
    ),
}


@pytest.mark.parametrize(("hidden", "faults"), GRADER_FAULTS.values(), ids=GRADER_FAULTS.keys())
def test_grader_faults_give_the_contact_staff_result(tmp_path: Path, hidden: dict[str, str],
                                                     faults: list[str]) -> None:
    submission = toy_assignment(tmp_path, hidden=hidden)
    done, results = run_toy(tmp_path, submission)
    assert done.returncode == 1, f"a grader fault exits 1, got {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert results["output"] == FAULT_MESSAGE and results["score"] == 0 and results["tests"] == [], (
        f"a grader fault must give only the contact-staff result: {results}"
    )
    for fault in faults:
        assert fault in done.stderr, (
            f"the staff's log must name the fault {fault!r}:\n{done.stderr}"
        )


def test_time_budget_fails_remaining_tests_without_running_them(tmp_path: Path) -> None:
    done, results = run_toy(tmp_path, toy_assignment(tmp_path), "--time-budget", "0")
    assert done.returncode == 0, f"running out of time is still a graded result, exit {done.returncode}"
    for test in results["tests"]:
        assert test["status"] == "failed" and "not run" in test["output"], f"{test['name']}: {test['output']!r}"


MARKED_SPIN = '''
import pytest

@pytest.mark.task("basics", points=9)
@pytest.mark.timeout(1, method="signal")
def test_marked_spin(student):
    student.toy.spin()
'''

# A cost guard's timed work: in-process it stops at the call limit in CPU time (the toy's 1 s), as a
# call into the worker would sandboxed, long before the test's generous wall-clock mark.
TIMED_SPIN = '''
import pytest

@pytest.mark.task("basics", points=9)
@pytest.mark.timeout(60, method="signal")
def test_marked_spin(student):
    student.cpu_seconds(student.toy.spin)
'''


@pytest.mark.parametrize(("source", "says"), [
    # In-process, no call has a limit of its own: a test's timeout mark is its limit (the cost
    # guards of lecture 7 turn it into their diagnosis), not the runner's whole-test limit (60 s).
    (MARKED_SPIN, "Timeout (>1.0s)"),
    (TIMED_SPIN, "the timed work did not finish within the time limit of 1 s of CPU time"),
], ids=["timeout-mark", "timed-work"])
def test_in_process_a_spinning_test_ends_at_its_own_limit(tmp_path: Path, source: str, says: str) -> None:
    submission = toy_assignment(tmp_path)
    (tmp_path / "assignments" / "toy" / "tests" / "test_toy.py").write_text(source)
    started = time.monotonic()
    done, results = run_toy(tmp_path, submission, "--mode", "inprocess")
    test = next(t for t in results["tests"] if t["name"] == "test_marked_spin")
    assert test["status"] == "failed" and says in test["output"], (
        f"the test should end with {says!r}: {test['output']!r}\n{done.stderr[-2000:]}")
    assert time.monotonic() - started < 30, "the spin should end at its limit, not at the runner's 60 s"


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
    assert "inprocess" in results["output"], "the summary must say the submission was not isolated"


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


def test_runner_never_imports_student_code_in_sandbox_mode(toy_run: tuple[Path, dict[str, Any]]) -> None:
    root, results = toy_run
    assert results["tests"][0]["status"] == "passed", f"the student's code should have run: {results['tests'][0]}"
    assert not (root / "imported-by-the-grader").exists(), "the trusted runner imported the student's file"
