"""Public tests of block_hashes (task block_hashes). Run: make test TASK=block_hashes.

One lowercase hex SHA-256 digest per full block; digest i covers every token of blocks 0 .. i.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest


@pytest.mark.task("block_hashes", points=1)
def test_one_digest_per_full_block(student: Any) -> None:
    digests = student.prefix_cache.block_hashes(list(range(20)), 8)
    assert isinstance(digests, list) and len(digests) == 2, (
        f"20 tokens in blocks of 8 make 2 full blocks (the last 4 tokens get no digest); got {digests!r}"
    )
    for digest in digests:
        assert isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest), (
            f"each digest should be 64 lowercase hex characters (hashlib.sha256(...).hexdigest()); got {digest!r}"
        )


@pytest.mark.task("block_hashes", points=1)
def test_chained_and_dtype_independent(student: Any) -> None:
    block_hashes = student.prefix_cache.block_hashes
    tokens = list(range(16))
    changed = [99] + tokens[1:]
    before, after = block_hashes(tokens, 8), block_hashes(changed, 8)
    assert before[0] != after[0] and before[1] != after[1], (
        "changing a token of block 0 must change digest 0 and digest 1 too: digest i covers blocks 0 .. i"
    )
    assert block_hashes(np.array(tokens, dtype=np.int32), 8) == before, (
        "an int32 array of the same values must give the same digests as a list"
    )
