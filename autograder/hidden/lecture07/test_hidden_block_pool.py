"""Hidden tests of BlockPool (task block_pool): a scripted walk with every refcount and num_free
after each step, the errors for unknown blocks, the arrays, and a state machine."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis.stateful import run_state_machine_as_test

from conformance_checks import HIDDEN_SETTINGS, pool_machine as pool_machine_conformance
from kvlab.testing.conformance import run_machine
from paged_checks import (
    CFG, MACHINE_SETTINGS, one_block_pool, pool_arrays_problem, pool_machine, pool_walk_problem, unknown_block_problem,
)

WALK_BLOCKS = 4

# (operation, refcount of every named block afterwards, num_free afterwards), walked in order.
# A name is bound to whatever block allocate returns; blocks not named in a row must be free.
POOL_WALK: tuple[tuple[str, dict[str, int], int], ...] = (
    ("allocate a", {"a": 1}, 3),
    ("allocate b", {"a": 1, "b": 1}, 2),
    ("incref a", {"a": 2, "b": 1}, 2),
    ("incref a", {"a": 3, "b": 1}, 2),
    ("decref a", {"a": 2, "b": 1}, 2),
    ("allocate c", {"a": 2, "b": 1, "c": 1}, 1),
    ("allocate d", {"a": 2, "b": 1, "c": 1, "d": 1}, 0),
    ("allocate -> OutOfBlocks", {"a": 2, "b": 1, "c": 1, "d": 1}, 0),
    ("decref b", {"a": 2, "b": 0, "c": 1, "d": 1}, 1),
    ("decref b -> ValueError", {"a": 2, "b": 0, "c": 1, "d": 1}, 1),
    ("incref b -> ValueError", {"a": 2, "b": 0, "c": 1, "d": 1}, 1),
    # b's block is the only free one, so allocate must hand it out again.
    ("allocate e", {"a": 2, "c": 1, "d": 1, "e": 1}, 0),
    ("decref a", {"a": 1, "c": 1, "d": 1, "e": 1}, 0),
    ("decref a", {"a": 0, "c": 1, "d": 1, "e": 1}, 1),
    ("decref c", {"a": 0, "c": 0, "d": 1, "e": 1}, 2),
    ("decref d", {"a": 0, "c": 0, "d": 0, "e": 1}, 3),
    ("decref e", {"a": 0, "c": 0, "d": 0, "e": 0}, 4),
    ("decref a -> ValueError", {"a": 0, "c": 0, "d": 0, "e": 0}, 4),
    ("allocate f", {"f": 1}, 3),
)


# The walk of a one-block pool: the same block is handed out again once it is free.
ONE_BLOCK_WALK: tuple[tuple[str, dict[str, int], int], ...] = (
    ("allocate a", {"a": 1}, 0),
    ("allocate -> OutOfBlocks", {"a": 1}, 0),
    ("decref a", {"a": 0}, 1),
    ("allocate b", {"b": 1}, 0),
)


@pytest.mark.task("block_pool", points=2.4)
def test_pool_walk(student: Any) -> None:
    problem = pool_walk_problem(student, POOL_WALK, WALK_BLOCKS, block_size=2, reveal=False)
    assert problem is None, problem


@pytest.mark.task("block_pool", points=0.8)
@pytest.mark.parametrize("method", ["incref", "decref", "refcount"])
def test_unknown_block_raises_value_error(student: Any, method: str) -> None:
    pool = student.paged_kv.BlockPool(CFG, WALK_BLOCKS, 2)
    pool.allocate()
    for block in (-1, WALK_BLOCKS, WALK_BLOCKS + 7, True, 1.0):
        problem = unknown_block_problem(pool, WALK_BLOCKS, method, block, refused_bool=True)
        assert problem is None, problem


@pytest.mark.task("block_pool", points=0.8)
@pytest.mark.parametrize("dtype", [None, np.float32])
def test_pool_arrays(student: Any, dtype: Any) -> None:
    # Not TINY's 3 layers: arrays laid out [L, n_blocks, ...] have another shape.
    n_blocks, block_size = 4, 5
    args = () if dtype is None else (dtype,)
    pool = student.paged_kv.BlockPool(CFG, n_blocks, block_size, *args)
    call = f"BlockPool(TINY, n_blocks={n_blocks}, block_size={block_size}{'' if dtype is None else ', float32'})"
    problem = pool_arrays_problem(call, pool, n_blocks, block_size, np.float64 if dtype is None else dtype)
    assert problem is None, problem
    assert (pool.n_blocks, pool.block_size) == (n_blocks, block_size), (
        f"{call} has n_blocks={pool.n_blocks!r}, block_size={pool.block_size!r}; expected {n_blocks}, {block_size}"
    )
    assert pool.num_free == n_blocks, f"a new {call} has num_free {pool.num_free!r}; expected {n_blocks}: every block starts free"


@pytest.mark.task("block_pool", points=0.8)
def test_one_block_pool(student: Any) -> None:
    # block_size 1 too: any block_size >= 1 is valid, one token slot per block.
    for block_size in (7, 1):
        pool = one_block_pool(student, block_size)
        assert (pool.n_blocks, pool.block_size, pool.num_free) == (1, block_size, 1), (
            f"BlockPool(TINY, n_blocks=1, block_size={block_size}) has n_blocks={pool.n_blocks!r}, "
            f"block_size={pool.block_size!r}, num_free={pool.num_free!r}; expected 1, {block_size} and 1: a pool of "
            "one block is valid, and every block starts free"
        )
        problem = pool_walk_problem(student, ONE_BLOCK_WALK, 1, block_size=block_size, reveal=False)
        assert problem is None, problem


@pytest.mark.task("block_pool", points=1.6)
def test_pool_state_machine(student: Any) -> None:
    run_state_machine_as_test(pool_machine(student, with_sequences=False), settings=MACHINE_SETTINGS)


# Generated calls over the whole stated domain of block ids (conformance_checks.py), more and longer
# sequences than the public run; the refcounts the rules give are the reference.
@pytest.mark.task("block_pool", points=2)
def test_generated_calls_match_the_rules(student: Any) -> None:
    run_machine(pool_machine_conformance(student, with_sequences=False), HIDDEN_SETTINGS)
