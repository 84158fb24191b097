"""The trusted grader's pytest plugin: `pytest -p autograder.harness.plugin`, started by `run.py`.

It gives the public and hidden tests the same `student` fixture (the surface
`kvlab.testing.surface.StudentSurface` declares) and `task` marker as `kvlab.testing` (the plugin
behind a student's `make test`), with two differences:

- `student.<module>` reaches the student's code through a `Backend` (backends.py): a sandboxed
  worker process (`SandboxBackend`, what Gradescope runs) or, for trusted code only, an in-process
  import (`InProcessBackend`, the repository's fast tests of the reference and the mutants).
- Every test's outcome is recorded for results.json (`Grading`, registered by the runner) with the
  output a student may see: an assertion's message, a student exception's type, message and the
  student's own traceback, or why the worker stopped; never the test's source or a pytest
  traceback of test code.

Anything that is the grader's fault rather than the student's (a hidden test that does not
import, a test of an unknown task, points that do not add up to assignment.json's, a skipped test,
harness code failing on trusted inputs) is recorded as a fault: the runner then writes a "contact
the staff" result instead of a score. The `student` fixture records the faults it raises as it
raises them, so a test that catches every Exception cannot make one the student's failure.
Whatever the student's process sends is the student's: the sandbox turns every reply it cannot
use (invalid data, a value of the wrong kind, an object of a process stopped earlier in the test,
trusted code failing on the student's objects) into a `StudentException` (`WorkerDied`,
`ProtocolError`, `BadReply`, ...), which fails the test that asked with a message about the
student's code; the run goes on (tests/harness/test_fuzz_replies.py).
"""
from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import pytest

from autograder.assignment import Assignment
from autograder.harness.backends import STOPPED, Backend, GraderFault, student_exception_text
from autograder.harness.results import MAX_MESSAGE_CHARS, GradedTest, truncate, with_captured_output
from autograder.harness.sandbox import StudentException
from kvlab.submission import SubmissionError, missing_file_message
from kvlab.testing import task_of
from kvlab.testing.draws import restart_draws, take_draws
from kvlab.testing.surface import StudentSurface


class WholeTestTimeout(BaseException):
    """A whole test ran past its wall-clock limit. A BaseException, so no `except Exception` in
    the test or in in-process student code can swallow it."""


class StudentFiles(StudentSurface):
    """What the `student` fixture gives a test: `student.kv_decode`, `student.call(...)`, each as
    `StudentSurface` states (kvlab/testing/surface.py), through the grading's `Backend`; a fault of
    the grader's is recorded as it is raised."""

    def __init__(self, backend: Backend, modules: tuple[str, ...], submitted: Path,
                 record_fault: Callable[[GraderFault], None]) -> None:
        self._backend = backend
        self._record_fault = record_fault
        self._modules = modules
        self._submitted = submitted
        # A file that is missing or does not import fails every test that uses it with the same
        # message, found once: re-importing a file that loops forever at import would cost a
        # timeout per test.
        self._problems: dict[str, str] = {}
        self._loaded: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._modules:
            self._fault(GraderFault(f"a test asked for student.{name}, but assignment.json lists only "
                                    f"{', '.join(m + '.py' for m in self._modules)}"))
        if name in self._problems:
            raise SubmissionError(self._problems[name])
        if name not in self._loaded:
            try:
                self._loaded[name] = self._load(name)
            except SubmissionError as error:
                self._problems[name] = str(error)
                raise
        return self._loaded[name]

    def _load(self, name: str) -> Any:
        path = self._submitted / f"{name}.py"
        if path.is_symlink() or not path.is_file():
            raise SubmissionError(submitted_file_problem(self._submitted, f"{name}.py"))
        return self._backend.module(name)

    def call(self, qualname: str, *args: Any, **kwargs: Any) -> Any:
        return self._guarded(self._backend.call, qualname, *args, **kwargs)

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        getattr(self, module)  # a missing or broken file fails here with its usual message
        return self._guarded(self._backend.fresh_call, module, function, *args)

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        return self._guarded(self._backend.cpu_seconds, function, *args, **kwargs)

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        return self._guarded(self._backend.cpu_seconds_local, function, *args, **kwargs)

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return self._guarded(self._backend.run_local, function, *args, **kwargs)

    def _guarded(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except GraderFault as fault:
            self._fault(fault)

    def _fault(self, fault: GraderFault) -> NoReturn:
        """Record the grader's fault now, then raise it (see GraderFault.recorded)."""
        self._record_fault(fault)
        raise fault


def submitted_file_problem(submitted: Path, expected: str) -> str:
    """kvlab.testing's missing-file message, plus the usual Gradescope mix-ups it cannot see."""
    path = submitted / expected
    if path.is_symlink():
        return f"{expected} in your submission is a symbolic link; submit the file itself."
    message = missing_file_message(submitted, expected)
    nested = sorted(p.relative_to(submitted).as_posix() for p in submitted.rglob(expected)
                    if p.is_file() and not p.is_symlink())
    if nested:
        message += (f" It is inside a folder ({nested[0]}): upload the file itself, not the folder "
                    "that holds it.")
    return message




@dataclass
class Outcome:
    """What the phases (setup, call, teardown) of one test said so far."""

    problems: list[str] = field(default_factory=list)
    captured: str = ""


OUTCOME = pytest.StashKey[Outcome]()
# The growth guards' names: each times the same work at two sizes (seconds of CPU), the slowest tests
# of their tasks (settings.py's KVLAB_SKIP_SETTLED_GUARDS leaves them out once their task has failed).
GROWTH_GUARD_PREFIX = "test_cost_does_not_grow"


@dataclass
class Grading:
    """One grading session: registered as a pytest plugin by the runner; holds the records."""

    assignment: Assignment
    backend: Backend
    submitted: Path
    modules_dir: Path
    deadline: float
    test_seconds: float
    seed: int  # of the draws (kvlab.testing.draws), computed by the runner from the submitted files
    student: StudentFiles = field(init=False)
    records: list[GradedTest] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    # nodeid -> (task, points, whether it is a hidden test), for every collected test.
    catalog: dict[str, tuple[str, float, bool]] = field(default_factory=dict)
    current_test: str = ""  # the nodeid of the test being run, for the faults it raises
    until_first_catch: bool = False  # run only the tests that `still_decides` (settings.py)
    skip_settled_guards: bool = False  # leave out the growth guards that are `settled` (settings.py)
    left_out: list[str] = field(default_factory=list)  # the nodeids it did not run

    def __post_init__(self) -> None:
        self.student = StudentFiles(self.backend, self.assignment.modules, self.submitted, self.record_fault)

    def fault(self, what: str) -> None:
        """Record a grader fault; the details go to the runner's stderr (the staff's log only)."""
        self.faults.append(what)
        print(f"grader fault: {what}", file=sys.stderr)

    def record_fault(self, fault: GraderFault) -> None:
        """Record a GraderFault raised during the current test, once."""
        if not fault.recorded:
            fault.recorded = True
            self.fault(f"{self.current_test}: {fault}")

    # Hooks -----------------------------------------------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[GRADING] = self
        restart_draws(self.seed)  # before collection: a test module may read grading_seed() as it is imported

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.fault(f"collecting {report.nodeid or 'the tests'} failed:\n{report.longreprtext}")

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        hidden = self.assignment.hidden_tests.resolve()
        totals: dict[str, float] = {task.name: 0.0 for task in self.assignment.tasks}
        for item in items:
            task, points = task_of(item)
            if task not in totals:
                self.fault(f"{item.nodeid}: task {task!r} is not in assignment.json")
                continue
            totals[task] += points
            self.catalog[item.nodeid] = (task, points, Path(item.path).resolve().is_relative_to(hidden))
        for task in self.assignment.tasks:
            if abs(totals[task.name] - task.points) > 1e-9:
                self.fault(f"the tests of task {task.name} are worth {totals[task.name]:g} points; "
                           f"assignment.json says {task.points:g}")
        if self.faults:
            # Grading with a broken suite would score the student against the wrong tests.
            config.hook.pytest_deselected(items=list(items))
            items[:] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.current_test = item.nodeid
        item.stash.setdefault(OUTCOME, Outcome())
        take_draws()  # a draw made outside a test (at import) belongs to none
        restart_draws(self.seed, self.draws_name(item))
        if time.monotonic() > self.deadline:
            pytest.fail("not run: the earlier tests used up the time the grader has for one submission "
                        "(your code may be too slow, or stuck until each call's timeout)")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Run the test under a wall-clock limit for the whole test (each call has its own, shorter one)."""
        limit = self.test_seconds
        armed, _ = signal.getitimer(signal.ITIMER_REAL)
        if self.backend.in_process and 0 < armed <= limit:
            # The test's own timeout mark (pytest-timeout's signal method, armed before this hook)
            # ends it sooner: in-process, no call has a limit of its own, so that mark is the
            # test's limit, and the test turns its failure into the diagnosis ("did not finish
            # within"). Sandboxed, the worker's per-call CPU limit decides and the marks give way
            # to the generous limit below.
            return (yield)

        def expire(signum: int, frame: Any) -> None:
            raise WholeTestTimeout(f"this test took longer than {limit:g} s in all and was stopped (each "
                                   f"call into your code may take at most {self.assignment.call_timeout_seconds:g} s)")

        previous = signal.signal(signal.SIGALRM, expire)
        # An enclosing timer (pytest-timeout around an in-process run) is resumed afterwards.
        outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, limit)
        started = time.monotonic()
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer_delay:
                remaining = max(outer_delay - (time.monotonic() - started), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, remaining, outer_interval)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        report: pytest.TestReport = yield
        outcome = item.stash.setdefault(OUTCOME, Outcome())
        if report.skipped:
            self.fault(f"{item.nodeid} was skipped ({report.longreprtext.strip()}); graded tests never skip")
        elif report.failed and call.excinfo is not None:
            try:
                # Bounded: a message can carry student text (a huge exception message, a listing of
                # thousands of submitted files).
                outcome.problems.append(truncate(self.describe(call.excinfo), MAX_MESSAGE_CHARS))
                # pytest keeps every report for the session: a message showing a student's value of
                # tens of MB per failed test would add up to gigabytes. The bounded message stands in.
                report.longrepr = outcome.problems[-1]
            except GraderFault as error:
                self.record_fault(error)
        if report.when == "teardown":
            if self.backend.in_process:
                outcome.captured = report.capstdout + report.capstderr
            self.finish(item, outcome)
        return report

    def draws_name(self, item: pytest.Item) -> str:
        """The name a test's draws are seeded with: its file relative to the tests root, and its
        name ("autograder/hidden/lecture07/test_hidden_eviction.py::test_x[lfu]"), the same on
        every machine and in every copy of the tests."""
        path = Path(item.path).resolve()
        root = self.assignment.root.resolve()
        where = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        return f"{where}::{test_name(item)}"

    def finish(self, item: pytest.Item, outcome: Outcome) -> None:
        """The record of a test whose teardown just ended."""
        task, points, hidden = self.catalog[item.nodeid]
        self.records.append(GradedTest(
            name=test_name(item), task=task, points=points, passed=not outcome.problems,
            output=with_captured_output("\n\n".join(outcome.problems), outcome.captured), hidden=hidden,
            draws=tuple(take_draws()),
        ))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """With `until_first_catch`, leave out a test that can no longer change what is read; with
        `skip_settled_guards`, a growth guard that is settled."""
        if not (self.until_first_catch and not self.still_decides(item.nodeid)
                or self.skip_settled_guards and self.settled(item)):
            return None
        self.left_out.append(item.nodeid)
        # What its own teardown would have done: end the fixtures and modules the next test does not
        # share (pytest's runner keeps them for the test after the one that ran last).
        item.session._setupstate.teardown_exact(nextitem)
        return True

    def settled(self, item: pytest.Item) -> bool:
        """Whether `item` is a growth guard after a failed test of its task and its visibility: its
        task loses points whatever it gives, and that failure comes before it in results.json."""
        if not getattr(item, "originalname", item.name).startswith(GROWTH_GUARD_PREFIX):
            return False
        task, _, hidden = self.catalog[item.nodeid]
        return any(r.task == task and r.hidden == hidden and not r.passed for r in self.records)

    def still_decides(self, nodeid: str) -> bool:
        """Whether the test can still change whether some public test fails, or the first hidden
        failure in results.json's order (tasks in assignment.json's order, then the run's)."""
        task, _, hidden = self.catalog[nodeid]
        if not hidden:
            return not any(not r.hidden and not r.passed for r in self.records)
        order = {t.name: index for index, t in enumerate(self.assignment.tasks)}
        failed = [order[r.task] for r in self.records if r.hidden and not r.passed]
        return not failed or order[task] < min(failed)

    # The student-facing message of a failure --------------------------------------------------

    def describe(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        """What the student sees for a failed test; GraderFault when the grader is to blame."""
        error = excinfo.value
        if isinstance(error, GraderFault):
            raise error
        if isinstance(error, (SubmissionError, WholeTestTimeout)):
            return str(error)
        if isinstance(error, STOPPED):
            return str(error)
        if isinstance(error, StudentException):
            return raised_heading(error) + student_exception_text(error) + self.memory_note(error)
        if raised_in(excinfo, HARNESS_DIR):
            # The grader's own code refused what a test asked (a value the sandbox cannot carry, a
            # proxy kept past a reset): a bug in the test, not in the submission. What the student's
            # process sent never ends here: the sandbox raises a StudentException for it (above).
            raise GraderFault(f"the grader raised {type(error).__name__}: {error}")
        if self.backend.in_process:
            student_side = self.in_process_student_traceback(excinfo)
            if student_side:
                return raised_heading(error) + student_side
        if isinstance(error, AssertionError):
            # --assert=plain: the message is the test author's text, never the asserted expression.
            return str(error) or "a check failed (the test gave no message)"
        if isinstance(error, pytest.fail.Exception):
            return str(error)
        # Raised by test code, typically on a value of the wrong kind from the student (len() of
        # None, indexing an int); the test's own line would reveal its source.
        return f"the test could not check what your code returned: {type(error).__name__}: {error}"

    def memory_note(self, error: BaseException) -> str:
        """For a MemoryError in the worker: the limit it ran into."""
        sandbox = getattr(self.backend, "sandbox", None)
        if not isinstance(error, MemoryError) or sandbox is None:
            return ""
        return (f"\n(While it is graded your process may use at most {sandbox.limits.memory_bytes >> 20} MB "
                "of memory, numpy and the course library included.)")

    def in_process_student_traceback(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        """In-process only: the traceback from the first frame in the student's files, else ''."""
        root = os.path.join(str(self.modules_dir.resolve()), "")
        tb: TracebackType | None = excinfo.tb
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(root):
            tb = tb.tb_next
        if tb is None:
            return ""
        return "".join(traceback.format_exception(excinfo.type, excinfo.value, tb)).replace(root, "")


GRADING = pytest.StashKey[Grading]()
HARNESS_DIR = Path(__file__).resolve().parent


def raised_heading(error: BaseException) -> str:
    """The line above a student traceback; a stub's NotImplementedError says what it means."""
    if isinstance(error, NotImplementedError):
        return "Not implemented yet: your code raised NotImplementedError.\n"
    return "Your code raised an exception:\n"


def raised_in(excinfo: pytest.ExceptionInfo[BaseException], folder: Path) -> bool:
    """Whether the innermost frame of the traceback is in `folder`."""
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(folder)


def test_name(item: pytest.Item) -> str:
    """The node id without its folders: "test_decode.py::test_matches_reference[gqa-B2]",
    "test_hidden_x.py::TestX::test_y" (a public and a hidden test may share a name)."""
    return f"{Path(item.path).name}::{item.nodeid.split('::', 1)[1]}" if "::" in item.nodeid else item.name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name, points=1): the task a test grades and its points")


@pytest.fixture
def student(request: pytest.FixtureRequest) -> Iterator[StudentFiles]:
    """The submitted modules, as in kvlab.testing: `student.kv_decode.greedy_decode(...)`."""
    grading = request.config.stash.get(GRADING, None)
    if grading is None:
        raise pytest.UsageError("autograder.harness.plugin grades only when started by "
                                "`python -m autograder.harness.run`")
    # Objects made for the previous test must not leak into this one.
    grading.backend.reset()
    yield grading.student
    if not grading.backend.in_process:
        request.node.stash.setdefault(OUTCOME, Outcome()).captured = grading.backend.captured_output()
