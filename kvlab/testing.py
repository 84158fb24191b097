"""The pytest plugin behind a student's `make test`: `pytest -p kvlab.testing --submission DIR`.

It gives tests the `student` fixture (the submitted modules, imported in this process so a student
sees real tracebacks), the `task(name, points=N)` marker, `--task` to run one task's tests, a
table of the public tests' results by task (labelled as not the grade), and the comparison helpers
whose messages say what differed, where, and why. The grader swaps in a sandboxed `student` fixture
with the same behaviour (`autograder/harness/plugin.py`); tests never reach student code any other way.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kvlab import freshwire

# Float64 logits from a KV-cached decode and from the no-cache reference differ only by the order
# of floating-point additions (the same dot products, blocked differently), about 1e-14 on the
# course's models. Any real bug (a missing prompt, a wrong position, a stale key) moves logits by
# 1e-3 or more. 1e-9 sits between the two with five orders of magnitude to spare on each side.
LOGIT_ATOL = 1e-9
# The same comparison in float32 (24-bit mantissa, ~1e-7 relative): summation-order differences on
# logits of a few units reach ~1e-6, while real bugs still move them by 1e-3 or more.
FLOAT32_LOGIT_ATOL = 1e-4


def _draws() -> random.Random:
    """Where the hidden checks' draws come from: the system's randomness in a real grading; a seeded
    generator when the grader's own environment (never the student's process) sets
    $KVLAB_GRADING_SEED, so that the repository's tests of the tests can grade one submission twice
    (sandboxed, in-process) and compare."""
    seed = os.environ.get("KVLAB_GRADING_SEED", "")
    return random.Random(int(seed)) if seed.isdigit() else secrets.SystemRandom()


_DRAWS = _draws()


def restart_draws() -> None:
    """Draw anew from the start (the grader calls it as a grading run begins): a process that grades
    one submission after another, in both modes, then gives each run the same seeded draws."""
    global _DRAWS
    _DRAWS = _draws()


# The draws of the test running now, for the staff's record (the grader's take_draws()).
_DRAWN: list[int] = []


def drawn(low: int, high: int) -> int:
    """An int in low .. high drawn anew in every grading run, for hidden checks on fixed data (a real
    trace, a real model): resubmitting cannot collect a table of expected values to answer from.
    The grader records each test's draws in results.json (the test's extra_data, which Gradescope
    shows the staff, not the student)."""
    value = _DRAWS.randint(low, high)
    _DRAWN.append(value)
    return value


def take_draws() -> list[int]:
    """The values drawn since the last call, in order (the grader calls it as each test ends)."""
    values = _DRAWN[:]
    _DRAWN.clear()
    return values


class SubmissionError(Exception):
    """A submitted file is missing, misnamed or cannot be imported."""


class Submission:
    """The student's files in `directory`: `submission.kv_decode` is the module kv_decode.py."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory).resolve()
        self._modules: dict[str, Any] = {}
        self._fresh_calls = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._modules:
            self._modules[name] = self._import(name)
        return self._modules[name]

    def _import(self, name: str) -> Any:
        expected = self.directory / f"{name}.py"
        if not expected.is_file():
            raise SubmissionError(missing_file_message(self.directory, f"{name}.py"))
        if str(self.directory) not in sys.path:
            sys.path.insert(0, str(self.directory))
        # A module of this submission already imported by a sibling (prefix_cache.py doing `from
        # paged_kv import ...`) is reused: a second copy would have its own classes, and an
        # `except OutOfBlocks` in one would miss the other's. Anything else under that name (another
        # submission's file, from an earlier run in this process) is dropped and imported afresh.
        loaded = sys.modules.get(name)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == expected.resolve():
            return loaded
        sys.modules.pop(name, None)
        try:
            return importlib.import_module(name)
        except Exception as error:
            raise SubmissionError(f"{name}.py could not be imported: {type(error).__name__}: {error}") from error

    def call(self, qualname: str, *args: Any, **kwargs: Any) -> Any:
        """Run the course-library function "package.module:function" beside the student's code."""
        module, _, function = qualname.partition(":")
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """(function(*args, **kwargs), the CPU seconds the call took).

        For cost guards that must not depend on the machine's load (another job on the machine
        stretches wall-clock time, not CPU time). Here it is this process's `time.process_time()`;
        the grader adds up the CPU time of every process the call runs in (the student's worker,
        read from outside it, and its own), so work hidden anywhere is counted.
        """
        started = time.process_time()
        result = function(*args, **kwargs)
        return result, time.process_time() - started

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """cpu_seconds, with the course library's model run in the student's process too.

        The same here, where everything runs in one process. In the grader, `kvlab.model.forward`
        called by student code normally runs in the grader's process (what it computes and counts
        is the grader's); inside this call it runs in the student's process, as that process's copy,
        and counts nothing the grader trusts. For cost guards that then check the call's results
        against the reference: the work stays in one process, timed whole.
        """
        return self.cpu_seconds(function, *args, **kwargs)

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """function(*args, **kwargs), with the course library's model run in the student's process.

        The same as calling it here, where everything runs in one process. In the grader the
        forward calls of student code then stay in the student's process, as that process's copy
        (counted nowhere, trusted for nothing), instead of crossing to the grader's process once
        per call with the cache's keys and values. For tests that judge only the call's results,
        against reference values computed by the test.
        """
        return function(*args, **kwargs)

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        """`<module>.<function>(*args)` in a new Python process with another hash seed.

        For properties that must hold in every process (e.g. digests that must not depend on
        Python's per-process `hash()` seed, or bytes that another process must be able to read).
        Arguments and result travel as JSON (lists, ints, str, dicts), bytes and numeric arrays
        included (`kvlab.freshwire`); the result is the last line the new process prints.
        """
        # The codec's own source first: the new process needs no import path to kvlab, and writes no
        # bytecode for it.
        program = (
            Path(freshwire.__file__).read_text(encoding="utf-8")
            + "\nimport json, sys, importlib\n"
            "args = from_json(json.loads(sys.stdin.read()))\n"
            f"result = getattr(importlib.import_module({module!r}), {function!r})(*args)\n"
            "print(json.dumps(to_json(result)))\n"
        )
        library = Path(__file__).resolve().parent.parent
        self._fresh_calls += 1  # a different hash seed for every fresh process
        # An empty home and environment, as in the grader: a new folder, only what Python needs.
        with tempfile.TemporaryDirectory(prefix="kvlab-fresh-") as home:
            env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": str(self._fresh_calls),
                   "PYTHONPATH": os.pathsep.join([str(self.directory), str(library)])}
            # -B where this process writes no bytecode (the in-process grader): the library's
            # folder must not change under a grading that fingerprints it.
            bytecode = ["-B"] if sys.dont_write_bytecode else []
            sent = json.dumps(freshwire.to_json(list(args)))
            done = subprocess.run([sys.executable, *bytecode, "-c", program], input=sent, env=env, cwd=home,
                                  capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"{module}.{function} failed in a fresh process:\n{done.stderr[-2000:]}")
        # The last line: what the student's code printed comes before it.
        return freshwire.from_json(json.loads(done.stdout.splitlines()[-1]))


def missing_file_message(directory: Path, expected: str) -> str:
    """Say what was expected, what was found, and the likely mix-up."""
    found = sorted(p.name for p in Path(directory).iterdir()) if Path(directory).is_dir() else []
    message = f"expected the file {expected} in your submission; found: {', '.join(found) or 'nothing'}."
    stem = expected.lower().removesuffix(".py")
    near = [f for f in found if stem in f.lower().replace("-", "_").replace(" ", "_")]
    if near:
        message += f" Did you mean {near[0]!r}? Rename it to {expected} exactly."
    return message


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvlab")
    group.addoption("--submission", default=os.environ.get("KVLAB_SUBMISSION", "."),
                    help="folder holding the submitted .py files (default: $KVLAB_SUBMISSION or .)")
    group.addoption("--task", default=None, help="run only the tests of this task")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name, points=1): the task a test grades and its points")
    config.pluginmanager.register(PublicTally(), "kvlab-public-tally")


def task_of(item: pytest.Item) -> tuple[str, float]:
    """(task name, points) of a collected test; a test without the marker is worth nothing."""
    marker = item.get_closest_marker("task")
    if marker is None:
        return "ungraded", 0.0
    return marker.args[0], float(marker.kwargs.get("points", 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.user_properties.append(("task", task_of(item)))
    task = config.getoption("--task")
    if task is None:
        return
    keep = [item for item in items if task_of(item)[0] == task]
    if not keep:
        known = sorted({task_of(item)[0] for item in items})
        raise pytest.UsageError(f"no tests for task {task!r}; tasks: {', '.join(known)}")
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def _assignment_points(items: Sequence[pytest.Item]) -> dict[str, float]:
    """Task -> points from the assignment.json beside the tests' folder, {} when there is none.

    In the repository it sits at assignments/<id>/assignment.json, beside tests/. Read as plain JSON
    (only the tasks' names and points): kvlab ships to students without the grader's loader.
    """
    folders = {Path(item.path).resolve().parent for item in items}
    for folder in sorted(folders):
        for candidate in (folder.parent / "assignment.json", folder / "assignment.json"):
            if candidate.is_file():
                tasks = json.loads(candidate.read_text(encoding="utf-8")).get("tasks", [])
                return {task["name"]: float(task["points"]) for task in tasks}
    return {}


class PublicTally:
    """The table at the end of a public run: tests passed by task, and what each task is worth.

    Tests, not points: the public tests' result is not the grade (the hidden tests grade), so it
    is not dressed as one; each task's points in the grade come from assignment.json when found.
    """

    def __init__(self) -> None:
        self.points: dict[str, float] = {}
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.points = _assignment_points(items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count each test once: at its call, or at its setup when that did not pass."""
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        task, _ = dict(report.user_properties).get("task", ("ungraded", 0.0))
        if task != "ungraded":
            self.counts[task][0] += int(report.passed)
            self.counts[task][1] += 1

    def lines(self) -> list[str]:
        """One line per task, then all tasks: tests passed of run, and the points in the grade."""
        passed, run = (sum(counts[i] for counts in self.counts.values()) for i in (0, 1))
        total = (f"the hidden tests grade all {sum(self.points.values()):g} points" if self.points
                 else "the hidden tests grade your submission")
        rows = [(task, f"{p}/{r} tests passed", f"task worth {self.points[task]:g} points" if task in self.points else "")
                for task, (p, r) in sorted(self.counts.items())]
        if len(rows) > 1:
            rows.append(("all tasks", f"{passed}/{run} tests passed", total))
        widths = [max(len(row[i]) for row in rows) for i in (0, 1)]
        return [f"{task:<{widths[0]}}  {result:<{widths[1]}}  {worth}".rstrip() for task, result, worth in rows]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.counts:
            return
        # write_sep, not section: after section the reporter still believes a line is open, and
        # its first write_line starts with a blank line.
        terminalreporter.write_sep("=", "public tests (not your grade)")
        for line in self.lines():
            terminalreporter.write_line(line)


# Why a failure message printed twice: with assertion rewriting (pytest's default, so a student's
# `make test`), a failed `assert problem is None, problem` shows the message, then pytest's own
# account of the expression, which is the message again: `assert '<message>' is None`. The grader
# runs with --assert=plain and shows the message only. These two hooks make the public run read the
# same: the account of `<str> is None` becomes a marker, and the marker's line is cut from the failure.
_MESSAGE_ABOVE = "<kvlab: see the message above>"


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    if op == "is" and right is None and isinstance(left, str):
        return [_MESSAGE_ABOVE]
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Cut the marker's line (and pytest's "where" lines under it) from a failed assertion's text."""
    try:
        return (yield)
    except AssertionError as error:
        text = error.args[0] if error.args and isinstance(error.args[0], str) else ""
        cut = text.find(f"\nassert {_MESSAGE_ABOVE}")
        if cut >= 0:
            error.args = (text[:cut], *error.args[1:])
        raise


@pytest.fixture(scope="session")
def _submission(pytestconfig: pytest.Config) -> Submission:
    return Submission(Path(pytestconfig.getoption("--submission")))


@pytest.fixture
def student(_submission: Submission) -> Submission:
    """The submitted modules: `student.kv_decode.greedy_decode(...)`."""
    return _submission


# Comparison helpers: each returns None when the values agree, else a message for the student.

def how_off(got: Any, want: int) -> str | None:
    """How an int `got` unequal to `want` is off ("too high" or "too low"); None if `got` is not an int.
    Hidden checks on fixed scripts say this instead of the expected value, which would be a table to replay."""
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool):
        return "too high" if got > want else "too low"
    return None


def shape_problem(name: str, actual: Any, expected_shape: Sequence[int]) -> str | None:
    """Whether `actual` is an ndarray of `expected_shape` (message otherwise)."""
    if not isinstance(actual, np.ndarray):
        return f"{name} should be a numpy array of shape {tuple(expected_shape)}; got {type(actual).__name__}"
    if actual.shape != tuple(expected_shape):
        return f"{name} has shape {actual.shape}; expected {tuple(expected_shape)}"
    return None


def array_difference(name: str, actual: Any, expected: np.ndarray, atol: float = LOGIT_ATOL) -> str | None:
    """Compare an array to the reference: shape first, then the largest difference and where."""
    problem = shape_problem(name, actual, expected.shape)
    if problem:
        return problem
    if not np.issubdtype(actual.dtype, np.number):
        return f"{name} has dtype {actual.dtype}; expected a numeric array like {expected.dtype}"
    if not np.all(np.isfinite(actual)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(actual))[0])
        return f"{name} holds {actual[where]} at index {where}; expected {expected[where]:.6g}"
    diff = np.abs(actual.astype(np.float64) - expected)
    if diff.max() <= atol:
        return None
    where = tuple(int(i) for i in np.unravel_index(diff.argmax(), diff.shape))
    return (f"{name} differs from the reference by up to {diff.max():.3g} (tolerance {atol:g}) at index "
            f"{where}: got {actual[where]:.10g}, expected {expected[where]:.10g}")
