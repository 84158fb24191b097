"""Exceptions the trusted side raises for what happened in the worker.

Student exceptions are rebuilt as synthetic classes: named like the student's class, deriving from
`StudentException` and from the first builtin exception class in the student's MRO, so
`pytest.raises(ValueError)` and `pytest.raises(student.paged_kv.OutOfBlocks)` both work without the
trusted process ever importing the student's class.
"""
from __future__ import annotations

import builtins
import signal
from typing import Any


class StudentException(Exception):
    """Something went wrong in the sandboxed student process; `student_traceback` says where
    (student and course-library frames only; empty when the process itself stopped)."""

    student_traceback: str = ""

    def __init__(self, message: str = "") -> None:
        # BaseException.__init__ directly: the builtin base of a synthetic class may demand other
        # constructor arguments (UnicodeDecodeError does).
        BaseException.__init__(self, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class StudentCrash(StudentException):
    """Student code raised SystemExit, KeyboardInterrupt, GeneratorExit or another non-Exception."""


class WorkerTimeout(StudentException):
    """A call ran past its wall-clock limit (the worker was killed), or iterating over a student
    object did (the worker lives on)."""


class WorkerDied(StudentException):
    """The worker process ended during a call (os._exit, a signal, a resource limit)."""


class ProtocolError(StudentException):
    """The worker sent data that failed validation; it was killed."""


class BadReply(StudentException):
    """What the student's process gave is not what the operation promises, found on the trusted
    side: the test that asked fails with this message (about the student's code, no traceback),
    and grading goes on. Never a grader fault: the student's process chose what it sent."""


class BadValue(BadReply, TypeError):
    """A value of the wrong kind: `numpy.asarray` of a student object giving an int, `len` giving
    a str, a reference where plain data was promised."""


class StaleObject(BadReply, ReferenceError):
    """A student object from a worker that was stopped earlier in the test (a timeout, a crash,
    invalid data): it died with that process."""


class TooBig(BadReply, ValueError):
    """The student's objects asked the trusted process to compute or hold more than it does for
    one test (a forward pass too big, replies too large held together)."""


_BLAMED: dict[type, type] = {}


def on_student_objects(error: Exception, what: str) -> BadReply:
    """`error`, raised by trusted code run on the student's objects (`what`: "kvlab.model:forward"),
    as a BadReply that still derives from its first builtin class (so `pytest.raises(ValueError)`
    around such a call keeps working)."""
    if isinstance(error, BadReply):
        return error
    base = next((c for c in type(error).__mro__ if getattr(builtins, c.__name__, None) is c), Exception)
    cls = _BLAMED.get(base)
    if cls is None:
        cls = BadReply if base is Exception else type(base.__name__, (BadReply, base), {
            "__module__": "builtins", "__doc__": f"{base.__name__} from trusted code run on student objects."})
        _BLAMED[base] = cls
    return cls(f"{what} failed on your objects: {type(error).__name__}: {error}")


# Exception groups need a list of exceptions to be constructed, so they are never used as a base;
# StopIteration would end the trusted side's own loops and generators (a proxy's iteration) silently.
_UNUSABLE_BASES = {"BaseExceptionGroup", "ExceptionGroup", "StopIteration", "StopAsyncIteration"}
_CLASSES: dict[tuple[str, str, type], type] = {}


def builtin_base(mro: list[tuple[str, str]]) -> type[BaseException]:
    """The first builtin exception class in a student exception's MRO ([module, qualname] pairs)."""
    for module, qualname in mro:
        candidate = getattr(builtins, qualname, None) if module == "builtins" else None
        if (
            isinstance(candidate, type)
            and issubclass(candidate, BaseException)
            and qualname not in _UNUSABLE_BASES
        ):
            return candidate
    return BaseException


def student_exception_class(module: str, qualname: str, mro: list[tuple[str, str]]) -> type[StudentException]:
    """The synthetic class standing for the student's exception class `module.qualname`.

    Cached, so the class read as an attribute of a student module is the very class raised later.
    A class outside the Exception hierarchy maps to StudentCrash.
    """
    base = builtin_base(mro)
    if not issubclass(base, Exception):
        return StudentCrash
    key = (module, qualname, base)
    cls = _CLASSES.get(key)
    if cls is None:
        bases: tuple[type, ...] = (StudentException,) if base is Exception else (StudentException, base)
        namespace: dict[str, Any] = {
            "__module__": module,
            "__qualname__": qualname,
            "__doc__": f"Stands for the student's exception class {module}.{qualname}.",
            "student_mro": tuple(f"{m}.{q}" for m, q in mro),
        }
        cls = type(qualname.rsplit(".", 1)[-1], bases, namespace)
        _CLASSES[key] = cls
    return cls


def signal_name(number: int) -> str:
    """SIGKILL for 9, or "signal 99" for an unknown number."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def explain_exit(
    returncode: int,
    *,
    cpu_seconds: float | None,
    max_rss_bytes: int | None,
    cpu_limit: int,
    memory_limit: int,
    signal_offset: bool,
) -> str:
    """Why the worker ended, in words. `signal_offset`: the status came from bubblewrap, which
    reports a child killed by signal N as exit status 128 + N."""
    number: int | None = None
    if returncode < 0:
        number = -returncode
    elif signal_offset and returncode > 128:
        number = returncode - 128
    if number is None:
        return f"exited with status {returncode}"
    cpu_used = cpu_seconds is not None and cpu_seconds >= cpu_limit - 0.05
    if number == signal.SIGXCPU or (number == signal.SIGKILL and cpu_used):
        return f"killed: CPU time limit of {cpu_limit} s"
    # Allocation failures normally surface as MemoryError; a death near the limit is the C level
    # running out (an abort in an allocator, or the kernel's OOM killer).
    if max_rss_bytes is not None and max_rss_bytes >= 0.8 * memory_limit:
        return f"ran out of memory (limit {memory_limit >> 20} MB)"
    if number == signal.SIGKILL:
        return "killed by SIGKILL (the machine may have run out of memory)"
    if number == signal.SIGXFSZ:
        return "killed: file size limit exceeded"
    return f"killed by {signal_name(number)}"
