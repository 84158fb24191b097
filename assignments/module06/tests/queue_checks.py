"""What the public and hidden FreeBlockQueue tests (task free_queue) share: a queue of new blocks, the
queue's order checked against a plain list, and a call that must raise ValueError.

Every `*_problem` function returns None when the student's queue keeps the contract, else the message
the student sees. The public walks show the expected order (`reveal=True`); the hidden walks are
fixed scripts and say only where the order goes wrong.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def queue_of(student: Any, n: int) -> tuple[Any, list[Any]]:
    """(FreeBlockQueue of KVBlocks 0 .. n-1, those blocks)."""
    blocks = [student.block_manager.KVBlock(i) for i in range(n)]
    return student.block_manager.FreeBlockQueue(blocks), blocks


ORDER_CAUSE = ("popleft takes the head, append adds at the tail, remove unlinks a block wherever it is, relinking "
               "its two neighbours")


def order_problem(step: str, queue: Any, expected: list[int], reveal: bool, cause: str = ORDER_CAUSE) -> str | None:
    """None when block_ids() is `expected` (head first) and num_free_blocks its length, after `step`; else
    what differs, with the expected order only when `reveal`, and the likely `cause`."""
    ids, count = list(queue.block_ids()), queue.num_free_blocks
    if ids != expected:
        if reveal:
            how = f"expected {expected}"
        elif sorted(ids) == sorted(expected):
            first = next(i for i, (a, b) in enumerate(zip(ids, expected)) if a != b)
            how = f"the right blocks, in another order from position {first} on"
        else:
            more = "more" if len(ids) > len(expected) else "fewer" if len(ids) < len(expected) else "other"
            how = f"{more} blocks than the operations so far leave in the queue"
        return f"after {step} block_ids() (head first) is {ids}: {how}. Likely cause: {cause}"
    if count != len(expected):
        return f"after {step} num_free_blocks is {count!r}; the queue holds {len(expected)} blocks"
    return None


def value_error_problem(what: str, call: Callable[[], Any], why: str = "", cause: str = "") -> str | None:
    """None when call() raises ValueError; else what it did, with `why` it must raise and then `cause`."""
    try:
        result = call()
    except ValueError:
        return None
    except Exception as error:  # a student's exception of any type is a finding
        return f"{what} should raise ValueError{why}; it raised {type(error).__name__}: {error}{cause}"
    return f"{what} should raise ValueError{why}; it returned {result!r}{cause}"
