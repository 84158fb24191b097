"""Many questions to student objects in a single step, for tests.

The grader runs student code in another process, where every call is a round trip; a test that
reads, say, the refcount of every block after every operation asks for them all at once.

- `each` runs where the test runs (the grader's process): `student.call("kvlab.testing.probe:each",
  pool.refcount, [(0,), (1,), ...])` is one call of the student's method per item, each checked
  as it comes.
- `ask` runs in the student's process (the grader lists it among the sandbox's worker calls): one
  round trip for every question. It only calls the student's own methods and reads the student's
  own attributes, so what it returns is what the student's code answers; a submission that
  replaced it could answer nothing its methods could not. Calls made for their effect (a cost
  guard's remove and append) are checked by their effect afterwards, and timed by the grader
  whatever runs them (kvlab.testing.drills).
- `play` runs where the test runs: a sequence of calls on one new student object (a cache's
  updates and advances) asked in one step with `ask`, and read back in order (`Replies`). When a
  step raises, the steps are made again on another new object, one at a time as the test reads
  them, so the test sees exactly what calling them directly gives.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

# (name, args): obj.name(*args), or the attribute obj.name when args is None.
Step = tuple[str, Sequence[Any] | None]
# The arrays `ask` holds at most for all its answers (honest ones are kilobytes). Past it, `ask`
# raises and `play` makes the calls one at a time, each answer crossing on its own: a student's
# process never holds many large answers at once beside what the grader holds of them.
ASK_ARRAY_BYTES = 16 << 20


class TooMuchAtOnce(Exception):
    """`ask`'s answers hold more than ASK_ARRAY_BYTES of arrays."""


def each(method: Callable[..., Any], calls: Iterable[Sequence[Any]]) -> list[Any]:
    """[method(*args) for args in calls]."""
    return [method(*args) for args in calls]


def snapshot(value: Any, depth: int = 2) -> Any:
    """`value` as it is now: its numpy arrays copied, inside lists and tuples too (`depth` levels).

    A cache may answer with views of buffers that its later calls overwrite; an answer read only
    after those calls must still show what the call returned, as an answer checked at once does.
    """
    if isinstance(value, np.ndarray):
        return value.copy(order="K")
    if depth and type(value) in (list, tuple):
        return type(value)(snapshot(item, depth - 1) for item in value)
    return value


def array_bytes(value: Any, depth: int = 2) -> int:
    """The bytes of the numpy arrays in `value`, inside lists and tuples too (`depth` levels)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if depth and type(value) in (list, tuple):
        return sum(array_bytes(item, depth - 1) for item in value)
    return 0


def given(obj: Any, name: str, args: Sequence[Any] | None) -> Any:
    """obj.name(*args), or the attribute obj.name when args is None."""
    return getattr(obj, name) if args is None else getattr(obj, name)(*args)


def ask(questions: Sequence[tuple[Any, str, Sequence[Any] | None]]) -> list[Any]:
    """What each (obj, name, args) gives (`given`), in order, as it was given (`snapshot`); the first
    exception raised ends the asking, and so does TooMuchAtOnce once the answers hold more than
    ASK_ARRAY_BYTES."""
    answers, held = [], 0
    for obj, name, args in questions:
        value = given(obj, name, args)
        held += array_bytes(value)  # counted before the copy: an answer past the bound is not copied
        if held > ASK_ARRAY_BYTES:
            raise TooMuchAtOnce(f"the answers hold more than {ASK_ARRAY_BYTES >> 20} MB of arrays")
        answers.append(snapshot(value))
    return answers


class Replies:
    """What a student object answers to the steps of `play`, read in their order (`next`, `take`);
    `target` is that object, for a call whose exception is the expected outcome (made directly, as
    `ask` would end at it and `play` would make every step again).

    `answers`: what `ask` answered to all the steps; None when each step is made on `target` as it
    is read, as direct calls in the test would be (an exception raised where they would raise it,
    and no step made after the one at which the test stops).
    """

    def __init__(self, target: Any, steps: Sequence[Step], answers: list[Any] | None) -> None:
        self.target = target
        self._steps = steps
        self._answers = answers
        self._read = 0

    def next(self) -> Any:
        """The next step's answer."""
        self._read += 1
        if self._answers is not None:
            return self._answers[self._read - 1]
        name, args = self._steps[self._read - 1]
        return given(self.target, name, args)

    def take(self, n: int) -> list[Any]:
        """The next n steps' answers (`next`)."""
        return [self.next() for _ in range(n)]


def play(student: Any, make: Callable[[], Any], steps: Sequence[Step]) -> Replies:
    """The answers of a new object `make()` to `steps`, in one call of the student's process.

    That call shares one call's time limit, and a call that runs out of it is not made again (it
    would only use the limit again): the test fails with the timeout. If it fails otherwise (a
    step raised, the answers held too much, or they are not one per step), the steps are made on a
    second `make()` one at a time as the test reads them, each its own call.

    The time limit is recognised by its exception's class name, WorkerTimeout, not by the class:
    that class is the grader's (autograder.harness.sandbox), which kvlab cannot import because
    students get kvlab without the grader; a name is all a student's run and the grader share.
    """
    target = make()
    try:
        answers = student.call("kvlab.testing.probe:ask", [(target, name, args) for name, args in steps])
    except Exception as error:  # a student's exception, raised again when its step is read
        if type(error).__name__ == "WorkerTimeout":  # the grader's per-call time limit (see above)
            raise
        answers = None
    if type(answers) is list and len(answers) == len(steps):
        return Replies(target, steps, answers)
    return Replies(make(), steps, None)
