"""Hidden tests of FreeBlockQueue (task free_queue): vLLM's queue walk (order and count after every
operation), random operations against a plain list, the errors, and a cost that does not grow with
the queue's length."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.testing.drills import churn_problem
from queue_checks import order_problem as shared_order_problem
from queue_checks import queue_of, value_error_problem
from conformance_checks import HIDDEN_SETTINGS
from kvlab.testing.conformance import run_machine
from queue_conformance_checks import queue_machine

# A long queue and a short one churned alike by calls of the student's own remove and append
# (kvlab.testing.drills, 25 pairs per round trip, each queue in turn); the verdict is how much more
# the long queue's pairs cost, at most 0.2 ms a pair (0.2 s for the 1,000). The reference's grow by
# about nothing (the round trips cost the same on both), a remove that scans from either end by 0.6 s
# or more (a C-level list.remove of ints) to 5 s (a plain list); stopped soon after the limit.
GUARD_BLOCKS, GUARD_OPS = 200_000, 1_000
SLOW_CAUSE = ("Likely cause: remove is not O(1): a Python list's remove or index, or a walk along the links to "
              "find the block, scans the queue; unlink the block from its two neighbours (prev_free_block / "
              "next_free_block) instead")


LINKS_CAUSE = ("Likely cause: popleft and remove must clear the block's links (prev_free_block / next_free_block = "
               "None) so that it can be appended again; append and remove raise ValueError only for a block already "
               "in, or not in, the queue")


def do(step: str, call: Any) -> Any:
    """call(), or a failure naming the step when the student's queue raises."""
    try:
        return call()
    except Exception as error:  # a student's exception of any type is a finding
        pytest.fail(f"{step} raised {type(error).__name__}: {error}. {LINKS_CAUSE}", pytrace=False)


def order_problem(step: str, queue: Any, expected: list[int]) -> str | None:
    # The walks are fixed scripts: say where the order goes wrong, not what it should be.
    return shared_order_problem(step, queue, expected, reveal=False)


@pytest.mark.task("free_queue", points=3)
def test_vllm_queue_walk(student: Any) -> None:
    queue, blocks = queue_of(student, 7)
    model = list(range(7))
    steps = [("popleft", None), ("remove", 3), ("remove", 6), ("append", 3), ("popleft", None), ("remove", 2),
             ("append", 0), ("append", 6), ("remove", 0), ("popleft", None), ("append", 1), ("append", 2)]
    for index, (name, block) in enumerate(steps):
        if name == "popleft":
            step = f"step {index}, popleft()"
            got = do(step, queue.popleft).block_id
            want = model.pop(0)
            assert got == want, f"step {index}: popleft() returned block {got}; expected the head of the queue"
        else:
            step = f"step {index}, {name}(block {block})"
            do(step, lambda: getattr(queue, name)(blocks[block]))
            model.remove(block) if name == "remove" else model.append(block)
        problem = order_problem(step, queue, model)
        assert problem is None, problem


@pytest.mark.task("free_queue", points=1)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_operations(student: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 12
    queue, blocks = queue_of(student, n)
    model = list(range(n))
    for index in range(60):
        outside = sorted(set(range(n)) - set(model))
        choice = rng.integers(3)
        if choice == 0 and model:
            step = f"random step {index}, popleft()"
            got = do(step, queue.popleft).block_id
            want = model.pop(0)
            assert got == want, f"random step {index}: popleft() returned block {got}; expected the head of the queue"
        elif choice == 1 and model:
            block = int(rng.choice(model))
            step = f"random step {index}, remove(block {block}) from position {model.index(block)}"
            do(step, lambda: queue.remove(blocks[block]))
            model.remove(block)
        elif outside:
            block = int(rng.choice(outside))
            step = f"random step {index}, append(block {block}), a block removed earlier"
            do(step, lambda: queue.append(blocks[block]))
            model.append(block)
        else:
            continue
        problem = order_problem(step, queue, model)
        assert problem is None, problem


@pytest.mark.task("free_queue", points=1.5)
def test_errors(student: Any) -> None:
    queue, blocks = queue_of(student, 3)
    queue.remove(blocks[1])
    problem = value_error_problem("remove of a block that is not in the queue (block 1, removed already)",
                                  lambda: queue.remove(blocks[1]))
    assert problem is None, problem
    problem = value_error_problem("append of a block already in the queue (block 2)", lambda: queue.append(blocks[2]))
    assert problem is None, problem
    queue.popleft()
    queue.popleft()
    problem = value_error_problem("popleft() on an empty queue", queue.popleft)
    assert problem is None, problem
    problem = order_problem("emptying the queue", queue, [])
    assert problem is None, problem
    empty, error = None, None
    try:
        empty = student.block_manager.FreeBlockQueue([])
        problem = order_problem("FreeBlockQueue([]) (a queue made empty)", empty, [])
    except Exception as caught:  # a student's exception of any type is a finding
        error = caught
    assert error is None and problem is None, problem or (
        f"FreeBlockQueue([]) then block_ids() raised {type(error).__name__}: {error}; a queue made from no blocks is "
        "empty (block_ids() == []). Likely cause: the links of an empty queue are only set when a block is appended")
    do("append(block 0) to a queue made empty", lambda: empty.append(blocks[0]))
    problem = order_problem("append(block 0) to a queue made empty", empty, [0])
    assert problem is None, problem
    problem = value_error_problem(
        "append of a block already in the queue (block 0, the only block of a one-block queue: both its links are "
        "None)", lambda: empty.append(blocks[0]),
        cause=". Likely cause: membership is tested by the block's links alone, which a queue's only block does not have")
    assert problem is None, problem
    twice = [student.block_manager.KVBlock(i) for i in (7, 8)]
    problem = value_error_problem("FreeBlockQueue of blocks 7, 8, 7 (block 7 given twice)",
                                  lambda: student.block_manager.FreeBlockQueue([twice[0], twice[1], twice[0]]),
                                  why=", as append of a block already in the queue does")
    assert problem is None, problem


@pytest.mark.task("free_queue", points=3)
def test_cost_does_not_grow_with_the_queue(student: Any) -> None:
    # CPU time, the grader's measure: another job on the machine does not stretch it.
    problem, _ = churn_problem(student, GUARD_BLOCKS, GUARD_OPS, 3, SLOW_CAUSE)
    assert problem is None, problem


# Random popleft / remove / append calls (queue_conformance_checks.py) against the queue the contract
# gives (a list of ids: no choice is left), block_ids() and num_free_blocks after each.
@pytest.mark.task("free_queue", points=2)
def test_generated_calls_match_the_reference(student: Any) -> None:
    run_machine(queue_machine(student), HIDDEN_SETTINGS)
