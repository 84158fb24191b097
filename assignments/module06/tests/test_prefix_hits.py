"""Public tests of block_hashes and BlockManager.allocate (task prefix_hits). Run: make test TASK=prefix_hits.

Block size 4 throughout. Prompt A has 10 tokens: 2 full blocks (hashed) and a partial one.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conformance_checks import PUBLIC_SETTINGS, manager_machine
from kvlab.testing.conformance import run_machine
from cost_checks import pool_cost_problem
from manager_checks import A, chained_hashes, edge_problem


def state(student: Any, manager: Any) -> tuple[list[int], list[int]]:
    """(free queue head first, every block's ref_cnt)."""
    refs = student.call("kvlab.testing.probe:each", manager.ref_cnt, [(b,) for b in range(manager.num_blocks)])
    return list(manager.free_block_ids()), list(refs)


@pytest.mark.task("prefix_hits", points=0.88)
def test_block_hashes_chain(student: Any) -> None:
    digests = list(student.block_manager.block_hashes(np.asarray(A, dtype=np.int32), 4))
    first, second = chained_hashes(A, 4)
    assert len(digests) == 2, f"10 tokens at block size 4 make 2 full blocks, so 2 digests; got {len(digests)}"
    assert digests[0] == first, "digest 0 is the SHA-256 of the first block's tokens as little-endian int64 (lecture 7)"
    assert digests[1] == second, (
        "digest 1 is not the SHA-256 of digest 0's hex text (ASCII) followed by block 1's tokens as little-endian "
        "int64: the chain must carry the previous digest exactly so (the grader compares digests exactly)")
    assert list(student.block_manager.block_hashes(A[4:8], 4, parent=digests[0])) == digests[1:], (
        "block_hashes(b, n, parent=last digest of a) must continue a's chain")
    try:
        empty = student.block_manager.block_hashes([], 4)
    except Exception as error:
        pytest.fail(f"block_hashes([], 4) raised {type(error).__name__}: {error}; an empty sequence gives [] (note "
                    "np.asarray([]) is float64)", pytrace=False)
    assert list(empty) == [], f"block_hashes([], 4) gave {empty!r}; an empty sequence gives []"


@pytest.mark.task("prefix_hits", points=0.88)
def test_second_request_shares_the_full_blocks(student: Any) -> None:
    manager = student.block_manager.BlockManager(8, 4)
    assert manager.allocate("a", A) == (0, [0, 1, 2]), "the first request has nothing cached: (0, [0, 1, 2])"
    answer = manager.allocate("b", A[:8] + [3, 3, 3])
    assert tuple(answer) == (8, [0, 1, 3]), (
        f"b shares A's 2 full blocks (8 tokens) and gets one new block from the free queue's head: (8, [0, 1, 3]); got {answer}")
    queue, refs = state(student, manager)
    assert refs == [2, 2, 1, 1, 0, 0, 0, 0], f"ref_cnts should be [2, 2, 1, 1, 0, 0, 0, 0]; got {refs}"
    assert queue == [4, 5, 6, 7], f"the free queue should be [4, 5, 6, 7]; got {queue}"
    assert manager.block_hash(2) is None and manager.block_hash(1) is not None, "only full blocks are hashed"
    counters = (manager.prefix_cache_queries, manager.prefix_cache_hits)
    assert counters == (21, 8), f"queries, hits should be (10 + 11, 8) = (21, 8); got {counters}"


@pytest.mark.task("prefix_hits", points=0.88)
def test_freed_blocks_stay_hits_and_a_full_hit_recomputes_the_last_block(student: Any) -> None:
    manager = student.block_manager.BlockManager(8, 4)
    manager.allocate("a", A)
    manager.free("a")
    answer = manager.allocate("c", A[:8])
    assert tuple(answer) == (4, [0, 3]), (
        f"A's first 8 tokens are fully cached, but the last token must be computed: 1 block hit, its second block "
        f"recomputed in a new block, (4, [0, 3]); got {answer}")
    queue, refs = state(student, manager)
    assert queue == [4, 5, 6, 7, 2, 1], (
        f"a freed cached block is a hit until reallocated: the hit takes block 0 out of the free queue (touch); "
        f"expected [4, 5, 6, 7, 2, 1]; got {queue}")
    assert manager.block_hash(3) is None, "block 3 holds a hash already cached (block 1's): it stays unhashed"


def assert_touched_hits_are_taken(student: Any) -> None:
    """On 3 blocks with A's 2 full blocks cached and free: a prompt hitting both needs 2 new blocks (None),
    one needing 1 new block fits exactly."""
    manager = student.block_manager.BlockManager(3, 4)
    manager.allocate("a", A[:8])
    manager.free("a")
    try:
        answer = manager.allocate("b", A[:8] + [3] * 6)
    except ValueError as error:  # a pop from an empty free queue: the room check let it through
        answer = f"ValueError: {error}"
    assert answer is None and manager.free_block_ids() == [2, 1, 0], (
        f"3 free blocks, 2 of them A's cached blocks that a 14-token prompt hits, so only 1 is left for its 2 new "
        f"blocks: allocate must return None and change nothing; got {answer!r}. Likely cause: count the hit blocks "
        "that are in the free queue (ref_cnt 0) as taken: touching them removes them from it")
    answer = manager.allocate("c", A[:8] + [3])
    assert answer is not None and tuple(answer) == (8, [0, 1, 2]), (
        f"a 9-token prompt hits A's 2 cached blocks and needs 1 new block, the 1 left: expected (8, [0, 1, 2]); got "
        f"{answer!r}. Likely cause: enough blocks are free (cached blocks with ref_cnt 0 are free too: they can be "
        "evicted), so the call must succeed")


@pytest.mark.task("prefix_hits", points=0.88)
def test_no_room_changes_nothing_and_caching_off(student: Any) -> None:
    manager = student.block_manager.BlockManager(2, 4)
    assert manager.allocate("a", A) is None, "10 tokens need 3 blocks of 4; with 2 blocks allocate returns None"
    assert manager.free_block_ids() == [0, 1] and manager.prefix_cache_queries == 0, "a None allocate changes nothing"
    try:  # the engine retries a refused request under its id; 8 tokens need exactly the 2 free blocks
        retry = manager.allocate("a", A[:8])
    except Exception as error:
        pytest.fail(f"allocate('a', 8 tokens) after allocate('a', 10 tokens) returned None raised "
                    f"{type(error).__name__}: {error}. Likely cause: a None allocate must change nothing (no request "
                    "registered): the engine retries", pytrace=False)
    assert retry is not None and tuple(retry) == (0, [0, 1]), (
        f"allocate('a', 8 tokens) on 2 free blocks returned {retry!r}; expected (0, [0, 1]): it returns None only when "
        "the new blocks needed exceed the free blocks left (after a None that changed nothing)")
    queries = manager.prefix_cache_queries
    manager.free("a")
    manager.allocate("d", [1, 2])
    manager.append_tokens("d", [3, 4, 5])
    assert manager.prefix_cache_queries == queries + 2, (
        f"after allocate('d', 2 tokens) and append_tokens('d', 3 tokens) prefix_cache_queries grew by "
        f"{manager.prefix_cache_queries - queries!r}; expected 2: only allocate counts queries, append_tokens adds nothing")
    head = student.block_manager.BlockManager(2, 4)
    head.allocate("x", A[:4])
    head.allocate("z", [9, 9, 9, 9])
    head.free("x")
    head.free("z")  # the free queue is [0, 1]: x's cached block 0 at the head
    answer = head.allocate("y", A[:4] + [7])
    assert answer is not None and tuple(answer) == (4, [0, 1]) and list(head.free_block_ids()) == [], (
        f"with x's cached block 0 at the free queue's head, allocate('y', A[:4] + [7]) returned {answer!r}; expected "
        "(4, [0, 1]). Likely cause: touch the hits before popping new blocks, so no hit is evicted by its own request")
    assert_touched_hits_are_taken(student)
    off = student.block_manager.BlockManager(8, 4, enable_caching=False)
    off.allocate("a", A)
    answer = off.allocate("b", A)
    assert answer[0] == 0 and off.block_hash(0) is None and off.prefix_cache_queries == 0, (
        f"with enable_caching=False nothing is hashed, looked up or counted; got {answer}, hash {off.block_hash(0)!r}")
    off.append_tokens("b", [3, 3, 3, 3])  # fills b's third block (10 + 2 = 12 tokens) and starts a fourth
    hashed = [block for block in range(8) if off.block_hash(block) is not None]
    assert not hashed, (
        f"with enable_caching=False, after append_tokens('b', [3, 3, 3, 3]) filled a block, blocks {hashed} hold a "
        "hash. Likely cause: with enable_caching=False nothing is ever hashed: not by allocate, and not by "
        "append_tokens when decoding fills a block")
    try:
        result = off.allocate("a", A)
    except ValueError:
        return
    pytest.fail(f"allocate with a request id that already holds blocks should raise ValueError; it returned {result!r}")



@pytest.mark.task("prefix_hits", points=0.22)
def test_new_blocks_are_popped_before_any_is_hashed(student: Any) -> None:
    # Block size 2. P's blocks 1 to 3 end up cached in free blocks 2, 3, 4 while its block 0 is evicted.
    p = [11, 12, 13, 14, 15, 16, 17, 18, 19]
    manager = student.block_manager.BlockManager(6, 2)
    manager.allocate("z", p[:2])  # block 0 caches P's block 0
    manager.allocate("a", p[:2])  # block 1, unhashed (block 0 caches that hash)
    manager.append_tokens("a", p[2:8])  # blocks 2, 3, 4 cache P's blocks 1, 2, 3
    manager.free("z")
    manager.free("a")  # free queue: 5, 0, 4, 3, 2, 1
    manager.allocate("w", [1, 2, 3, 4])  # pops 5 and 0: P's block 0 is evicted
    manager.free("w")  # free queue: 4, 3, 2, 1, 0, 5
    first = manager.allocate("p", p)  # no hit; pops 4, 3, 2, 1, 0, evicting P's blocks 1 to 3 as it goes
    manager.free("p")
    again = manager.allocate("q", p)
    assert first is not None and tuple(first)[0] == 0 and again is not None and tuple(again)[0] == 8, (
        f"on BlockManager(6, 2), allocate('p', {p}) returned {first!r}, then the same prompt again returned "
        f"{again!r}; expected (0, ...) then 8 cached tokens (4 blocks, the cap). Likely cause: pop every new block "
        "from the free queue before hashing any: hashing each new block as it is popped leaves it unhashed when its "
        "hash is still cached by a block that a later pop of the same allocate evicts, so that hash is cached nowhere")


# (what is called, call(block_manager module, a manager holding request "a"), the exception or the answer).
EDGES = [
    ("BlockManager(0, 2)", lambda bm, m: bm.BlockManager(0, 2), ValueError),
    ("BlockManager(3, -1)", lambda bm, m: bm.BlockManager(3, -1), ValueError),
    ("BlockManager('4', 4)", lambda bm, m: bm.BlockManager("4", 4), ValueError),
    ("BlockManager(1, 1), the smallest, admitting one token",
     lambda bm, m: tuple(bm.BlockManager(1, 1).allocate("r", [7])), (0, [0])),
    ("block_hashes([0.5, 1.5], 1)", lambda bm, m: bm.block_hashes([0.5, 1.5], 1), ValueError),
    ("block_hashes([[1, 2], [3, 4]], 2)", lambda bm, m: bm.block_hashes([[1, 2], [3, 4]], 2), ValueError),
    ("allocate('x', [])", lambda bm, m: m.allocate("x", []), ValueError),
    ("allocate('y', [4, -5])", lambda bm, m: m.allocate("y", [4, -5]), ValueError),
    ("allocate('z', [0.5] * 40) with no room: the checks come first, never None",
     lambda bm, m: m.allocate("z", [0.5] * 40), ValueError),
    ("block_hashes([-1, 5, -7, 2], 2): negative ids are hashed like any other value, never refused",
     lambda bm, m: list(bm.block_hashes([-1, 5, -7, 2], 2)), chained_hashes([-1, 5, -7, 2], 2)),
]


@pytest.mark.task("prefix_hits", points=1.1 / len(EDGES))  # split evenly: the task's points add up exactly
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: Any) -> None:
    problem = edge_problem(student, what, call, want)
    assert problem is None, problem


@pytest.mark.task("prefix_hits", points=0.44)
def test_cost_does_not_grow_with_the_pool(student: Any) -> None:
    # CPU time, as the grader measures it: 80 allocate + free pairs on 200,000 blocks cost no more than on 1,000.
    problem = pool_cost_problem(student, 200_000, 80, seed=3, margin=0.2)
    assert problem is None, problem


# Random allocate / free calls with shared prefixes and every stated bad input (conformance_checks.py):
# the whole state after each call, against the rules from the state before it.
@pytest.mark.task("prefix_hits", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(manager_machine(student, with_append=False), PUBLIC_SETTINGS)
