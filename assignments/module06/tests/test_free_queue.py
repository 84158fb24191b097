"""Public tests of FreeBlockQueue (task free_queue). Run: make test TASK=free_queue.

The free queue is a doubly linked list in eviction order: popleft takes the head, append adds at the
tail, remove unlinks a block from anywhere in O(1). block_ids() lists the queue head first.
"""
from __future__ import annotations

from typing import Any

import pytest

from kvlab.testing.drills import churn_problem
from queue_checks import ORDER_CAUSE, order_problem, queue_of, value_error_problem
from conformance_checks import PUBLIC_SETTINGS
from kvlab.testing.conformance import run_machine
from queue_conformance_checks import queue_machine


@pytest.mark.task("free_queue", points=1)
def test_queue_walk(student: Any) -> None:
    queue, blocks = queue_of(student, 5)
    assert list(queue.block_ids()) == [0, 1, 2, 3, 4], f"a new queue holds its blocks in the given order; got {queue.block_ids()}"
    assert queue.num_free_blocks == 5, f"num_free_blocks of a new 5-block queue should be 5; got {queue.num_free_blocks}"
    head = queue.popleft()
    assert head.block_id == 0, f"popleft() should return the head, block 0; got block {head.block_id}"
    queue.remove(blocks[2])
    problem = order_problem("popleft() and remove(block 2)", queue, [1, 3, 4], reveal=True)
    assert problem is None, problem
    queue.append(blocks[2])
    queue.append(head)
    queue.remove(blocks[4])
    problem = order_problem("append(block 2), append(block 0), remove(block 4)", queue, [1, 3, 2, 0], reveal=True,
                            cause=ORDER_CAUSE + ", and clears its links so that it can be appended again")
    assert problem is None, problem


@pytest.mark.task("free_queue", points=1)
def test_errors(student: Any) -> None:
    queue, blocks = queue_of(student, 1)
    twice = student.block_manager.KVBlock(5)
    for what, call in (("append of a block already in the queue", lambda: queue.append(blocks[0])),
                       ("popleft() of an empty queue", lambda: (queue.popleft(), queue.popleft())),
                       ("remove of a block not in the queue", lambda: queue.remove(blocks[0])),
                       ("FreeBlockQueue of one block given twice",
                        lambda: student.block_manager.FreeBlockQueue([twice, twice]))):
        problem = value_error_problem(what, call)
        assert problem is None, problem
    empty = student.block_manager.FreeBlockQueue([])
    try:
        ids = list(empty.block_ids())
    except Exception as error:
        pytest.fail(f"FreeBlockQueue([]).block_ids() raised {type(error).__name__}: {error}; expected [] (a queue made "
                    "from no blocks is empty). Likely cause: the links of an empty queue are only set when a block is "
                    "appended", pytrace=False)
    assert ids == [] and empty.num_free_blocks == 0, (
        f"FreeBlockQueue([]) has block_ids() {ids} and num_free_blocks {empty.num_free_blocks!r}; expected [] and 0")


# A queue as long as the grader's and a short one, churned alike by calls of your own remove and
# append (kvlab.testing.drills: 25 pairs per round trip, each queue in turn; the grader counts the
# CPU time of every process involved). What counts is how much more the long queue's pairs cost:
# at most 0.2 ms a pair (0.1 s for the 500). The reference's grow by -0.01 to 0.04 s sandboxed on a
# loaded machine; a remove that scans, even a C-level list.remove of ints, by 0.3 s or more.
QUEUE_BLOCKS, QUEUE_OPS = 200_000, 500
SLOW_CAUSE = ("Likely cause: remove is not O(1) (a Python list's remove or index, or a walk along the links to "
              "find the block, scans the queue); unlink the block from its two neighbours instead")


@pytest.mark.task("free_queue", points=1)
def test_remove_costs_o1(student: Any) -> None:
    # CPU time, as the grader measures it: another job on the machine does not stretch it.
    problem, _ = churn_problem(student, QUEUE_BLOCKS, QUEUE_OPS, 0, SLOW_CAUSE)
    assert problem is None, problem


# Random popleft / remove / append calls (queue_conformance_checks.py), block_ids() and num_free_blocks after each.
@pytest.mark.task("free_queue", points=0.5)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(queue_machine(student), PUBLIC_SETTINGS)
