"""Hidden tests of PagedSequence (task paged_sequence): a scripted walk of reserve / paged_step /
free with every refcount after each step, all-or-nothing reserve, slots across block boundaries,
paged logits equal to dense ones, and a state machine over pool and sequences together."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from hypothesis.stateful import run_state_machine_as_test

from conformance_checks import HIDDEN_SETTINGS, pool_machine as pool_machine_conformance
from kvlab.testing.conformance import run_machine
from paged_checks import (
    CFG, MACHINE_SETTINGS, describe_error, free_order_problem, outcome, paged_logits_problem, params, pool_machine,
    raise_problem, sequence_walk_problem, slots_edge_problem, slots_problem, tokens_for,
)
from kvlab.model import forward

WALK_BLOCKS, WALK_BLOCK_SIZE = 6, 4

# (operation, {sequence: (length, refcount of each of its blocks)}, {held block: refcount}, num_free),
# walked in order on BlockPool(n_blocks=6, block_size=4). "step s 3" is paged_step with 3 new tokens.
SEQUENCE_WALK: tuple[tuple[str, dict[str, tuple[int, list[int]]], dict[str, int], int], ...] = (
    ("seq s", {"s": (0, [])}, {}, 6),
    ("reserve s 5", {"s": (0, [1, 1])}, {}, 4),
    ("reserve s 8", {"s": (0, [1, 1])}, {}, 4),  # 8 tokens fit exactly in two blocks of 4
    ("step s 3", {"s": (3, [1, 1])}, {}, 4),
    ("reserve s 6", {"s": (3, [1, 1, 1])}, {}, 3),  # 3 stored + 6 = 9 tokens: three blocks
    ("seq t", {"s": (3, [1, 1, 1]), "t": (0, [])}, {}, 3),
    ("step t 4", {"s": (3, [1, 1, 1]), "t": (4, [1])}, {}, 2),
    ("step t 1", {"s": (3, [1, 1, 1]), "t": (5, [1, 1])}, {}, 1),  # the fifth token opens a block
    ("hold s 1 as h", {"s": (3, [1, 2, 1]), "t": (5, [1, 1])}, {"h": 2}, 1),
    # 5 + 8 = 13 tokens need two more blocks and one is free: the first allocate succeeds, then none.
    ("reserve t 8 -> OutOfBlocks", {"s": (3, [1, 2, 1]), "t": (5, [1, 1])}, {"h": 2}, 1),
    ("free s", {"s": (0, []), "t": (5, [1, 1])}, {"h": 1}, 3),
    ("step s 9", {"s": (9, [1, 1, 1]), "t": (5, [1, 1])}, {"h": 1}, 0),
    ("step t 4 -> OutOfBlocks", {"s": (9, [1, 1, 1]), "t": (5, [1, 1])}, {"h": 1}, 0),
    ("drop h", {"s": (9, [1, 1, 1]), "t": (5, [1, 1])}, {"h": 0}, 1),
    ("step t 4", {"s": (9, [1, 1, 1]), "t": (9, [1, 1, 1])}, {}, 0),
    ("free t", {"s": (9, [1, 1, 1]), "t": (0, [])}, {}, 3),
    ("free s", {"s": (0, []), "t": (0, [])}, {}, 6),
)


@pytest.mark.task("paged_sequence", points=2.4)
def test_sequence_walk(student: Any) -> None:
    problem = sequence_walk_problem(student, SEQUENCE_WALK, WALK_BLOCKS, WALK_BLOCK_SIZE, reveal=False)
    assert problem is None, problem
    # After the walk's frees: the order of free's decrefs, on more blocks than the public test's.
    problem = free_order_problem(student, 5, 2)
    assert problem is None, problem


@pytest.mark.task("paged_sequence", points=0.8)
@pytest.mark.parametrize("held", [0, 1], ids=["new_sequence", "sequence_with_a_block"])
def test_reserve_is_all_or_nothing(student: Any, held: int) -> None:
    pool = student.paged_kv.BlockPool(CFG, 4, 2)
    other = student.paged_kv.PagedSequence(pool)
    other.reserve(2)
    seq = student.paged_kv.PagedSequence(pool)
    seq.reserve(2 * held)
    before, free = list(seq.blocks), pool.num_free
    # 7 tokens need 4 blocks; the pool has 3 - held free, so some allocations succeed before it runs out.
    what = f"reserve(7) on a sequence holding {held} block(s) of 2 slots with {free} free blocks"
    problem = raise_problem(what, functools.partial(seq.reserve, 7), student.paged_kv.OutOfBlocks,
                            "when the pool runs out, reserve must re-raise the pool's OutOfBlocks")
    assert problem is None, problem
    after = list(seq.blocks)
    assert after == before, (
        f"after a failed {what}, seq.blocks is {after}; expected {before}. reserve is all or nothing: give back "
        "the blocks this call allocated and leave blocks as it was"
    )
    assert pool.num_free == free, (
        f"after a failed {what}, num_free is {pool.num_free}; expected {free}. reserve is all or nothing: "
        "decref every block this call allocated before re-raising"
    )


@pytest.mark.task("paged_sequence", points=0.8)
def test_slots_across_block_boundaries(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 8, 4)
    a, b = student.paged_kv.PagedSequence(pool), student.paged_kv.PagedSequence(pool)
    # Interleaved growth, so neither sequence's blocks are consecutive ids; a stores 3 tokens.
    student.call("kvlab.paged:paged_step", params(), CFG, [a], [tokens_for(3, seed=1)])
    b.reserve(4)
    a.reserve(5)
    b.reserve(12)
    checks = {"a": (a, 2, (2, 5), (0, 8), (6, 3)), "b": (b, 3, (3, 6), (11, 1), (12, 1))}
    for name, (seq, n_held, *cases) in checks.items():
        blocks, length = list(seq.blocks), seq.length
        assert len(blocks) == n_held, (
            f"sequence {name} holds {blocks} after its reserves; expected {n_held} blocks of 4: reserve allocates until "
            "len(blocks) * block_size >= length + n"
        )
        for start, n in cases:
            what = f"{name}.slots({start}, {n}) with {name}.blocks = {blocks} (block_size 4, length {length})"
            call = functools.partial(seq.slots, start, n)
            if start + n > 4 * len(blocks):
                problem = raise_problem(what, call, ValueError,
                                        f"positions {start} .. {start + n - 1} are beyond the reserved "
                                        f"{4 * len(blocks)} slots: slots must raise ValueError")
            else:
                result, error = outcome(call)
                problem = f"{what} raised {describe_error(error)}" if error else slots_problem(
                    what, result, blocks, start, n, 4, length)
            assert problem is None, problem


@pytest.mark.task("paged_sequence", points=0.8)
@pytest.mark.parametrize("block_size", [1, 16, 64])
def test_paged_logits_equal_dense(student: Any, block_size: int) -> None:
    weights = params()
    prompts = [tokens_for(37, seed=2), tokens_for(23, seed=3)]
    n_decode = 3
    n_blocks = sum(-(-(len(p) + n_decode) // block_size) for p in prompts) + 2
    pool = student.paged_kv.BlockPool(CFG, n_blocks, block_size)
    seqs = [student.paged_kv.PagedSequence(pool) for _ in prompts]
    # Both prompts go through one paged_step, so their blocks interleave in the pool.
    feed = prompts
    full = [p.copy() for p in prompts]
    for step in range(n_decode + 1):
        stage = "the prefill" if step == 0 else f"decode step {step}"
        got, error = outcome(functools.partial(student.call, "kvlab.paged:paged_step", weights, CFG, seqs, feed))
        assert error is None, (
            f"paged_step at {stage} (block_size {block_size}) raised {describe_error(error)}. Likely cause: paged_step "
            "calls seq.reserve(T), then seq.slots(seq.length, T) and seq.slots(0, seq.length + T): reserve must make "
            "room for length + T tokens and slots must map exactly the positions asked for"
        )
        expected = [forward(weights, CFG, tokens[None])[0, -len(new):] for tokens, new in zip(full, feed)]
        for index, (logits, want) in enumerate(zip(got, expected)):
            what = (f"paged_step logits of sequence {index} (prompt of {len(prompts[index])} tokens, block_size "
                    f"{block_size}) at {stage}")
            problem = paged_logits_problem(what, logits, want, None if step == 0 else step)
            assert problem is None, problem
        # The next token is the reference's greedy choice, so every submission decodes the same tokens.
        feed = [np.array([int(want[-1].argmax())]) for want in expected]
        full = [np.concatenate([tokens, new]) for tokens, new in zip(full, feed)]
    lengths = [seq.length for seq in seqs]
    want_lengths = [len(p) + n_decode for p in prompts]
    assert lengths == want_lengths, f"after the prefill and {n_decode} decode steps the lengths are {lengths}; expected {want_lengths}"


@pytest.mark.task("paged_sequence", points=0.8)
def test_slots_edges(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 5, 3)
    seq = student.paged_kv.PagedSequence(pool)
    problem = slots_edge_problem("a new sequence (no block, block_size 3)", seq, [])
    assert problem is None, problem
    student.call("kvlab.paged:paged_step", params(), CFG, [seq], [tokens_for(7, seed=5)])
    blocks = list(seq.blocks)
    problem = slots_edge_problem(f"a sequence of length 7 holding blocks {blocks} (block_size 3)", seq, blocks)
    assert problem is None, problem


@pytest.mark.task("paged_sequence", points=1.6)
def test_sequence_state_machine(student: Any) -> None:
    run_state_machine_as_test(pool_machine(student, with_sequences=True), settings=MACHINE_SETTINGS)


# Generated reserve / paged_step / slots / free calls with the edge arguments the stub names
# (conformance_checks.py), more and longer sequences than the public run.
@pytest.mark.task("paged_sequence", points=2)
def test_generated_calls_match_the_rules(student: Any) -> None:
    run_machine(pool_machine_conformance(student, with_sequences=True), HIDDEN_SETTINGS)
