"""Public tests of BlockManager.free, append_tokens and lazy eviction (task eviction). Run: make test TASK=eviction."""
from __future__ import annotations

from typing import Any

import pytest

from conformance_checks import PUBLIC_SETTINGS, manager_machine
from kvlab.testing.conformance import run_machine
from manager_checks import chained_hashes, edge_problem

A = list(range(100, 112))  # 3 full blocks of 4


@pytest.mark.task("eviction", points=0.85)
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
    try:  # a preempted request comes back under its id
        answer = manager.allocate("a", A + [7])
    except Exception as error:
        pytest.fail(f"allocate('a', ...) after free('a') raised {type(error).__name__}: {error}. Likely cause: free "
                    "forgets the request (req_to_blocks included): a preempted request is allocated again under its id",
                    pytrace=False)
    assert tuple(answer) == (8, [0, 1, 6, 5]), (
        f"A's tail block was evicted first, its head blocks 0 and 1 are still hits: expected (8, [0, 1, 6, 5]); got {answer}")
    manager.append_tokens("a", [1, 2, 3])
    chain = chained_hashes(A + [7, 1, 2, 3], 4)[-1]
    assert manager.block_hash(5) == chain, (
        f"block 5, the 4th block of a2, filled by append_tokens, has hash {manager.block_hash(5)!r:.20}; expected "
        f"{chain[:16]!r}... Likely cause: its parent is the hash of the request's previous full block (the "
        "3rd, block 6), not of its first")
    shared = student.block_manager.BlockManager(4, 4)
    shared.allocate("x", A[:4] + [1])
    shared.allocate("y", A[:4] + [2])  # hits x's first block: ref_cnt 2
    shared.free("y")
    queue = list(shared.free_block_ids())
    assert 0 not in queue and shared.ref_cnt(0) == 1, (
        f"after x and y shared block 0 and y was freed, block 0 has ref_cnt {shared.ref_cnt(0)!r} and the free queue "
        f"is {queue}: a block goes to the free queue only on its ref_cnt reaching 0 (x still uses block 0)")


@pytest.mark.task("eviction", points=0.85)
def test_append_tokens(student: Any) -> None:
    manager = student.block_manager.BlockManager(3, 4)
    manager.allocate("a", [1, 2, 3])
    nothing = manager.append_tokens("a", [])
    assert list(nothing) == [] and list(manager.block_ids("a")) == [0] and manager.block_hash(0) is None, (
        f"append_tokens('a', []) returned {nothing!r} and left a with blocks {manager.block_ids('a')}, block 0 hashed "
        f"{manager.block_hash(0) is not None}; expected [] and nothing changed (no token, no block, no hash)")
    assert list(manager.append_tokens("a", [4])) == [], "the 4th token fits in block 0: no new block"
    assert manager.block_hash(0) is not None, "a block that append_tokens makes full is hashed"
    assert list(manager.append_tokens("a", [5])) == [1], "the 5th token needs a new block: [1]"
    assert list(manager.append_tokens("a", [6, 7, 8])) == [], "tokens 6 to 8 fill block 1: no new block"
    want = chained_hashes([1, 2, 3, 4, 5, 6, 7, 8], 4)[1]
    assert manager.block_hash(1) == want, (
        f"block 1, filled by append_tokens, has hash {manager.block_hash(1)!r:.20}; expected {want[:16]!r}... Likely "
        "cause: the hash must be lecture 7's chained SHA-256 over the request's tokens, block by block (its parent "
        "is the hash of the request's previous full block)")
    off = student.block_manager.BlockManager(3, 4, enable_caching=False)
    off.allocate("a", [1, 2, 3])
    try:
        off.append_tokens("a", [4, 5])  # fills block 0
    except Exception as error:
        pytest.fail(f"with enable_caching=False, append_tokens('a', [4, 5]) raised {type(error).__name__}: {error}. "
                    "Likely cause: with caching off nothing is hashed, append_tokens included", pytrace=False)
    assert off.block_hash(0) is None, (
        f"with enable_caching=False, block 0, filled by append_tokens, has hash {off.block_hash(0)!r:.20}; nothing is "
        "ever hashed with caching off (append_tokens hashes only with caching on)")
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


@pytest.mark.task("eviction", points=0.85)
def test_blocks_whose_hash_was_cached_elsewhere(student: Any) -> None:
    # Block size 2. z caches [1, 2] in block 0 and [3, 4] in block 1; a's blocks for the same tokens stay unhashed.
    manager = student.block_manager.BlockManager(6, 2)
    manager.allocate("z", [1, 2, 3, 4, 5])
    manager.free("z")  # free queue: 3, 4, 5, 2, 1, 0
    assert tuple(manager.allocate("a", [1, 2])) == (0, [3]), "a 2-token prompt computes its last token: (0, [3])"
    assert list(manager.append_tokens("a", [3, 4])) == [4], "a's 3rd token needs a new block, the queue's head: [4]"
    assert manager.block_hash(4) is None, "block 4 holds [3, 4] after [1, 2], a hash block 1 caches: it stays unhashed"
    manager.allocate("w", [8, 8, 8, 8, 8, 8])  # pops 5, 2, 1: block 1 and its hash are evicted
    assert list(manager.append_tokens("a", [6])) == [0], "a's 5th token takes the last free block, 0 (evicting it)"
    assert manager.block_hash(4) is None, (
        f"block 4 has hash {manager.block_hash(4)!r:.20} after append_tokens('a', [6]); expected None. Likely cause: "
        "append_tokens hashes only the blocks ITS tokens make full; block 4 was made full earlier, when its hash was "
        "cached by block 1, so it stays unhashed for good")
    # Again with a's second block hashed: the chain's first block is evicted, its second stays cached.
    manager = student.block_manager.BlockManager(6, 2)
    manager.allocate("z", [1, 2, 3])
    manager.free("z")  # free queue: 2, 3, 4, 5, 1, 0
    manager.allocate("a", [1, 2])  # block 2, unhashed (block 0 caches [1, 2])
    manager.append_tokens("a", [3, 4])  # block 3, hashed
    manager.allocate("w", [8] * 8)  # pops 4, 5, 1, 0: [1, 2]'s hash is evicted
    manager.free("w")  # free queue: 0, 1, 5, 4
    answer = manager.allocate("c", [1, 2, 3, 4, 7])
    hit = tuple(answer)[0] if answer is not None else None
    # 2 cached tokens: the run skipped the miss on [1, 2] and counted [3, 4]; 4: [1, 2] was still found.
    cause = {2: "only the longest LEADING run of cached hashes counts: stop at the first miss",
             4: "when w's allocate popped block 0, the hash of [1, 2] had to leave the prefix cache (a reallocated "
                "block loses its old hash: lazy eviction), so it is no longer a hit"}.get(
        hit, "the hits are the longest leading run of the prompt's hashes found in the prefix cache; new blocks "
             "come from the free queue's head")
    assert answer is not None and tuple(answer) == (0, [0, 1, 5]), (
        f"allocate('c', [1, 2, 3, 4, 7]) returned {answer!r}; expected (0, [0, 1, 5]): the hash of [1, 2] is no longer "
        f"cached, so nothing is a hit, though block 3 still caches the hash of [3, 4] after [1, 2]. Likely cause: {cause}")


# (what is called, call(block_manager module, a manager holding request "a"), the exception it raises).
EDGES = [
    ("append_tokens('a', [-1])", lambda bm, m: m.append_tokens("a", [-1]), ValueError),
    ("append_tokens('a', [2.5])", lambda bm, m: m.append_tokens("a", [2.5]), ValueError),
    ("append_tokens('nobody', [1])", lambda bm, m: m.append_tokens("nobody", [1]), KeyError),
    ("free('nobody')", lambda bm, m: m.free("nobody"), KeyError),
    ("append_tokens('nobody', [-1]): the unknown request_id is checked first",
     lambda bm, m: m.append_tokens("nobody", [-1]), KeyError),
    ("append_tokens('a', [-1] * 50) with no free block: the checks come first, never None",
     lambda bm, m: m.append_tokens("a", [-1] * 50), ValueError),
]


@pytest.mark.task("eviction", points=0.6375 / len(EDGES))  # split evenly: the task's points add up exactly
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: Any) -> None:
    problem = edge_problem(student, what, call, want)
    assert problem is None, problem


# Random allocate / append_tokens / free calls with shared prefixes and every stated bad input
# (conformance_checks.py): the whole state after each call, against the rules from the state before it.
@pytest.mark.task("eviction", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(manager_machine(student, with_append=True), PUBLIC_SETTINGS)
