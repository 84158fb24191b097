"""Public tests of BlockManager.free, append_tokens and lazy eviction (task eviction). Run: make test TASK=eviction."""
from __future__ import annotations

from typing import Any

import pytest

A = list(range(100, 112))  # 3 full blocks of 4


@pytest.mark.task("eviction", points=1)
def test_reverse_free_and_lazy_eviction(student: Any) -> None:
    manager = student.block_manager.BlockManager(7, 4)
    manager.allocate("a", A)
    manager.free("a")
    queue = list(manager.free_block_ids())
    assert queue == [3, 4, 5, 6, 2, 1, 0], (
        f"a finished request's blocks go to the tail last block first: expected [3, 4, 5, 6, 2, 1, 0]; got {queue}")
    assert manager.block_hash(0) is not None, "a freed block keeps its hash until it is reallocated (lazy eviction)"
    manager.allocate("b", list(range(200, 216)))
    manager.allocate("c", [1, 2, 3])
    assert manager.block_hash(2) is None, "block 2 was reallocated to c: its old hash leaves the cache (eviction)"
    manager.free("b")
    answer = manager.allocate("a2", A + [7])
    assert tuple(answer) == (8, [0, 1, 6, 5]), (
        f"A's tail block was evicted first, its head blocks 0 and 1 are still hits: expected (8, [0, 1, 6, 5]); got {answer}")


@pytest.mark.task("eviction", points=1)
def test_append_tokens(student: Any) -> None:
    manager = student.block_manager.BlockManager(3, 4)
    manager.allocate("a", [1, 2, 3])
    assert list(manager.append_tokens("a", [4])) == [], "the 4th token fits in block 0: no new block"
    assert manager.block_hash(0) is not None, "a block that append_tokens makes full is hashed"
    assert list(manager.append_tokens("a", [5])) == [1], "the 5th token needs a new block: [1]"
    manager.allocate("b", [9, 9, 9, 9])
    assert manager.append_tokens("b", [9, 9, 9, 9]) is None, "no free block left: append_tokens returns None"
    try:
        manager.free("ghost")
    except KeyError:
        return
    pytest.fail("free of an unknown request id should raise KeyError")
