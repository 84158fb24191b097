"""Public tests of PagedSequence (task paged_sequence). Run: make test TASK=paged_sequence.

Position p of a sequence lives in block blocks[p // block_size] at offset p % block_size; reserve
allocates until len(blocks) * block_size >= length + n.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY, forward, init_params
from kvlab.testing import array_difference


@pytest.mark.task("paged_sequence", points=1)
def test_reserve_slots_free(student: Any) -> None:
    pool = student.paged_kv.BlockPool(TINY, 4, 4)
    seq = student.paged_kv.PagedSequence(pool)
    seq.reserve(6)
    blocks = list(seq.blocks)
    assert len(blocks) == 2 and pool.num_free == 2, (
        f"reserve(6) with block_size 4 should take 2 blocks; the sequence holds {blocks}, num_free is {pool.num_free}"
    )
    ids, offsets = (np.asarray(a).tolist() for a in seq.slots(2, 4))
    expected = ([blocks[0], blocks[0], blocks[1], blocks[1]], [2, 3, 0, 1])
    assert (ids, offsets) == expected, (
        f"slots(2, 4) should give blocks {expected[0]} and offsets {expected[1]}; got {ids} and {offsets}"
    )
    seq.free()
    assert (list(seq.blocks), seq.length, pool.num_free) == ([], 0, 4), (
        f"after free() expected blocks [], length 0 and 4 free blocks; got {list(seq.blocks)}, {seq.length}, "
        f"{pool.num_free}"
    )


@pytest.mark.task("paged_sequence", points=1)
def test_paged_step_matches_forward(student: Any) -> None:
    params = init_params(TINY, seed=0)
    prompt = np.random.default_rng(0).integers(0, TINY.vocab, size=10)
    pool = student.paged_kv.BlockPool(TINY, 4, 4)
    seq = student.paged_kv.PagedSequence(pool)
    logits = student.call("kvlab.paged:paged_step", params, TINY, [seq], [prompt])[0]
    problem = array_difference("paged_step logits of a 10-token prompt (block_size 4)", logits,
                               forward(params, TINY, prompt[None])[0])
    assert problem is None, problem
    assert seq.length == 10, f"after paged_step of 10 tokens seq.length should be 10; got {seq.length}"
