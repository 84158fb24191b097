"""Public tests of block_hashes (task block_hashes). Run: make test TASK=block_hashes.

One lowercase hex SHA-256 digest per full block; digest i covers every token of blocks 0 .. i. The
grader checks the same properties with the same diagnoses (prefix_checks.py and hash_properties.py,
in this folder) on other tokens and block sizes.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hash_properties import hashes_property
from kvlab.testing.conformance import run_given
from prefix_checks import (
    checked_hashes, digests_problem, distinct_prefixes_problem, every_token_problem, first_difference,
    negative_ids_problem,
)


@pytest.mark.task("block_hashes", points=0.9)
def test_one_digest_per_full_block(student: Any) -> None:
    for n in (0, 7, 8, 20):
        call = f"block_hashes(<{n} tokens>, 8)"
        problem = digests_problem(call, student.prefix_cache.block_hashes(list(range(n)), 8), n, 8)
        assert problem is None, problem
    signed = [-1, 4, -300, 2, 0, -7, 5, 1, -1, -1, 3, 9]
    problem = negative_ids_problem(student, f"block_hashes({signed}, 4)", signed, 4, [abs(t) for t in signed],
                                   "without their signs")
    assert problem is None, problem


@pytest.mark.task("block_hashes", points=0.9)
def test_chained_and_the_same_everywhere(student: Any) -> None:
    tokens = [int(t) for t in np.random.default_rng(30).integers(0, 100, size=16)]
    changed = [tokens[0] + 1] + tokens[1:]
    before, after = checked_hashes(student, tokens, 8), checked_hashes(student, changed, 8)
    assert before[0] != after[0] and before[1] != after[1], (
        "changing a token of block 0 must change digest 0 and digest 1 too. Likely cause: the digests are not "
        "chained: digest i must cover every token of blocks 0 .. i (hash the previous digest together with block i)"
    )
    as_int32 = checked_hashes(student, np.array(tokens, dtype=np.int32), 8)
    assert as_int32 == before, (
        f"block_hashes of the same 16 token values as an int32 array differs from the digests of a list (first "
        f"difference at digest {first_difference(as_int32, before)}). Likely cause: the bytes hashed depend on the "
        "dtype; convert the values to one fixed integer width and byte order first"
    )
    fresh = student.fresh_call("prefix_cache", "block_hashes", tokens, 8)
    assert list(fresh) == before, (
        "block_hashes gives different digests in a fresh process. Likely cause: Python's hash() of a str or bytes "
        "is salted per process (PYTHONHASHSEED) and so is anything derived from it: hash the bytes with "
        "hashlib.sha256 only"
    )


@pytest.mark.task("block_hashes", points=0.9)
def test_parent_continues_the_chain(student: Any) -> None:
    tokens = [int(t) for t in np.random.default_rng(31).integers(0, 1000, size=20)]
    a, b = tokens[:6], tokens[6:]
    whole, head = checked_hashes(student, a + b, 6), checked_hashes(student, a, 6)
    continued = checked_hashes(student, b, 6, parent=head[-1])
    at = first_difference(whole, head + continued)
    assert at is None, (
        f"block_hashes(a + b, 6) differs from block_hashes(a, 6) + block_hashes(b, 6, parent=block_hashes(a, 6)[-1]) "
        f"at digest {at} (len(a) = 6, len(b) = 14). Likely cause: the parent is ignored, or it does not seed the "
        "chain exactly as the previous block's digest does inside one call: digest i covers the previous digest "
        "(the parent for i = 0) and block i's tokens"
    )


@pytest.mark.task("block_hashes", points=0.9)
def test_every_token_of_a_block_counts(student: Any) -> None:
    tokens = np.random.default_rng(32).integers(0, 1000, size=3 * 5)
    problem = every_token_problem(student, tokens, 5)
    assert problem is None, problem
    # Different values that read alike when written one after the other: [1, 23] and [12, 3].
    pairs = [([1, 23, 4], [12, 3, 4]), ([5, 6, 7, 77, 7, 7], [5, 6, 7, 7, 77, 7])]
    problem = distinct_prefixes_problem(student, pairs, 3)
    assert problem is None, problem


# The stated properties on generated token lists (hash_properties.py): ids 0, negative and up to the
# int64 range, block sizes 1 to 5, with and without a parent.
@pytest.mark.task("block_hashes", points=0.5)
def test_generated_tokens_keep_the_properties(student: Any) -> None:
    run_given(hashes_property(student, max_examples=15))
