"""Public tests of BlockPool (task block_pool). Run: make test TASK=block_pool.

A block's refcount is its number of users: allocate gives a free block refcount 1, incref adds a
user, decref removes one, and at refcount 0 the block is free again.
"""
from __future__ import annotations

from typing import Any

import pytest

from kvlab.model import TINY


@pytest.mark.task("block_pool", points=1)
def test_allocate_incref_decref(student: Any) -> None:
    pool = student.paged_kv.BlockPool(TINY, 3, 4)
    block = pool.allocate()
    assert pool.refcount(block) == 1, f"a newly allocated block should have refcount 1; got {pool.refcount(block)}"
    assert pool.num_free == 2, f"after one allocate of 3 blocks num_free should be 2; got {pool.num_free}"
    pool.incref(block)
    assert pool.refcount(block) == 2, f"after incref the refcount should be 2; got {pool.refcount(block)}"
    assert pool.num_free == 2, f"incref must not change num_free (still 2); got {pool.num_free}"
    pool.decref(block)
    pool.decref(block)
    assert pool.refcount(block) == 0, f"after two decrefs the block should be free (refcount 0); got {pool.refcount(block)}"
    assert pool.num_free == 3, f"a block at refcount 0 is free again: num_free should be 3; got {pool.num_free}"


@pytest.mark.task("block_pool", points=1)
def test_out_of_blocks_and_double_free(student: Any) -> None:
    pool = student.paged_kv.BlockPool(TINY, 2, 4)
    blocks = [pool.allocate(), pool.allocate()]
    assert len(set(blocks)) == 2, f"two allocates returned {blocks}; expected two different blocks"
    try:
        extra = pool.allocate()
    except student.paged_kv.OutOfBlocks:
        pass
    else:
        pytest.fail(f"allocate() with every block in use should raise OutOfBlocks; it returned {extra!r}")
    pool.decref(blocks[0])
    try:
        pool.decref(blocks[0])
    except ValueError:
        pass
    else:
        pytest.fail(f"decref of the free block {blocks[0]} (a double free) should raise ValueError; it returned without an error")
