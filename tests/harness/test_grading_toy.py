"""The trusted runner on a small synthetic assignment, end to end.

The toy's student file misbehaves in every way a test can see (a wrong value, an exception,
printing, a hang, a dead worker): the runner's per-test outputs; grader faults, which must never be
blamed on the student; the time budget; a spinning test in-process; and the runner never importing
the student's file. (`make grade` on the real assignments: test_grading.py.)
"""
from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from autograder.harness.results import FAULT_MESSAGE, validate
from support.repo import run_module

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
    test = next((t for t in toy_results["tests"] if t["name"].split("::", 1)[-1] == name), None)
    assert test is not None, f"no result for {name}; got {[t['name'] for t in toy_results['tests']]}"
    assert test["status"] == status, f"{name}: {test['status']} (expected {status}); output {test['output']!r}"
    assert test["score"] == (test["max_score"] if status == "passed" else 0), f"{name}: score {test['score']}"
    for text in present:
        assert text in test["output"], f"{name}: output lacks {text!r}: {test['output']!r}"
    for text in absent:
        assert text not in test["output"], f"{name}: output shows {text!r} (test source?): {test['output']!r}"


def test_toy_results_carry_numbers_tags_and_visibility(toy_results: dict[str, Any]) -> None:
    by_name = {t["name"].split("::", 1)[-1]: t for t in toy_results["tests"]}
    assert set(by_name) == set(TOY_EXPECTED), f"unexpected tests: {sorted(by_name)}"
    listed = [(t["number"], t["status"]) for t in toy_results["tests"] if t["tags"] == ["basics"]]
    assert [number for number, _ in listed] == [f"1.{i}" for i in range(1, len(listed) + 1)], (
        f"tests are numbered <task>.<test> as listed: {listed}")
    assert [status for _, status in listed] == sorted((s for _, s in listed), key=lambda s: s == "passed"), (
        f"a task's failed tests are listed before its passed ones: {listed}")
    assert by_name["test_hidden_passes"]["number"] == "2.1", "tasks are numbered in assignment.json's order"
    assert by_name["test_hidden_passes"]["visibility"] == "after_published", "hidden tests use assignment.json's visibility"
    assert by_name["test_passes"]["visibility"] == "visible", "public tests use assignment.json's visibility"
    assert toy_results["score"] == 5, f"4 public passes and the 2-point hidden one make 5, got {toy_results['score']}"
    assert "Toy assignment: 5 / 11 points" in toy_results["output"], f"summary: {toy_results['output']}"
    isolation = toy_results["extra_data"]["isolation"]
    assert isolation and not any(line in toy_results["output"] for line in isolation), (
        "the sandbox's isolation report is the staff's (extra_data), not in the student's summary")


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
    test = next(t for t in results["tests"] if t["name"] == "test_toy.py::test_marked_spin")
    assert test["status"] == "failed" and says in test["output"], (
        f"the test should end with {says!r}: {test['output']!r}\n{done.stderr[-2000:]}")
    assert time.monotonic() - started < 30, "the spin should end at its limit, not at the runner's 60 s"


def test_runner_never_imports_student_code_in_sandbox_mode(toy_run: tuple[Path, dict[str, Any]]) -> None:
    root, results = toy_run
    passes = next(t for t in results["tests"] if t["name"].endswith("::test_passes"))
    assert passes["status"] == "passed", f"the student's code should have run: {passes}"
    assert not (root / "imported-by-the-grader").exists(), "the trusted runner imported the student's file"


# A run of only the tests that can still decide a bug's first catch (KVLAB_UNTIL_FIRST_CATCH), on
# tests run in this order: public basics, then hidden secret (the second task), then hidden basics
# (the first). After the secret failure the hidden basics tests can still come first in
# results.json's order; after the hidden basics failure no test can.

def toy_tests(points: float, *checks: tuple[str, str, str, int]) -> str:
    """A test file of the toy, one test per (task, test name, call of the toy, the value it must give)."""
    return "import pytest\n" + "".join(
        f'\n@pytest.mark.task("{task}", points={points})\ndef {name}(student):\n'
        f'    assert student.toy.{call} == {value}, "{call} should be {value}"\n'
        for task, name, call, value in checks)


UNTIL_PUBLIC = toy_tests(1, ("basics", "test_public_passes", "add(1, 2)", 3),
                         ("basics", "test_public_fails", "wrong(1, 2)", 3),
                         ("basics", "test_public_after", "add(2, 2)", 4))
UNTIL_HIDDEN = {
    "test_hidden_a.py": toy_tests(1, ("secret", "test_secret_fails", "wrong(2, 2)", 4),
                                  ("secret", "test_secret_after", "add(2, 3)", 5)),
    "test_hidden_b.py": toy_tests(2, ("basics", "test_basics_passes", "add(3, 3)", 6),
                                  ("basics", "test_basics_fails", "wrong(3, 3)", 6),
                                  ("basics", "test_basics_after", "wrong(4, 4)", 8)),
}


def graded_with(folder: Path, monkeypatch: pytest.MonkeyPatch, public: str, hidden: dict[str, str], switch: str,
                on: bool, mode: str) -> tuple[list[str], dict[str, Any]]:
    """The toy with these tests, graded in `mode` with the environment `switch` on or off: the names of
    the tests reported, and the results."""
    submission = toy_assignment(folder, hidden=hidden)
    (folder / "assignments" / "toy" / "tests" / "test_toy.py").write_text(public)
    monkeypatch.setenv(switch, "1" if on else "0")
    done, results = run_toy(folder, submission, "--mode", mode)
    assert done.returncode == 0, f"the runner exited {done.returncode}:\n{done.stderr[-3000:]}"
    return [t["name"].split("::", 1)[1] for t in results["tests"]], results


def first_hidden_failure(results: dict[str, Any]) -> str:
    return next(t["name"] for t in results["tests"] if t["status"] == "failed" and t["visibility"] != "visible")


@pytest.mark.parametrize("mode", ["sandbox", "inprocess"])
def test_until_first_catch_runs_only_the_tests_that_decide_the_first_catch(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          mode: str) -> None:
    def graded(folder: Path, until: bool) -> tuple[list[str], dict[str, Any]]:
        return graded_with(folder, monkeypatch, UNTIL_PUBLIC, UNTIL_HIDDEN, "KVLAB_UNTIL_FIRST_CATCH", until, mode)

    whole, whole_results = graded(tmp_path / "whole", until=False)
    ended, ended_results = graded(tmp_path / "ended", until=True)
    assert len(whole) == 8, f"without the switch every test is reported: {whole}"
    left_out = {"test_public_after", "test_secret_after", "test_basics_after"}
    assert ended == [name for name in whole if name not in left_out], (
        f"only the tests after a public failure, and the hidden ones that cannot come before the first hidden "
        f"failure, are left out: ran {ended}, of {whole}")

    assert first_hidden_failure(ended_results) == first_hidden_failure(whole_results), (
        f"the first hidden failure moved: {first_hidden_failure(ended_results)}, "
        f"{first_hidden_failure(whole_results)} in the whole run")
    assert first_hidden_failure(whole_results).endswith("::test_basics_fails"), "the first task comes first"
    assert ended_results["extra_data"]["switches"] == ["KVLAB_UNTIL_FIRST_CATCH=1"], (
        f"the switch is named in results.json: {ended_results['extra_data']['switches']}")
    assert "switches" not in whole_results["extra_data"], f"no switch was set: {whole_results['extra_data']}"


# Growth guards left out once their task has failed (KVLAB_SKIP_SETTLED_GUARDS), on tests run in this
# order: public basics (a failure, then a guard), hidden secret (a guard first), hidden basics (a guard
# before the first hidden failure of basics, then one after it). Every guard fails.
GUARDS_PUBLIC = toy_tests(1, ("basics", "test_public_fails", "wrong(1, 2)", 3),
                          ("basics", "test_cost_does_not_grow_public", "wrong(1, 3)", 4),
                          ("basics", "test_public_passes", "add(1, 2)", 3))
GUARDS_HIDDEN = {
    "test_hidden_a.py": toy_tests(1, ("secret", "test_cost_does_not_grow_first", "wrong(2, 2)", 4),
                                  ("secret", "test_secret_passes", "add(2, 3)", 5)),
    "test_hidden_b.py": toy_tests(2, ("basics", "test_cost_does_not_grow_hidden", "wrong(3, 3)", 6),
                                  ("basics", "test_basics_fails", "wrong(3, 4)", 7),
                                  ("basics", "test_cost_does_not_grow_after", "wrong(4, 4)", 8)),
}


@pytest.mark.parametrize("mode", ["sandbox", "inprocess"])
def test_settled_guards_are_left_out_and_nothing_read_moves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            mode: str) -> None:
    def graded(folder: Path, skip: bool) -> tuple[list[str], dict[str, Any]]:
        return graded_with(folder, monkeypatch, GUARDS_PUBLIC, GUARDS_HIDDEN, "KVLAB_SKIP_SETTLED_GUARDS", skip, mode)

    whole, whole_results = graded(tmp_path / "whole", skip=False)
    skipped, skipped_results = graded(tmp_path / "skipped", skip=True)
    left_out = {"test_cost_does_not_grow_public", "test_cost_does_not_grow_after"}
    assert sorted(skipped) == sorted(set(whole) - left_out) and len(whole) == 8, (
        f"only the guards after a failure of their task and visibility are left out: ran {skipped}, of {whole}")

    def failed_tasks(results: dict[str, Any]) -> dict[str, set[str]]:
        return {visibility: {t["tags"][0] for t in results["tests"] if t["status"] == "failed"
                             and (t["visibility"] == "visible") == (visibility == "public")}
                for visibility in ("public", "hidden")}

    assert failed_tasks(skipped_results) == failed_tasks(whole_results), (
        f"the same tasks lose points: {failed_tasks(skipped_results)}, {failed_tasks(whole_results)} in the whole run")
    assert first_hidden_failure(skipped_results) == first_hidden_failure(whole_results), (
        f"the first hidden failure moved: {first_hidden_failure(skipped_results)}, "
        f"{first_hidden_failure(whole_results)} in the whole run")
    assert skipped_results["extra_data"]["switches"] == ["KVLAB_SKIP_SETTLED_GUARDS=1"], (
        f"the switch is named in results.json: {skipped_results['extra_data']['switches']}")
