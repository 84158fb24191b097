"""Where the grader's `student` fixture finds the student's modules: a `Backend`.

`SandboxBackend` (what Gradescope runs) reaches them in a sandboxed worker process
(autograder.harness.sandbox.Sandbox); `InProcessBackend`, for trusted code only (the repository's
fast tests of the reference and the mutants), imports them into the grading process through
kvlab.testing's `Submission`. Both make the calls `kvlab.testing.surface.CourseCalls` declares (its
docstrings are their contract); the plugin's `StudentFiles` puts them behind the `student` fixture.
"""
from __future__ import annotations

import resource
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Protocol

from autograder.harness.results import MAX_MESSAGE_CHARS, truncate
from autograder.harness.sandbox import (
    BadReply,
    BadValue,
    ProtocolError,
    Proxy,
    Sandbox,
    StudentCrash,
    StudentException,
    WorkerDied,
    WorkerTimeout,
)
from kvlab.submission import SubmissionError
from kvlab.testing import Submission
from kvlab.testing.surface import CourseCalls


# The worker stopped (or was stopped), or gave what the operation does not promise: their messages
# say why, in words, with no traceback.
STOPPED = (WorkerTimeout, WorkerDied, StudentCrash, ProtocolError, BadReply)


class GraderFault(Exception):
    """Something the grader or its tests got wrong: never reported as the student's failure."""

    # Set once the fault is in the grading's record. The `student` fixture records the faults it
    # raises as it raises them, so a test that catches every Exception around the student's code
    # (as the diagnoses do) cannot turn one into the student's failure.
    recorded = False


class Backend(CourseCalls, Protocol):
    """Where the student's modules live: a sandboxed worker, or this process (trusted code only).

    The calls of `CourseCalls`, as their contract states; besides them, what a grading needs."""

    isolation: list[str]
    in_process: bool

    def module(self, name: str) -> Any:
        """The student's module `name`, imported; SubmissionError saying why when it cannot be."""

    def reset(self) -> None:
        """Forget the objects the previous test made (not the imported modules)."""

    def captured_output(self) -> str:
        """What student code printed since the last reset."""

    def close(self) -> None:
        """Stop the student's process, if there is one."""


def process_cpu_seconds() -> float:
    """CPU seconds this process has used, every thread, user and system (getrusage).

    Not time.process_time(): while a process CPU timer is armed (InProcessBackend.cpu_seconds arms
    ITIMER_PROF), Linux's process CPU clock reads only what the timer's accounting has caught up
    with, which lagged milliseconds of numpy work (often all of a 2 ms call); getrusage sums each
    thread's own runtime."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def plain_result(value: Any, called: str) -> Any:
    """`value` when it is plain data all through (lists, tuples, dicts, scalars, str, bytes, arrays);
    BadValue, about the student's code, when some part of it is an object of the student's process."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Proxy):
            raise BadValue(f"{called} returned, in a newly started process, an object that stays in that process "
                           f"(a {item._sbx_type}) where plain data was expected (lists, dicts, numbers, str, bytes, "
                           "numpy arrays)")
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return value


class SandboxBackend(Backend):
    """The student's modules in a sandboxed worker (autograder.harness.sandbox.Sandbox)."""

    in_process = False

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    def isolation(self) -> list[str]:
        # Read when the grading ends: a worker that failed to start may have changed the plan.
        return list(self.sandbox.isolation)

    def module(self, name: str) -> Any:
        # Import now rather than at the first attribute read, so a file that does not import is
        # reported as such (with the student's SyntaxError or ImportError and its line) and not
        # as a failure of whatever the test happened to read first.
        module = self.sandbox.module(name)
        try:
            module.__name__
        except STOPPED as error:
            raise SubmissionError(f"{name}.py could not be imported: {error}") from None
        except StudentException as error:
            raise SubmissionError(f"{name}.py could not be imported:\n{student_exception_text(error)}") from None
        return module

    def call(self, qualname: str, *args: Any, **kwargs: Any) -> Any:
        # The sandbox runs what its course config lists as trusted calls here, the rest in the worker.
        return self.sandbox.call(qualname, *args, **kwargs)

    def reset(self) -> None:
        self.sandbox.reset()

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        # A sibling sandbox: a new process in a new private folder holding only the submitted
        # files, so nothing the main worker wrote (in its home or its memory) reaches this call.
        with self.sandbox.fresh() as sandbox:
            # Checked while the sibling lives: a reference into it (a list subclass, say) would name
            # an object of a closed sandbox by the time the test read it.
            return plain_result(getattr(sandbox.module(module), function)(*args), f"{module}.{function}")

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        # Both sides, each measured by this process: the worker's CPU time from /proc (student
        # code cannot fake it, nor hide work in a private copy of the model there), and this
        # process's own (the forward calls the worker sends here, run on the student's cache).
        return self._timed(True, function, args, kwargs)

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        # The worker's own copy of the model: nothing it computes is trusted, and the guard that
        # asks checks the results; the work is timed in one process, with no callback per forward.
        # The worker's CPU time alone: this process then runs nothing for the student's code, only
        # its own encoding and decoding, which cost up to 30 ms of a 25 ms decode after a long one
        # (halving a recomputing decode's ratio), and which a submission could inflate on purpose.
        with self.sandbox.library_local():
            return self._timed(False, function, args, kwargs)

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        # For tests that judge only the results (against values computed here): a decode's
        # forward calls stay in the worker, one round trip for the whole decode instead of a
        # callback per step and a round trip per cache operation, with nothing trusted lost.
        with self.sandbox.library_local():
            return function(*args, **kwargs)

    def _timed(self, count_here: bool, function: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[Any, float]:
        """(function(*args, **kwargs), the worker's CPU seconds during it, plus this process's own
        when `count_here`)."""
        worker_before, here_before = self.sandbox.cpu_seconds(), process_cpu_seconds()
        launches = self.sandbox.launches
        result = function(*args, **kwargs)
        here = process_cpu_seconds() - here_before
        if self.sandbox.launches != launches:
            # The worker was stopped (a call's time limit) or died during the timed work, which
            # the test sees in the results it checks; its CPU time is no longer readable.
            return result, float("inf")
        worker_after = self.sandbox.cpu_seconds()
        if self.sandbox.launches != launches:
            # Reading it started a new worker: the one that did the work was stopped at its last call.
            return result, float("inf")
        if worker_before is None or worker_after is None:
            raise GraderFault("the worker's CPU time could not be read around a timed call")
        return result, (here if count_here else 0.0) + worker_after - worker_before

    def captured_output(self) -> str:
        return self.sandbox.captured_output()

    def close(self) -> None:
        self.sandbox.close()


class InProcessBackend(Backend):
    """The student's modules imported into this process: only ever for trusted code."""

    in_process = True

    def __init__(self, modules_dir: Path, call_timeout: float) -> None:
        self.submission = Submission(modules_dir)
        self.call_timeout = call_timeout
        self.loaded: set[str] = set()
        self.isolation = ["none: the submission ran inside the grading process (--mode inprocess, trusted code only)"]

    def module(self, name: str) -> Any:
        self.loaded.add(name)
        return getattr(self.submission, name)

    def call(self, qualname: str, *args: Any, **kwargs: Any) -> Any:
        return self.submission.call(qualname, *args, **kwargs)

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        return self.submission.fresh_call(module, function, *args)

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        # Sandboxed, a call into the student's code stops after call_timeout seconds of CPU time;
        # here the timed work stops once it has used that much (the cost guards' verdicts are
        # settled by then), as a WorkerTimeout raised where it runs, instead of going on to the
        # test's wall-clock mark. A timer of CPU time (SIGPROF): the load of the machine, which
        # stretches only wall-clock time, changes nothing. Signals reach the main thread only.
        if threading.current_thread() is not threading.main_thread():
            return self.submission.cpu_seconds(function, *args, **kwargs)
        limit = self.call_timeout

        def expired(signum: int, frame: Any) -> None:
            raise WorkerTimeout(f"the timed work did not finish within the time limit of {limit:g} s of CPU time")

        previous = signal.signal(signal.SIGPROF, expired)
        signal.setitimer(signal.ITIMER_PROF, limit)
        started = process_cpu_seconds()
        try:
            result = function(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
        return result, process_cpu_seconds() - started

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        return self.cpu_seconds(function, *args, **kwargs)  # the library runs in this process anyway

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    def reset(self) -> None:
        """Nothing to forget: objects die with the test, and modules stay imported as in kvlab.testing."""

    def captured_output(self) -> str:
        # In this process pytest's own capture holds the output; Grading reads it from the report.
        return ""

    def close(self) -> None:
        """Unload the student's modules, so a later in-process run imports its own files."""
        for name in self.loaded:
            sys.modules.pop(name, None)


def student_exception_text(error: StudentException) -> str:
    """An exception from the student's worker: its type, message and the student's traceback.

    The worker's traceback text lists only the student's and the course library's frames and
    already ends with "Type: message"; without frames it is that line alone.
    """
    name = type(error).__name__
    trace = truncate(error.student_traceback.strip(), MAX_MESSAGE_CHARS)
    return trace if trace else f"{name}: {truncate(error.message, MAX_MESSAGE_CHARS)}"
