"""Many questions to student objects in a single step, for tests.

The grader runs student code in another process, where every call is a round trip; a test that
reads, say, the refcount of every block after every operation asks for them all at once.

- `each` runs where the test runs (the grader's process): `student.call("kvlab.probe:each",
  pool.refcount, [(0,), (1,), ...])` is one call of the student's method per item, each checked
  as it comes.
- `ask` runs in the student's process (the grader lists it among the sandbox's worker calls): one
  round trip for every question. It only calls the student's own methods and reads the student's
  own attributes, so what it returns is what the student's code answers; a submission that
  replaced it could answer nothing its methods could not. Calls made for their effect (a cost
  guard's remove and append) are checked by their effect afterwards, and timed by the grader
  whatever runs them (kvlab.serving.drills).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any


def each(method: Callable[..., Any], calls: Iterable[Sequence[Any]]) -> list[Any]:
    """[method(*args) for args in calls]."""
    return [method(*args) for args in calls]


def ask(questions: Sequence[tuple[Any, str, Sequence[Any] | None]]) -> list[Any]:
    """The answer to each (obj, name, args): obj.name(*args), or the attribute obj.name when args
    is None, in order; the first exception raised ends the asking."""
    return [getattr(obj, name) if args is None else getattr(obj, name)(*args) for obj, name, args in questions]
