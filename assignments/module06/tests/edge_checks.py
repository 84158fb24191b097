"""What the public block-manager tests of prefix_hits and eviction share: one edge case, run.

`edge_problem(student, what, call, want)` builds a BlockManager(6, 4) holding request "a" (10 tokens), calls
`call(block_manager module, manager)` and returns None when it raised `want` (an exception type) or returned a
value equal to `want`, else the message the student sees.
"""
from __future__ import annotations

from typing import Any

A = [5, 9, 2, 7, 1, 1, 8, 3, 6, 4]


def edge_problem(student: Any, what: str, call: Any, want: Any) -> str | None:
    manager = student.block_manager.BlockManager(6, 4)
    manager.allocate("a", A)
    expects_error = isinstance(want, type) and issubclass(want, Exception)
    expected = want.__name__ if expects_error else repr(want)
    try:
        result = call(student.block_manager, manager)
    except Exception as error:
        if expects_error and isinstance(error, want):
            return None
        return f"{what} raised {type(error).__name__}: {error}; expected {expected} (see its docstring)"
    if expects_error:
        return f"{what} should raise {expected} (see its docstring); it returned {result!r}"
    return None if result == want else f"{what} returned {result!r}; expected {expected}"
