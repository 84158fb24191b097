"""Public tests of BlockManager.free, append_tokens and lazy eviction (task eviction). Run: make test TASK=eviction."""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
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
    assert list(manager.append_tokens("a", [6, 7, 8])) == [], "tokens 6 to 8 fill block 1: no new block"
    chain = hashlib.sha256(np.asarray([1, 2, 3, 4], dtype="<i8").tobytes()).hexdigest().encode()
    want = hashlib.sha256(chain + np.asarray([5, 6, 7, 8], dtype="<i8").tobytes()).hexdigest()
    assert manager.block_hash(1) == want, (
        f"block 1, filled by append_tokens, has hash {manager.block_hash(1)!r:.20}; expected {want[:16]!r}... Likely "
        "cause: the hash must be lecture 7's chained SHA-256 over the request's tokens, block by block (its parent "
        "is the hash of the request's previous full block)")
    manager.allocate("b", [9, 9, 9, 9])
    assert manager.append_tokens("b", [9]) is None, "no free block left: append_tokens returns None"
    manager.free("a")
    answer = manager.append_tokens("b", [9] * 8)
    assert answer is not None and list(answer) == [1, 0], (
        f"after free('a') its 2 blocks are free (cached, ref_cnt 0), exactly the 2 that 8 more tokens need: "
        f"expected [1, 0]; got {answer!r}. Likely cause: enough blocks are free (cached blocks with ref_cnt 0 are "
        "free too: they can be evicted), so the call must succeed")
    try:
        manager.free("ghost")
    except KeyError:
        return
    pytest.fail("free of an unknown request id should raise KeyError")
