"""Hidden tests of BlockManager.free, append_tokens and eviction (task eviction): walks comparing the
free queue's order, every ref_cnt and hash after each step with the reference; eviction order under
memory pressure; decode blocks that fill and become hits; a cost independent of the pool's size."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from _manager_checks import RefManager, walk_problem

BS = 4
# Shared-prefix churn on a large pool: the reference takes well under a second; a free queue whose
# removal scans (a Python list) or an eviction that searches the pool takes minutes.
GUARD_BLOCKS, GUARD_PREFIX, GUARD_REQUESTS, GUARD_SECONDS = 100_000, 50_000, 300, 8.0


def tokens(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, 50_000, size=n)]


def run_walk(student: Any, n_blocks: int, ops: list[tuple], what: str, block_size: int = BS) -> None:
    manager = student.block_manager.BlockManager(n_blocks, block_size)
    problem = walk_problem(student, manager, RefManager(n_blocks, block_size), ops, what)
    assert problem is None, problem


@pytest.mark.task("eviction", points=4)
def test_free_in_reverse_then_evict_the_tail_first(student: Any) -> None:
    a, b = tokens(1, 4 * BS), tokens(2, 4 * BS)
    ops = [("allocate", "a", a), ("free", "a"), ("allocate", "b", b), ("free", "b"),
           ("allocate", "c", tokens(3, 2 * BS)), ("allocate", "a2", a + tokens(4, 1)), ("free", "c"), ("free", "a2")]
    run_walk(student, 8, ops, "two 4-block requests on 8 blocks, then a 2-block one evicting, then the first again")


@pytest.mark.task("eviction", points=4)
def test_lazy_eviction_under_pressure(student: Any) -> None:
    ops: list[tuple] = []
    prompts = [tokens(10 + i, 3 * BS + i) for i in range(6)]
    for index, prompt in enumerate(prompts):
        ops += [("allocate", f"p{index}", prompt), ("free", f"p{index}")]
    for index in (5, 0, 4, 2):
        ops += [("allocate", f"again{index}", prompts[index] + [7]), ("free", f"again{index}")]
    run_walk(student, 10, ops, "six prompts of 3-4 blocks through a 10-block pool, then four of them again")


@pytest.mark.task("eviction", points=4)
def test_decode_blocks_fill_and_become_hits(student: Any) -> None:
    prompt = tokens(20, BS + 2)
    decoded = tokens(21, 2 * BS + 1)
    ops: list[tuple] = [("allocate", "a", prompt)]
    ops += [("append", "a", [token]) for token in decoded]
    ops += [("allocate", "b", prompt + decoded[:2 * BS] + [5]), ("free", "a"), ("append", "b", [3, 4, 5]),
            ("free", "b"), ("allocate", "c", prompt + decoded + [9])]
    run_walk(student, 8, ops, "a request decoding 9 tokens one by one, then two requests extending it")


@pytest.mark.task("eviction", points=2)
def test_append_without_free_blocks_changes_nothing(student: Any) -> None:
    ops = [("allocate", "a", tokens(30, BS)), ("allocate", "b", tokens(31, BS - 1)), ("append", "b", [1]),
           ("append", "a", [2]), ("append", "b", [3]), ("free", "a"), ("append", "b", [3, 4, 5, 6, 7])]
    run_walk(student, 2, ops, "two requests on a 2-block pool, appending past its end")


@pytest.mark.task("eviction", points=1)
def test_unknown_request(student: Any) -> None:
    manager = student.block_manager.BlockManager(4, BS)
    for name, call in (("free", lambda: manager.free("ghost")), ("append_tokens", lambda: manager.append_tokens("ghost", [1]))):
        try:
            result = call()
        except KeyError:
            continue
        except Exception as error:  # a student's exception of any type is a finding
            pytest.fail(f"{name} of an unknown request should raise KeyError; it raised {type(error).__name__}: {error}")
        pytest.fail(f"{name} of an unknown request should raise KeyError; it returned {result!r}")


@pytest.mark.task("eviction", points=3)
def test_cost_does_not_grow_with_the_pool(student: Any) -> None:
    rng = np.random.default_rng(5)
    prefix = list(range(GUARD_PREFIX))
    manager = student.block_manager.BlockManager(GUARD_BLOCKS, 1)
    manager.allocate("long", prefix)
    manager.free("long")
    what = (f"{GUARD_REQUESTS} requests each sharing 20-200 tokens of a {GUARD_PREFIX:,}-token prefix, on "
            f"{GUARD_BLOCKS:,} blocks of 1 token (each hit takes a block out of the middle of the free queue)")
    start = time.perf_counter()
    for index in range(GUARD_REQUESTS):
        shared = int(rng.integers(20, 200))
        answer = manager.allocate(f"r{index}", prefix[:shared] + [GUARD_PREFIX + index])
        assert answer is not None and answer[0] == shared, (
            f"request {index} of {what} should hit its {shared} shared tokens; allocate returned "
            f"{answer if answer is None else answer[0]!r} cached tokens")
        manager.free(f"r{index}")
        elapsed = time.perf_counter() - start
        assert elapsed <= GUARD_SECONDS, (
            f"{what}: after {index + 1} requests {elapsed:.1f} s have passed (limit {GUARD_SECONDS:g} s for all). "
            "Likely cause: touching a hit (removing it from the free queue) or evicting costs O(num_blocks): a list's "
            "remove, or a search for the least recently freed block. Use FreeBlockQueue's O(1) operations")
