"""kvlab.testing as a student's `make test` runs it: what a failure and the closing table look like.

A comparison helper's message appears once (not again as pytest's `assert '<message>' is None`),
and the table at the end says it is the public tests' result, not the grade, with each task's
points from the assignment.json beside the tests when there is one, and no blank line inside.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS = '''
import pytest

def problem_of(value):
    return None if value == 1 else f"value is {value}; expected 1\\nthe likely cause: MARKER-{value}"

@pytest.mark.task("alpha", points=2)
def test_named_problem():
    problem = problem_of(2)
    assert problem is None, problem

@pytest.mark.task("alpha", points=1)
def test_passes():
    assert problem_of(1) is None, problem_of(1)

@pytest.mark.task("beta", points=1)
def test_inline_problem():
    assert problem_of(3) is None, f"{problem_of(3)} (step 3)"
'''


def run_public_tests(folder: Path, with_assignment: bool) -> str:
    """Run the tests above with kvlab.testing (assertion rewriting on, as in `make test`); the output."""
    (folder / "tests").mkdir()
    (folder / "tests" / "test_sample.py").write_text(TESTS, encoding="utf-8")
    if with_assignment:
        tasks = [{"name": "alpha", "title": "a", "points": 30}, {"name": "beta", "title": "b", "points": 70}]
        (folder / "assignment.json").write_text(json.dumps({"tasks": tasks}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "kvlab.testing", "-p", "no:cacheprovider",
                          "--rootdir", str(folder), "--submission", str(folder), str(folder / "tests")],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, f"two of three tests should fail (exit 1), got {run.returncode}:\n{run.stdout}{run.stderr}"
    return run.stdout


@pytest.mark.parametrize("marker", ["MARKER-2", "MARKER-3"])
def test_failure_message_appears_once(tmp_path: Path, marker: str) -> None:
    output = run_public_tests(tmp_path, with_assignment=False)
    # The failure's own report, not pytest's one-line summary at the end (which, with $CI set as in
    # CI, repeats the whole message instead of cutting it to the terminal's width).
    report = output.split("short test summary info")[0]
    assert report.count(marker) == 1, f"the message holding {marker} should appear once in its failure:\n{output}"
    accounts = [line for line in output.split("\n") if line.startswith("E ") and line[1:].strip().startswith("assert ")]
    assert not accounts, f"pytest's account of `problem is None` repeats the message: {accounts}"


@pytest.mark.parametrize("with_assignment, expected", [
    (True, ["alpha      1/2 tests passed  task worth 30 points",
            "beta       0/1 tests passed  task worth 70 points",
            "all tasks  1/3 tests passed  the hidden tests grade all 100 points"]),
    (False, ["alpha      1/2 tests passed",
             "beta       0/1 tests passed",
             "all tasks  1/3 tests passed  the hidden tests grade your submission"]),
], ids=["assignment-json-beside-tests", "no-assignment-json"])
def test_closing_table_is_not_a_grade(tmp_path: Path, with_assignment: bool, expected: list[str]) -> None:
    lines = run_public_tests(tmp_path, with_assignment).split("\n")
    title = next((i for i, line in enumerate(lines) if "public tests (not your grade)" in line), None)
    assert title is not None, "the table should be titled as the public tests' result, not the grade:\n" + "\n".join(lines)
    assert lines[title + 1:title + 1 + len(expected)] == expected, \
        "the table should follow its title at once, one line per task:\n" + "\n".join(lines[title:])


@pytest.mark.parametrize("dont_write", [True, False])
def test_fresh_call_writes_bytecode_only_where_the_caller_does(tmp_path: Path, dont_write: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process grader writes no bytecode (its Watch fingerprints the library's folders), and
    the fresh process of `student.fresh_call` must not write any either; a student's run may."""
    from kvlab.testing import Submission

    library = tmp_path / "library"
    library.mkdir()
    (library / "helper.py").write_text("def seven():\n    return 7\n", encoding="utf-8")
    (tmp_path / "answer.py").write_text("from helper import seven\n\ndef value():\n    return seven()\n",
                                        encoding="utf-8")
    monkeypatch.setattr(sys, "dont_write_bytecode", dont_write)
    # The library folder on the fresh process's path, as the course library is.
    monkeypatch.setattr(sys.modules["kvlab.testing"], "__file__", str(library / "kvlab" / "testing" / "__init__.py"))
    assert Submission(tmp_path).fresh_call("answer", "value") == 7, "the fresh call should return 7"
    written = sorted(p.name for p in tmp_path.rglob("*.pyc"))
    assert bool(written) != dont_write, (
        f"with sys.dont_write_bytecode={dont_write} the fresh process wrote {written or 'no bytecode'}")


def test_fresh_call_carries_bytes_and_arrays(tmp_path: Path) -> None:
    """Module 6 reads, here, a chunk that serialize_chunk wrote in a fresh process: bytes and arrays
    must cross both ways exactly, past whatever the student's code prints."""
    from kvlab.testing import Submission

    (tmp_path / "echo.py").write_text(
        "def both(data, array):\n    print('student output first')\n    return [data[::-1], array * 2]\n",
        encoding="utf-8")
    data, array = b"\x00\xffKVLC", np.arange(6, dtype=np.float32).reshape(2, 3)
    got = Submission(tmp_path).fresh_call("echo", "both", data, array)
    assert got[0] == data[::-1], f"bytes came back as {got[0]!r}; expected {data[::-1]!r}"
    assert isinstance(got[1], np.ndarray) and got[1].dtype == np.float32 and np.array_equal(got[1], array * 2), (
        f"the array came back as {got[1]!r}; expected float32 {array * 2!r}")


def test_the_demo_runner_imports_no_test_support() -> None:
    """kvlab.demo is course code: what it shares with the tests (a missing file's message) lives in
    kvlab.submission, not in the test support package."""
    code = "import sys, kvlab.demo; print(sorted(m for m in sys.modules if m.startswith('kvlab.testing')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (
        f"kvlab.demo should import nothing of kvlab.testing; it imported {done.stdout.strip()} {done.stderr[-500:]}")
