"""Public tests of BlockPool (task block_pool). Run: make test TASK=block_pool.

A block's refcount is its number of users: allocate gives a free block refcount 1, incref adds a
user, decref removes one, and at refcount 0 the block is free again. The grader checks the same
rules with the same diagnoses (paged_checks.py, in this folder) on longer walks and random calls.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from conformance_checks import PUBLIC_SETTINGS, pool_machine
from kvlab.testing.conformance import run_machine
from paged_checks import (
    CFG, one_block_pool, pool_arrays_problem, pool_walk_problem, raise_problem, unknown_block_problem,
)

# (operation, refcount of every named block afterwards, num_free afterwards); see pool_walk_problem.
POOL_WALK: tuple[tuple[str, dict[str, int], int], ...] = (
    ("allocate a", {"a": 1}, 2),
    ("incref a", {"a": 2}, 2),
    ("allocate b", {"a": 2, "b": 1}, 1),
    ("decref a", {"a": 1, "b": 1}, 1),
    ("allocate c", {"a": 1, "b": 1, "c": 1}, 0),
    ("allocate -> OutOfBlocks", {"a": 1, "b": 1, "c": 1}, 0),
    ("decref c", {"a": 1, "b": 1, "c": 0}, 1),
    ("incref c -> ValueError", {"a": 1, "b": 1, "c": 0}, 1),
    ("decref c -> ValueError", {"a": 1, "b": 1, "c": 0}, 1),
    ("decref a", {"a": 0, "b": 1}, 2),
)


@pytest.mark.task("block_pool", points=0.8)
def test_allocate_incref_decref(student: Any) -> None:
    problem = pool_walk_problem(student, POOL_WALK, 3, block_size=4)
    assert problem is None, problem


@pytest.mark.task("block_pool", points=0.8)
def test_out_of_blocks_and_double_free(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 2, 4)
    blocks = [pool.allocate(), pool.allocate()]
    assert len(set(blocks)) == 2, f"two allocates returned {blocks}; expected two different blocks"
    problem = raise_problem("allocate() with every block in use", pool.allocate, student.paged_kv.OutOfBlocks,
                            "allocate must raise OutOfBlocks (the class in paged_kv.py) when no block is free")
    assert problem is None, problem
    pool.decref(blocks[0])
    problem = raise_problem(f"decref({blocks[0]}) of a free block", functools.partial(pool.decref, blocks[0]),
                            ValueError, "decref of a free block is a double free: it must raise ValueError")
    assert problem is None, problem


@pytest.mark.task("block_pool", points=0.8)
def test_unknown_block_raises_value_error(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 2, 4)
    pool.allocate()
    for method, block in (("incref", 2), ("decref", -2), ("refcount", 2), ("refcount", -2), ("refcount", False),
                          ("incref", 0.0)):
        problem = unknown_block_problem(pool, 2, method, block, refused_bool=False)
        assert problem is None, problem


@pytest.mark.task("block_pool", points=0.8)
def test_one_block_pool_arrays_and_sizes(student: Any) -> None:
    # block_size 1 too: any block_size >= 1 is valid, one token slot per block.
    for block_size in (3, 1):
        call = f"BlockPool(TINY, n_blocks=1, block_size={block_size}, float32)"
        pool = one_block_pool(student, block_size, np.float32)
        problem = pool_arrays_problem(call, pool, 1, block_size, np.float32)
        assert problem is None, problem
        assert (pool.n_blocks, pool.block_size, pool.num_free) == (1, block_size, 1), (
            f"{call} has n_blocks={pool.n_blocks!r}, block_size={pool.block_size!r}, num_free={pool.num_free!r}; "
            f"expected 1, {block_size} and 1: a pool of one block is valid, and every block starts free"
        )


# Random calls with every kind of block id the stub speaks of (conformance_checks.py): after each
# call every refcount and num_free must be what the rules give from the state before it.
@pytest.mark.task("block_pool", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(pool_machine(student, with_sequences=False), PUBLIC_SETTINGS)
