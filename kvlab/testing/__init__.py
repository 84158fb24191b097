"""The pytest plugin behind a student's `make test`: `pytest -p kvlab.testing --submission DIR`.

It gives tests the `student` fixture (the submitted modules, imported in this process so a student
sees real tracebacks), the `task(name, points=N)` marker, `--task` to run one task's tests, and a
table of the public tests' results by task (labelled as not the grade). The grader swaps in a
sandboxed `student` fixture with the same behaviour (`autograder/harness/plugin.py`); tests never
reach student code any other way.

The package holds everything the tests need and students' own code never does, one job a module:
`fixtures` (the plugin's parts that need pytest to import, loaded through `pytest_plugins`: this
module imports no pytest, because the sandbox's worker imports `probe`, `drills` and `store_loan`,
and so this package, with numpy as its only package), `surface` (what both `student` fixtures
offer, each call's contract stated once), `compare` (comparison helpers that write the failure
messages; the logit tolerances), `draws` (seeded draws for hidden checks), `conformance`
(generated call sequences checked against the rules they break), `probe` (many questions to
student objects in one round trip), `drills` (the free queues module 6's cost guards churn), `store_loan` (a
MemoryStore lent to the student's process) and `freshwire` (the tagged JSON of `fresh_call`).
"""
from __future__ import annotations

# Loaded by `-p kvlab.testing` before any test imports numpy: one BLAS thread for the model's small
# matrices (kvlab.blas says why), as the grader runs them.
import kvlab.blas  # noqa: F401, I001
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.submission import SubmissionError, missing_file_message
from kvlab.testing import freshwire
from kvlab.testing.surface import StudentSurface

if TYPE_CHECKING:
    import pytest

# The fixtures and hook wrappers, which need pytest at import; pytest loads them with this plugin.
pytest_plugins = ("kvlab.testing.fixtures",)


class Submission(StudentSurface):
    """The student's files in `directory`, imported into this process: `submission.kv_decode` is the
    module kv_decode.py. Each call's contract is `StudentSurface`'s (kvlab/testing/surface.py)."""

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
        module, _, function = qualname.partition(":")
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        # Every process the call runs in is this one.
        started = time.process_time()
        result = function(*args, **kwargs)
        return result, time.process_time() - started

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        return self.cpu_seconds(function, *args, **kwargs)  # the model runs in this process anyway

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)  # the model runs in this process anyway

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        """A new Python process: arguments and result travel as JSON (`kvlab.testing.freshwire`: bytes and
        numeric arrays included); the result is the last line the new process prints."""
        # The codec's own source first: the new process needs no import path to kvlab, and writes no
        # bytecode for it.
        program = (
            Path(freshwire.__file__).read_text(encoding="utf-8")
            + "\nimport json, sys, importlib\n"
            "args = from_json(json.loads(sys.stdin.read()))\n"
            f"result = getattr(importlib.import_module({module!r}), {function!r})(*args)\n"
            "print(json.dumps(to_json(result)))\n"
        )
        library = Path(__file__).resolve().parents[2]  # the folder holding kvlab/
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
        import pytest  # only pytest calls this hook: it is loaded

        raise pytest.UsageError(f"no tests for task {task!r}; tasks: {', '.join(known)}")
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


def _assignment_points(items: Sequence[pytest.Item]) -> dict[str, float]:
    """Task -> points from the assignment.json beside the tests' folder, {} when there is none.

    In the repository it sits at assignments/<id>/assignment.json, beside tests/; in a student bundle,
    at the bundle's root, beside tests/ too (tools.release writes the tasks there). Read as plain JSON
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
