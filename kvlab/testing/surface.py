"""The `student` fixture's surface, declared once: everything a public or hidden test may ask of it.

Two plugins give tests a `student`: `kvlab.testing` (the submitted modules imported in this process:
a student's `make test`, the repository's fast tests) and the grader's `autograder.harness.plugin`
(the modules in a sandboxed worker process, or for trusted code only in the grading process). Both
conform to `StudentSurface`; the grader's backends, behind its fixture, conform to `CourseCalls`
(they hand out a module by name instead of by attribute). The contract of each call is stated here,
once; an implementation says only how it keeps it.

    student.kv_decode.greedy_decode(...)                          # the student's kv_decode.py
    student.call("kvlab.paged:paged_step", pool, seqs, ...)       # a library function on student objects
    student.fresh_call("prefix_cache", "block_hashes", tokens, 16)
    queue, seconds = student.cpu_seconds(student.block_manager.FreeBlockQueue, blocks)
"""
from __future__ import annotations

from typing import Any, Protocol


class CourseCalls(Protocol):
    """The calls a test makes through `student`, besides reading the student's modules."""

    def call(self, qualname: str, *args: Any, **kwargs: Any) -> Any:
        """Run the course-library function "package.module:function" beside the student's code, with
        student objects among its arguments (a student's `PagedSequence`s passed to `paged_step`).

        Its result is the function's. In the grader it runs in the trusted process with the grader's
        own copy of the library, on proxies of the student's objects, so the student cannot replace
        what it computes.
        """

    def fresh_call(self, module: str, function: str, *args: Any) -> Any:
        """`<module>.<function>(*args)` of the student's module, in a newly started process with
        another hash seed.

        For properties that must hold in every process (digests that must not depend on Python's
        per-process `hash()` seed, bytes another process must be able to read). Arguments and result
        are plain data (lists, ints, str, dicts, bytes and numeric arrays included). In the grader
        the new process has a new private folder holding only the submitted files: nothing the
        student's main process wrote, in its folder or its memory, is visible to it.
        """

    def cpu_seconds(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """(function(*args, **kwargs), the CPU seconds the call took in every process it ran in).

        For cost guards that must not depend on the machine's load (another job on the machine
        stretches wall-clock time, not CPU time); the guard checks the results of what it timed.
        The grader measures from outside the student's process, so work hidden anywhere is counted,
        and stops the timed work once it has used the per-call limit of CPU time; the seconds are
        infinite when the student's process was replaced during the call.
        """

    def cpu_seconds_local(self, function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
        """`cpu_seconds`, with the course library's model run in the student's process for the call,
        and that process's CPU time alone counted.

        In the grader, `kvlab.model.forward` called by student code normally runs in the grader's
        process (what it computes and counts is the grader's); inside this call it runs in the
        student's process, as that process's copy, and counts nothing the grader trusts. For cost
        guards that then check the call's results against the reference: the work stays in one
        process, timed whole.
        """

    def run_local(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """function(*args, **kwargs), with the course library's model run in the student's process,
        untimed.

        In the grader the forward calls of student code then stay in the student's process, as that
        process's copy (counted nowhere, trusted for nothing), instead of crossing to the grader's
        process once per call with the cache's keys and values. For tests that judge only the call's
        results, against reference values computed by the test.
        """


class StudentSurface(CourseCalls, Protocol):
    """What the `student` fixture gives a test: the submitted modules by name, and `CourseCalls`."""

    def __getattr__(self, module: str) -> Any:
        """The student's module `module` (`student.kv_decode` is kv_decode.py), imported: attribute
        access gives its functions and classes. `kvlab.submission.SubmissionError` saying why when the
        file is missing, misnamed or does not import.
        """
