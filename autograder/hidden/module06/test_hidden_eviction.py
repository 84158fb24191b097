"""Hidden tests of BlockManager.free, append_tokens and eviction (task eviction): walks comparing the
free queue's order, every ref_cnt and hash after each step with the reference; eviction order under
memory pressure; decode blocks that fill and become hits; a cost independent of the pool's size."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from _manager_checks import EDGE_MANAGER, RefManager, walk_problem
from conformance_checks import HIDDEN_SETTINGS, manager_machine
from kvlab.testing.conformance import run_machine
from manager_checks import edge_problem

BS = 4
# Shared-prefix churn on a large pool: the reference takes well under a second; a free queue whose
# removal scans (a Python list) or an eviction that searches the pool takes minutes.
GUARD_BLOCKS, GUARD_PREFIX, GUARD_REQUESTS, GUARD_SECONDS = 100_000, 50_000, 300, 8.0
# The verdict is CPU time (the grader's measure, which another job on the machine does not stretch);
# this many times GUARD_SECONDS of wall clock only stops a churn that sleeps or waits.
WALL_FACTOR = 3


def tokens(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, 50_000, size=n)]


def run_walk(student: Any, n_blocks: int, ops: list[tuple], what: str, block_size: int = BS) -> None:
    manager = student.block_manager.BlockManager(n_blocks, block_size)
    problem = walk_problem(student, manager, RefManager(n_blocks, block_size), ops, what)
    assert problem is None, problem


@pytest.mark.task("eviction", points=2.55)
def test_free_in_reverse_then_evict_the_tail_first(student: Any) -> None:
    a, b = tokens(1, 4 * BS), tokens(2, 4 * BS)
    ops = [("allocate", "a", a), ("free", "a"), ("allocate", "b", b), ("free", "b"),
           ("allocate", "c", tokens(3, 2 * BS)), ("allocate", "a", a + tokens(4, 1)), ("free", "c"), ("free", "a")]
    run_walk(student, 8, ops, "two 4-block requests on 8 blocks, then a 2-block one evicting, then the first again")


@pytest.mark.task("eviction", points=2.975)
def test_lazy_eviction_under_pressure(student: Any) -> None:
    ops: list[tuple] = []
    prompts = [tokens(10 + i, 3 * BS + i) for i in range(6)]
    for index, prompt in enumerate(prompts):
        ops += [("allocate", f"p{index}", prompt), ("free", f"p{index}")]
    for index in (5, 0, 4, 2):
        ops += [("allocate", f"again{index}", prompts[index] + [7]), ("free", f"again{index}")]
    run_walk(student, 10, ops, "six prompts of 3-4 blocks through a 10-block pool, then four of them again")


@pytest.mark.task("eviction", points=2.55)
def test_decode_blocks_fill_and_become_hits(student: Any) -> None:
    prompt = tokens(20, BS + 2)
    decoded = tokens(21, 2 * BS + 1)
    ops: list[tuple] = [("allocate", "a", prompt), ("append", "a", [])]
    ops += [("append", "a", [token]) for token in decoded]
    ops += [("allocate", "b", prompt + decoded[:2 * BS] + [5]), ("free", "a"), ("append", "b", [3, 4, 5]),
            ("free", "b"), ("allocate", "c", prompt + decoded + [9])]
    run_walk(student, 8, ops, "a request appending no token, then decoding 9 tokens one by one, then two requests "
             "extending it")


@pytest.mark.task("eviction", points=1.7)
def test_append_without_free_blocks_changes_nothing(student: Any) -> None:
    # With caching off, the blocks append_tokens fills stay unhashed.
    off = [("allocate", "x", tokens(32, BS - 1)), ("append", "x", [4, 5]), ("append", "x", tokens(33, BS + 2)),
           ("free", "x")]
    manager = student.block_manager.BlockManager(4, BS, False)
    problem = walk_problem(student, manager, RefManager(4, BS, False), off,
                           "decoding with enable_caching=False (BlockManager(4, 4, False))")
    assert problem is None, problem
    ops = [("allocate", "a", tokens(30, BS)), ("allocate", "b", tokens(31, BS - 1)), ("append", "b", [1]),
           ("append", "a", [2]), ("append", "b", [3]), ("free", "a"), ("append", "b", [3, 4, 5, 6]),
           ("append", "b", [3, 4, 5, 6, 7])]
    run_walk(student, 2, ops, "two requests on a 2-block pool, appending past its end")


# X's block is cached (by request z) when request "a" allocates X alone, so a's block stays unhashed; a's decode
# then fills a block with Y. Block ids on 8 blocks: z gets 0, 1 (2); a gets 2 or 3, then the next one.
X, Y = tokens(40, BS), tokens(41, BS)
CACHED_ELSEWHERE_WALKS = {
    # z holds X and Y, so a's decode block (X, Y) stays unhashed; w evicts z's blocks; a's next append fills no
    # block: nothing may be hashed now (append_tokens hashes only the blocks ITS tokens make full).
    "a decode block left unhashed (its hash cached by another block) while that block is evicted": [
        ("allocate", "z", X + Y + [7]), ("free", "z"), ("allocate", "a", X), ("append", "a", Y),
        ("allocate", "w", tokens(42, 5 * BS)), ("append", "a", [9]), ("free", "w"), ("append", "a", tokens(43, 3)),
        ("free", "a")],
    # a's decode block (X, Y) is hashed while X's block (z's) is evicted: a prompt X + Y + ... then has no hit
    # at all (its first block misses), though its second block's hash is cached.
    "a chain whose first block was evicted while its second stays cached": [
        ("allocate", "z", X + [7]), ("free", "z"), ("allocate", "a", X), ("append", "a", Y),
        ("allocate", "w", tokens(44, 6 * BS)), ("free", "w"), ("allocate", "c", X + Y + [8]), ("free", "c"),
        ("free", "a")],
}


@pytest.mark.task("eviction", points=0.425)
@pytest.mark.parametrize("what", list(CACHED_ELSEWHERE_WALKS))
def test_blocks_whose_hash_was_cached_elsewhere(student: Any, what: str) -> None:
    run_walk(student, 8, CACHED_ELSEWHERE_WALKS[what], what)


# (what is called, call(block_manager module, a manager holding request "a" of 3 tokens), the exception it raises).
EDGES = [
    ("append_tokens of a negative token", lambda bm, m: m.append_tokens("a", [7, -1]), ValueError),
    ("append_tokens of float tokens", lambda bm, m: m.append_tokens("a", [1.5, 2.5]), ValueError),
    ("append_tokens of an unknown request", lambda bm, m: m.append_tokens("ghost", [1]), KeyError),
    ("free of an unknown request", lambda bm, m: m.free("ghost"), KeyError),
    ("append_tokens of an unknown request with a negative token (the unknown request_id is checked first)",
     lambda bm, m: m.append_tokens("ghost", [7, -1]), KeyError),
    ("append_tokens of a negative token when no block is free (checks come first, never None)",
     lambda bm, m: m.append_tokens("a", [-1] * 40), ValueError),
]


@pytest.mark.task("eviction", points=0.6375 / len(EDGES))  # split evenly: the task's points add up exactly
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: type[Exception]) -> None:
    problem = edge_problem(student, what, call, want, **EDGE_MANAGER)
    assert problem is None, problem


@pytest.mark.task("eviction", points=2.55)
def test_cost_does_not_grow_with_the_pool(student: Any) -> None:
    rng = np.random.default_rng(5)
    prefix = list(range(GUARD_PREFIX))
    manager = student.block_manager.BlockManager(GUARD_BLOCKS, 1)
    slow = ("Likely cause: touching a hit (removing it from the free queue) or evicting costs O(num_blocks): a list's "
            "remove, or a search for the least recently freed block. Use FreeBlockQueue's O(1) operations")
    try:  # timed like every call below, so that an O(num_blocks) step stops at the time limit in any grading
        student.cpu_seconds(lambda: (manager.allocate("long", prefix), manager.free("long")))
    except Exception as error:  # the grader's per-call time limit ends a slow call with an error
        pytest.fail(f"allocate and free of a {GUARD_PREFIX:,}-token prompt on {GUARD_BLOCKS:,} blocks of 1 token did "
                    f"not finish ({type(error).__name__}: {error}). {slow}", pytrace=False)
    what = (f"{GUARD_REQUESTS} requests each sharing 20-200 tokens of a {GUARD_PREFIX:,}-token prefix, on "
            f"{GUARD_BLOCKS:,} blocks of 1 token (each hit takes a block out of the middle of the free queue)")
    start, cpu = time.perf_counter(), 0.0
    for index in range(GUARD_REQUESTS):
        shared = int(rng.integers(20, 200))
        request = f"r{index}"
        answer, allocating = student.cpu_seconds(
            lambda: manager.allocate(request, prefix[:shared] + [GUARD_PREFIX + index]))
        assert answer is not None and answer[0] == shared, (
            f"request {index} of {what} should hit its {shared} shared tokens; allocate returned "
            f"{answer if answer is None else answer[0]!r} cached tokens")
        _, freeing = student.cpu_seconds(lambda: manager.free(request))
        cpu += allocating + freeing
        wall = time.perf_counter() - start
        assert cpu <= GUARD_SECONDS and wall <= WALL_FACTOR * GUARD_SECONDS, (
            f"{what}: after {index + 1} requests, {cpu:.1f} s of CPU time and {wall:.1f} s of wall-clock time have "
            f"passed (limit {GUARD_SECONDS:g} s of CPU time for all). {slow}")


# Random allocate / append_tokens / free calls (conformance_checks.py) side by side with the trusted
# reference manager: every answer and the whole state after each call.
@pytest.mark.task("eviction", points=2)
def test_generated_calls_match_the_reference(student: Any) -> None:
    machine = manager_machine(student, with_append=True, reference=RefManager)
    run_machine(machine, HIDDEN_SETTINGS)
