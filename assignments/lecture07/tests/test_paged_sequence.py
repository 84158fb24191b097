"""Public tests of PagedSequence (task paged_sequence). Run: make test TASK=paged_sequence.

Position p of a sequence lives in block blocks[p // block_size] at offset p % block_size; reserve
allocates until len(blocks) * block_size >= length + n, all or nothing. The grader checks the same
rules with the same diagnoses (paged_checks.py, in this folder) on longer walks and random calls.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from conformance_checks import PUBLIC_SETTINGS, pool_machine
from kvlab.testing.conformance import run_machine
from kvlab.model import forward
from paged_checks import (
    CFG, describe_error, free_order_problem, outcome, paged_logits_problem, params, raise_problem,
    sequence_walk_problem, slots_problem, slots_edge_problem, tokens_for,
)

# (operation, {sequence: (length, refcount of each block)}, {held block: refcount}, num_free) on
# BlockPool(n_blocks=4, block_size=3); see sequence_walk_problem.
SEQUENCE_WALK: tuple[tuple[str, dict[str, tuple[int, list[int]]], dict[str, int], int], ...] = (
    ("seq s", {"s": (0, [])}, {}, 4),
    ("reserve s 6", {"s": (0, [1, 1])}, {}, 2),  # 6 tokens fit exactly in two blocks of 3
    ("step s 4", {"s": (4, [1, 1])}, {}, 2),
    ("reserve s 3", {"s": (4, [1, 1, 1])}, {}, 1),  # 4 stored + 3 = 7 tokens: three blocks
    ("seq t", {"s": (4, [1, 1, 1]), "t": (0, [])}, {}, 1),
    ("reserve t 5 -> OutOfBlocks", {"s": (4, [1, 1, 1]), "t": (0, [])}, {}, 1),  # needs 2, 1 free
    ("free s", {"s": (0, []), "t": (0, [])}, {}, 4),
    ("step s 2", {"s": (2, [1]), "t": (0, [])}, {}, 3),
    ("free s", {"s": (0, []), "t": (0, [])}, {}, 4),
)


@pytest.mark.task("paged_sequence", points=0.8)
def test_reserve_slots_free(student: Any) -> None:
    problem = sequence_walk_problem(student, SEQUENCE_WALK, 4, 3)
    assert problem is None, problem
    problem = free_order_problem(student, 3, 3)
    assert problem is None, problem


@pytest.mark.task("paged_sequence", points=0.8)
def test_paged_step_matches_forward(student: Any) -> None:
    weights = params()
    prompt = tokens_for(10, seed=40)
    pool = student.paged_kv.BlockPool(CFG, 4, 4)
    seq = student.paged_kv.PagedSequence(pool)
    logits, error = outcome(functools.partial(student.call, "kvlab.paged:paged_step", weights, CFG, [seq], [prompt]))
    assert error is None, f"paged_step of a 10-token prompt (block_size 4) raised {describe_error(error)}"
    problem = paged_logits_problem("paged_step logits of a 10-token prompt (block_size 4)", logits[0],
                                   forward(weights, CFG, prompt[None])[0], None)
    assert problem is None, problem
    assert seq.length == 10, f"after paged_step of 10 tokens seq.length should be 10; got {seq.length}"


@pytest.mark.task("paged_sequence", points=0.8)
def test_slots_bounds_and_edges(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 4, 2)
    seq = student.paged_kv.PagedSequence(pool)
    problem = slots_edge_problem("a new sequence (no block, block_size 2)", seq, [])
    assert problem is None, problem
    seq.reserve(3)
    blocks = list(seq.blocks)
    what = f"slots(1, 3) with blocks = {blocks} (block_size 2)"
    problem = slots_problem(what, seq.slots(1, 3), blocks, 1, 3, 2, 0)
    assert problem is None, problem
    problem = raise_problem(f"slots(3, 2) with blocks = {blocks} (block_size 2)", functools.partial(seq.slots, 3, 2),
                            ValueError, "positions 3 .. 4 are beyond the reserved 4 slots: slots must raise ValueError")
    assert problem is None, problem
    problem = slots_edge_problem(f"a sequence holding blocks {blocks} (block_size 2)", seq, blocks)
    assert problem is None, problem



# Random reserve / paged_step / slots / free calls on sequences sharing a small pool, with the edge
# arguments the stub names (conformance_checks.py): every refcount, blocks and length after each call.
@pytest.mark.task("paged_sequence", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(pool_machine(student, with_sequences=True), PUBLIC_SETTINGS)
