"""Long and short free queues churned by the student's own methods, for the cost guards of module 6's
free queue.

Under the grader the student's code runs in another process, and what runs there is the student's
to replace: a workload run there in one call could be swapped for one that skips the work. So the
verdict rests on what the grader measures and checks, not on that code: the student's own
constructor builds the queues (from blocks made beside it by `block_list`, one call instead of a
round trip per block); `churn_problem` asks the student's own `remove` and `append` for CHUNK pairs
at a time (`kvlab.testing.probe.ask`, one round trip), times them with `student.cpu_seconds` (the CPU time
of every process involved, read by the grader) and reads `block_ids()` at the end, checking the
order the pairs leave (and, for the long queue, timing it against the same read before the pairs). A submission that replaced `ask` or the blocks there gains nothing: pairs
that were not done leave the wrong order, and whatever does them is timed.

The verdict is a growth: the same number of pairs on a long queue and on a short one, chunk by
chunk in turn, and the long queue's pairs may cost at most PAIR_GROWTH_SECONDS more each. What a
pair costs besides the queue (the round trips, their encoding on both sides: about 0.03 ms
sandboxed, most of the reference's time) is the same on both queues and cancels, so an O(1) queue grows by
about nothing (-0.01 to 0.04 s for 500 pairs, sandboxed on a loaded machine), while a queue whose
remove scans from either end (n / 2 blocks on average, 6-30 ns a block, the least for a C-level
`list.remove` of ints) grows by 0.6 ms or more a pair at 200,000 blocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Pairs per round trip, timed per reading of the CPU clocks: a queue whose remove scans stops soon
# after its limit.
CHUNK = 25
# The short queue the long one is compared with: its pairs cost the same round trips, and a scan of
# it is 1% of the long one's.
SHORT_QUEUE = 2_000
# What a pair on the long queue may cost more than one on the short queue, in CPU seconds: under a
# third of the least a scan of half of 200,000 blocks costs, and over twice an O(1) queue's noise.
PAIR_GROWTH_SECONDS = 0.2e-3


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
    student.call("kvlab.testing.probe:ask", [(queue, name, (block,)) for block in blocks for name in ("remove", "append")])


def churn_plan(n_blocks: int, n_ops: int, seed: int) -> tuple[list[int], list[int]]:
    """(the block id each pair moves, the queue's ids head first after all the pairs), for a queue
    built with ids 0 .. n_blocks-1 in order: each pair takes the block at a position drawn uniformly
    over the queue (a scan from either end walks half of it on average) and puts it at the tail."""
    rng = np.random.default_rng(seed)
    order = list(range(n_blocks))
    picks = []
    for position in rng.integers(0, n_blocks, size=n_ops):
        block = order.pop(int(position))
        order.append(block)
        picks.append(block)
    return picks, order


@dataclass
class _Queue:
    """One churned queue: the student's queue, the blocks its pairs move, the order they leave."""

    n_blocks: int
    queue: Any
    moved: list[Any]
    expected: list[int]
    seconds: float = 0.0


def _built(student: Any, n_blocks: int, n_ops: int, seed: int) -> _Queue:
    picks, expected = churn_plan(n_blocks, n_ops, seed)
    blocks = student.call("kvlab.testing.drills:block_list", student.block_manager.KVBlock, n_blocks)
    # Under cpu_seconds: the per-call time limit then bounds an O(n^2) construction in-process too.
    queue, _ = student.cpu_seconds(student.block_manager.FreeBlockQueue, blocks)
    # One round trip for the blocks the pairs move, outside the timed work (fetching them is not the queue's).
    return _Queue(n_blocks, queue, blocks.pick(picks), expected)


@dataclass(frozen=True)
class ChurnCost:
    """What a churn measured, in CPU seconds: the pairs on the long and the short queue, the long
    queue's `block_ids()` after the pairs less the same read before them (work the pairs left for
    later), and `growth` = long - short + that difference, against `limit`."""

    long: float
    short: float
    later: float
    limit: float

    @property
    def growth(self) -> float:
        return self.long - self.short + self.later


def order_problem(what: str, ids: Any, expected: list[int]) -> str | None:
    """None when `ids` (block_ids() after the pairs) is `expected`, else what differs."""
    if not isinstance(ids, list):
        return f"after {what}, block_ids() returned {type(ids).__name__}; expected a list of block ids"
    if len(ids) != len(expected):
        return f"after {what}, block_ids() returned {len(ids):,} ids; the queue holds all {len(expected):,} blocks"
    if ids != expected:
        first = next(i for i, (got, want) in enumerate(zip(ids, expected)) if got != want)
        return (f"after {what}, block_ids() differs from the order the pairs leave from position {first:,} on "
                "(remove unlinks a block from anywhere, append puts it at the tail, the rest keep their order)")
    return None


def churn_problem(student: Any, n_blocks: int, n_ops: int, seed: int, cause: str,
                  pair_growth: float = PAIR_GROWTH_SECONDS, short: int = SHORT_QUEUE) -> tuple[str | None, ChurnCost]:
    """Churn a `FreeBlockQueue` of `n_blocks` blocks and one of `short` blocks (ids 0 .. n-1 in
    order, built by the student's constructor): `n_ops` pairs each, remove of the block at a
    uniformly drawn position then append of it (`churn_plan`), CHUNK pairs of one queue then of the
    other in turn, each chunk timed with `student.cpu_seconds`; then read both queues' `block_ids()`.

    Returns (problem, cost): problem is None when the growth (`ChurnCost`) is at most
    n_ops * pair_growth seconds and both queues hold the order the pairs leave; else what went
    wrong, with `cause` (the likely cause of a slow queue) when the growth was too large. A slow
    queue is stopped soon after its limit.
    """
    what = f"{n_ops:,} remove + append pairs on a queue of {n_blocks:,} blocks"
    limit = n_ops * pair_growth
    cost = ChurnCost(0.0, 0.0, 0.0, limit)

    def too_slow(done: int, cost: ChurnCost) -> str:
        return (f"{what} (the first {done:,} of them{', then block_ids()' if done == n_ops else ''}) took "
                f"{cost.long + cost.later:.3f} s of CPU time, {cost.growth:.3f} s more than as many pairs on a "
                f"queue of {short:,} blocks ({cost.short:.3f} s); the limit is {limit:.2f} s ({n_ops:,} pairs x "
                f"{pair_growth * 1e3:g} ms). remove and append must cost O(1), whatever the queue's length. {cause}")

    try:
        small = _built(student, short, n_ops, seed)
        large = _built(student, n_blocks, n_ops, seed + 1)
        # The walk block_ids() does is O(n) by right: read once before the pairs, it is the
        # baseline of the read after them, whose excess is work the pairs left for later.
        before = student.cpu_seconds(large.queue.block_ids)[1]
        for number, start in enumerate(range(0, n_ops, CHUNK)):
            # Each in turn goes first: a cost of coming after the other falls on both alike.
            for churned in (small, large) if number % 2 == 0 else (large, small):
                churned.seconds += student.cpu_seconds(_pairs, student, churned.queue,
                                                       churned.moved[start:start + CHUNK])[1]
            cost = ChurnCost(large.seconds, small.seconds, 0.0, limit)
            if cost.growth > limit:
                return too_slow(min(start + CHUNK, n_ops), cost), cost
        ids, after = student.cpu_seconds(large.queue.block_ids)
        cost = ChurnCost(large.seconds, small.seconds, after - before, limit)
        small_ids = small.queue.block_ids()
    except Exception as error:  # a student's exception, or the grader's per-call time limit
        if type(error).__name__ == "GraderFault":  # the grader's own failure is not the student's
            raise
        if type(error).__name__ == "WorkerTimeout":  # the per-call limit: building or churning took that long
            return (f"{what}: building the queues with your constructor and churning them ran past the time limit "
                    f"({error}). remove and append must cost O(1), whatever the queue's length. {cause}"), cost
        return f"{what} raised {type(error).__name__}: {error}", cost
    if cost.growth > limit:
        return too_slow(n_ops, cost), cost
    problem = (order_problem(what, ids, large.expected)
               or order_problem(f"{n_ops:,} remove + append pairs on a queue of {short:,} blocks", small_ids,
                                small.expected))
    return problem, cost
