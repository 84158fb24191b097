"""What the public and hidden block-manager tests (tasks prefix_hits and eviction) share: the chained
hashes the contract states, and one edge case run on a manager holding a request.

`chained_hashes` is lecture 7's chain exactly as block_hashes's docstring states it (the grader
compares digests): the digests the tests compare a student's with. `edge_problem` builds a manager,
calls one edge case on it and returns None when it raised or returned what the case expects, else
the message the student sees.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

A = [5, 9, 2, 7, 1, 1, 8, 3, 6, 4]


def chained_hashes(tokens: Sequence[int], block_size: int, parent: str | None = None) -> list[str]:
    """One lowercase hex SHA-256 digest per full block of `tokens` (1-D ints): digest i hashes the
    previous digest's hex text (`parent`, or nothing, before block 0), then block i's tokens as
    little-endian int64."""
    # Written as the handout states it, not as the solution does: the bundle ships no solution line.
    digests: list[str] = []
    previous = b"" if parent is None else parent.encode("ascii")
    for start in range(0, len(tokens) - block_size + 1, block_size):
        block = np.asarray(tokens[start:start + block_size], dtype="<i8")
        previous = hashlib.sha256(previous + block.tobytes()).hexdigest().encode("ascii")
        digests.append(previous.decode("ascii"))
    return digests


def edge_problem(student: Any, what: str, call: Any, want: Any, rule: str = "see its docstring",
                 shape: tuple[int, int] = (6, 4), held: Sequence[int] = tuple(A)) -> str | None:
    """None when `call(block_manager module, manager)` raises `want` (an exception type) or returns a value
    equal to `want`; else what it did, with `rule` (the docstring's rule the call breaks). The manager is
    BlockManager(*shape) holding request "a" of the tokens `held`."""
    manager = student.block_manager.BlockManager(*shape)
    manager.allocate("a", list(held))
    expects_error = isinstance(want, type) and issubclass(want, Exception)
    expected = want.__name__ if expects_error else repr(want)
    try:
        result = call(student.block_manager, manager)
    except Exception as error:  # a student's exception of any type is a finding
        if expects_error and isinstance(error, want):
            return None
        if expects_error:
            return f"{what} should raise {expected} ({rule}); it raised {type(error).__name__}: {error}"
        return f"{what} raised {type(error).__name__}: {error}; expected {expected} ({rule})"
    if expects_error:
        return f"{what} should raise {expected} ({rule}); it returned {result!r:.200}"
    return None if result == want else f"{what} returned {result!r}; expected {expected}"
