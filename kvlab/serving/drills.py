"""A long free queue churned by the student's own methods, for the cost guards of module 6's free queue.

Under the grader the student's code runs in another process, and what runs there is the student's
to replace: a workload run there in one call could be swapped for one that skips the work. So the
verdict rests on what the grader measures and checks, not on that code: the student's own
constructor builds the queue (from blocks made beside it by `block_list`, one call instead of a
round trip per block); `churn_problem` asks the student's own `remove` and `append` for CHUNK pairs
at a time (`kvlab.probe.ask`, one round trip), times them with `student.cpu_seconds` (the CPU time
of every process involved, read by the grader) and reads `block_ids()` at the end, checking the
order the pairs leave. A submission that replaced `ask` or the blocks there gains nothing: pairs
that were not done leave the wrong order, and whatever does them is timed.
"""
from __future__ import annotations

from typing import Any

import numpy as np

# Pairs per round trip, timed per reading of the CPU clocks: a queue whose remove scans stops soon
# after its limit.
CHUNK = 25


class BlockList(list):
    """A list that stays in the process it was made in: the grader sends an exact list by value,
    a subclass (like any object that is not plain data) by reference."""

    def pick(self, indices: list[int]) -> list[Any]:
        """[self[i] for i in indices]: the items a test needs, in one round trip."""
        return [self[i] for i in indices]


def block_list(block_class: Any, n_blocks: int) -> BlockList:
    """[block_class(i) for i in range(n_blocks)], made beside the student's code (the grader lists it
    among the sandbox's worker calls). A submission that replaced it there gains nothing: the
    queue is built from it by the student's own constructor and its order checked afterwards."""
    return BlockList(block_class(i) for i in range(n_blocks))


def _pairs(student: Any, queue: Any, blocks: list[Any]) -> None:
    """remove, then append, each block in turn, asked in one round trip: what the cost guards time."""
    student.call("kvlab.probe:ask", [(queue, name, (block,)) for block in blocks for name in ("remove", "append")])


def churn_problem(student: Any, n_blocks: int, n_ops: int, seed: int, limit: float, cause: str) -> str | None:
    """Build `FreeBlockQueue` of `n_blocks` blocks (ids 0 .. n_blocks-1 in order), then `n_ops` times
    remove a block from a random position and append it again, then read `block_ids()`: None when
    the pairs and that read took at most `limit` CPU seconds and left each moved block at the tail;
    else what went wrong, with `cause` (the likely cause of a slow queue) when it was too slow. A slow
    queue is stopped soon after its limit."""
    what = f"{n_ops:,} remove + append pairs on a queue of {n_blocks:,} blocks"
    rng = np.random.default_rng(seed)
    picks = [int(i) for i in rng.integers(0, n_blocks, size=n_ops)]
    seconds = 0.0
    try:
        blocks = student.call("kvlab.serving.drills:block_list", student.block_manager.KVBlock, n_blocks)
        queue = student.block_manager.FreeBlockQueue(blocks)
        # One round trip for the blocks the pairs move, outside the timed work (fetching them is not the queue's).
        moved = blocks.pick(picks)
        for start in range(0, n_ops, CHUNK):
            seconds += student.cpu_seconds(_pairs, student, queue, moved[start:start + CHUNK])[1]
            if seconds > limit:
                return (f"{what}: the first {min(start + CHUNK, n_ops):,} took {seconds:.1f} s of CPU time, past "
                        f"the limit of {limit:g} s for all of them. {cause}")
        ids, spent = student.cpu_seconds(queue.block_ids)
    except Exception as error:  # a student's exception, or the grader's per-call time limit
        return f"{what} raised {type(error).__name__}: {error}"
    if seconds + spent > limit:
        return f"{what} and block_ids() took {seconds + spent:.1f} s of CPU time (limit {limit:g} s). {cause}"
    order = dict.fromkeys(range(n_blocks))
    for i in picks:
        del order[i]
        order[i] = None
    expected = list(order)
    if not isinstance(ids, list):
        return f"after {what}, block_ids() returned {type(ids).__name__}; expected a list of block ids"
    if len(ids) != n_blocks:
        return f"after {what}, block_ids() returned {len(ids):,} ids; the queue holds all {n_blocks:,} blocks"
    if ids != expected:
        first = next(i for i, (got, want) in enumerate(zip(ids, expected)) if got != want)
        return (f"after {what}, block_ids() differs from the order the pairs leave from position {first:,} on "
                "(remove unlinks a block from anywhere, append puts it at the tail, the rest keep their order)")
    return None
