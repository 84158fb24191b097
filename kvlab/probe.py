"""Many calls of one student method in a single step, for tests.

The grader runs student code in another process, where every call is a round trip; a test that
reads, say, the refcount of every block after every operation asks for them all at once with
`student.call("kvlab.probe:each", pool.refcount, [(0,), (1,), ...])`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any


def each(method: Callable[..., Any], calls: Iterable[Sequence[Any]]) -> list[Any]:
    """[method(*args) for args in calls]."""
    return [method(*args) for args in calls]
