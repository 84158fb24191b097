"""Hidden tests of block_hashes and BlockManager.allocate (task prefix_hits): vLLM-style walks that
compare, after every step, the answer, the free queue's order, every ref_cnt and hash, and the
counters with the reference; a fully cached prompt; admission that does not fit; caching off."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _manager_checks import EDGE_MANAGER, RefManager, walk_problem
from conformance_checks import HIDDEN_SETTINGS, manager_machine
from kvlab.testing.conformance import run_machine
from cost_checks import pool_cost_problem
from kvlab.testing.draws import drawn
from manager_checks import chained_hashes, edge_problem

BS = 4


def tokens(seed: int, n: int, low: int = 0) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(low, low + 50_000, size=n)]


COMMON = tokens(1, 3 * BS)


def run_walk(student: Any, n_blocks: int, ops: list[tuple], what: str, caching: bool = True,
             block_size: int = BS) -> None:
    manager = student.block_manager.BlockManager(n_blocks, block_size, caching)
    problem = walk_problem(student, manager, RefManager(n_blocks, block_size, caching), ops, what)
    assert problem is None, problem


@pytest.mark.task("prefix_hits", points=1.32)
def test_shared_prefix_walk(student: Any) -> None:
    ops = [("allocate", "a", COMMON + tokens(2, 3)), ("allocate", "b", COMMON + tokens(3, 5)),
           ("free", "a"), ("allocate", "c", COMMON[:2 * BS] + tokens(4, 6)), ("free", "b"), ("free", "c")]
    run_walk(student, 12, ops, "two requests sharing a 3-block prefix, then a third sharing 2 blocks of it")


@pytest.mark.task("prefix_hits", points=2.64)
def test_hits_on_freed_cached_blocks(student: Any) -> None:
    ops = [("allocate", "a", COMMON + tokens(5, 2)), ("free", "a"), ("allocate", "b", COMMON + tokens(6, 7)),
           ("allocate", "c", COMMON[:BS] + tokens(7, 1)), ("free", "b"), ("free", "c"),
           ("allocate", "d", COMMON + tokens(5, 2))]
    run_walk(student, 10, ops, "requests hitting blocks whose first user has finished (ref_cnt 0, still cached)")


@pytest.mark.task("prefix_hits", points=1.76)
def test_fully_cached_prompt_recomputes_its_last_block(student: Any) -> None:
    ops = [("allocate", "a", COMMON), ("allocate", "b", COMMON), ("free", "a"), ("free", "b"),
           ("allocate", "c", COMMON), ("allocate", "d", COMMON[:BS + 1])]
    run_walk(student, 8, ops, "the same 3-block prompt three times")


@pytest.mark.task("prefix_hits", points=1.76)
def test_admission_that_does_not_fit_changes_nothing(student: Any) -> None:
    ops = [("allocate", "a", COMMON[:2 * BS]), ("free", "a"), ("allocate", "big", COMMON[:2 * BS] + tokens(8, 9)),
           ("allocate", "fits", COMMON[:2 * BS] + tokens(8, 4)), ("allocate", "none", tokens(9, 5)),
           ("free", "fits"), ("allocate", "none", tokens(9, 5)), ("allocate", "exact", tokens(12, 2 * BS))]
    run_walk(student, 4, ops, "a 4-block pool where free cached hits count against the free blocks")


@pytest.mark.task("prefix_hits", points=1.76)
def test_caching_off(student: Any) -> None:
    # c decodes past two block ends: with caching off, the blocks it fills stay unhashed too.
    ops = [("allocate", "a", COMMON + tokens(2, 3)), ("allocate", "b", COMMON + tokens(3, 5)), ("free", "a"),
           ("free", "b"), ("allocate", "c", COMMON + tokens(2, 3)), ("append", "c", [1]),
           ("append", "c", tokens(10, BS + 1))]
    run_walk(student, 12, ops, "the shared-prefix walk with enable_caching=False, then decoding", caching=False)


# Block size 2 on 6 blocks. P's hashes h1, h2, h3 end up cached in free blocks 2, 3, 4 while h0 is evicted; when P
# comes again, its five new blocks are popped 4, 3, 2, 1, 0. Popping all before hashing caches h0 .. h3 in the new
# blocks; hashing each as it is popped finds h1 still cached (in block 2, popped next), so it is cached nowhere and
# a third P hits 2 tokens instead of 8.
P = tokens(50, 9)
POP_THEN_HASH = [("allocate", "z", P[:2]), ("allocate", "a", P[:2]), ("append", "a", P[2:8]), ("free", "z"),
                 ("free", "a"), ("allocate", "w", tokens(51, 4)), ("free", "w"), ("allocate", "p", P), ("free", "p"),
                 ("allocate", "q", P)]


@pytest.mark.task("prefix_hits", points=0.88)
def test_new_blocks_are_popped_before_any_is_hashed(student: Any) -> None:
    run_walk(student, 6, POP_THEN_HASH, "a 9-token prompt whose later hashes are cached in the blocks it pops "
             "(BlockManager(6, 2))", block_size=2)


@pytest.mark.task("prefix_hits", points=1.1)
@pytest.mark.parametrize("seed", [11, 12])
def test_random_walk(student: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    prefixes = [tokens(seed * 10 + i, int(rng.integers(1, 4)) * BS + int(rng.integers(0, 3))) for i in range(3)]
    ops: list[tuple] = []
    live: list[str] = []
    for index in range(40):
        if live and (rng.random() < 0.45 or len(live) > 3):
            ops.append(("free", live.pop(int(rng.integers(len(live))))))
        else:
            prompt = prefixes[int(rng.integers(3))] + tokens(seed * 100 + index, int(rng.integers(0, 2 * BS)))
            ops.append(("allocate", f"r{index}", prompt))
            live.append(f"r{index}")
    ref = RefManager(16, BS)
    # Requests that got None were never admitted: drop their frees from the walk.
    kept, admitted = [], set()
    for op in ops:
        if op[0] == "allocate":
            if ref.apply(op) is not None:
                admitted.add(op[1])
            kept.append(op)
        elif op[1] in admitted:
            ref.apply(op)
            kept.append(op)
    run_walk(student, 16, kept, f"a random walk of 3 shared prefixes on 16 blocks (seed {seed})")


@pytest.mark.task("prefix_hits", points=1.76)
def test_block_hashes_are_lecture_7s_chain(student: Any) -> None:
    prompt = tokens(20, 3 * BS + 2)
    for form in (prompt, tuple(prompt), np.asarray(prompt, dtype=np.int32), np.asarray(prompt, dtype=np.int64)):
        got = list(student.block_manager.block_hashes(form, BS))
        want = chained_hashes(prompt, BS)
        assert got == want, (
            f"block_hashes({prompt} as a {type(form).__name__}"
            f"{'' if isinstance(form, (list, tuple)) else ' of ' + str(form.dtype)}, {BS}) gave {len(got)} "
            f"digests differing from lecture 7's chain: one SHA-256 hex digest per FULL block, digest i covering "
            "the parent and blocks 0 .. i, the tokens as little-endian int64 values")
    head = chained_hashes(prompt[:BS], BS)[-1]
    got = list(student.block_manager.block_hashes(prompt[BS:], BS, parent=head))
    assert got == chained_hashes(prompt, BS)[1:], (
        f"block_hashes({prompt[BS:]}, {BS}, parent=block_hashes({prompt[:BS]}, {BS})[-1]) does not continue the chain "
        f"of the whole prompt: block_hashes(b, n, parent=last digest of a) must equal block_hashes(a + b, n)[len(a) // n:]")
    signed = [-1, -50_000, 3, -(2**40), 0, 7, -2, 1]
    try:
        got = list(student.block_manager.block_hashes(signed, BS))
    except Exception as error:  # a student's exception of any type is a finding
        pytest.fail(f"block_hashes({signed}, {BS}) raised {type(error).__name__}: {error}. Likely cause: negative "
                    "integers are integers: block_hashes hashes them like any other value (as int64) and never refuses "
                    "them (allocate and append_tokens refuse token ids < 0, not block_hashes)", pytrace=False)
    assert got == chained_hashes(signed, BS), (
        f"block_hashes({signed}, {BS}) gave digests other than lecture 7's chain: negative token ids are hashed like "
        "any other value, as little-endian int64 (two's complement)")
    for empty in ([], (), np.zeros(0, dtype=np.int32)):
        shown = f"an empty {type(empty).__name__}" + ("" if isinstance(empty, (list, tuple)) else f" of {empty.dtype}")
        try:
            got = list(student.block_manager.block_hashes(empty, BS))
        except Exception as error:  # a student's exception of any type is a finding
            pytest.fail(f"block_hashes of {shown} raised {type(error).__name__}: {error}. Likely cause: an empty "
                        "sequence gives [] (np.asarray([]) is float64: check the dtype only when there are tokens)",
                        pytrace=False)
        assert got == [], f"block_hashes of {shown} gave {got!r:.100}; an empty sequence gives []"


# (what is called, call(block_manager module, a manager holding request "a" of 3 tokens), the exception it raises).
EDGES = [
    ("BlockManager(0, 4)", lambda bm, m: bm.BlockManager(0, 4), ValueError),
    ("BlockManager(4, 0)", lambda bm, m: bm.BlockManager(4, 0), ValueError),
    ("BlockManager(4.0, 4)", lambda bm, m: bm.BlockManager(4.0, 4), ValueError),
    ("block_hashes of float tokens", lambda bm, m: bm.block_hashes([1.5, 2.5, 3.5, 4.5], 2), ValueError),
    ("block_hashes of a 2-D integer array", lambda bm, m: bm.block_hashes(np.arange(8).reshape(2, 4), 2), ValueError),
    ("allocate of a request id that already holds blocks", lambda bm, m: m.allocate("a", [4]), ValueError),
    ("allocate of an empty prompt", lambda bm, m: m.allocate("b", []), ValueError),
    ("allocate of a prompt with a negative token", lambda bm, m: m.allocate("c", [5, -3, 2]), ValueError),
    ("allocate of a bad prompt when there is no room (checks come first, never None)",
     lambda bm, m: m.allocate("d", [1.5] * 40), ValueError),
    ("allocate of a negative token under a request id that already holds blocks", lambda bm, m: m.allocate("a", [-1]),
     ValueError),
]


# The docstring's rule each edge breaks, in its words.
SIZES_RULE = "num_blocks and block_size must be ints >= 1; bool is not an int"
TOKENS_RULE = "allocate's tokens must be 1-D integers >= 0 (check_tokens), checked before anything changes"
EDGE_RULES = {
    "BlockManager(0, 4)": SIZES_RULE, "BlockManager(4, 0)": SIZES_RULE, "BlockManager(4.0, 4)": SIZES_RULE,
    "block_hashes of float tokens": "block_hashes takes a 1-D sequence of integers",
    "block_hashes of a 2-D integer array": "block_hashes takes a 1-D sequence of integers",
    "allocate of a request id that already holds blocks": "a request_id that already holds blocks is refused",
    "allocate of an empty prompt": "a prompt needs at least one token",
    "allocate of a prompt with a negative token": TOKENS_RULE,
    "allocate of a bad prompt when there is no room (checks come first, never None)": TOKENS_RULE,
}


@pytest.mark.task("prefix_hits", points=2.2 / len(EDGES))  # split evenly: the task's points add up exactly
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: type[Exception]) -> None:
    problem = edge_problem(student, what, call, want, EDGE_RULES.get(what, "see its docstring"), **EDGE_MANAGER)
    assert problem is None, problem


@pytest.mark.task("prefix_hits", points=0.44)
def test_cost_does_not_grow_with_the_pool(student: Any) -> None:
    # 200,000 blocks against 1,000: an O(num_blocks) step costs ~5-10 ms a call there, 0.5 s or more over 80
    # pairs; the reference's cost does not grow.
    problem = pool_cost_problem(student, 200_000, 80, seed=drawn(1_000, 2**31),
                                margin=0.2)
    assert problem is None, problem


# Random allocate / free calls (conformance_checks.py) side by side with the trusted reference manager:
# every answer and the whole state after each call.
@pytest.mark.task("prefix_hits", points=2)
def test_generated_calls_match_the_reference(student: Any) -> None:
    machine = manager_machine(student, with_append=False, reference=RefManager)
    run_machine(machine, HIDDEN_SETTINGS)
