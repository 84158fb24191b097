"""Public tests of hit_ratio (task hit_ratio). Run: make test TASK=hit_ratio.

Block size 4. Request 1 repeats request 0: all 3 blocks match, but it has only 10 tokens, so 10
hit. Request 2 shares its first block: 4 tokens. Request 3 shares two blocks: 8. 22 of 35 tokens.
"""
from __future__ import annotations

from typing import Any

import pytest

from kvlab.trace import Request

TRACE = [
    Request(0.0, 10, 1, (1, 2, 3)),
    Request(1.0, 10, 1, (1, 2, 3)),
    Request(2.0, 6, 1, (1, 5)),
    Request(3.0, 9, 1, (1, 2, 4)),
]


@pytest.mark.task("hit_ratio", points=1)
def test_small_trace(student: Any) -> None:
    got = student.prefix_cache.hit_ratio(TRACE, None, "lru", block_size=4)
    assert got == 22 / 35, f"hit_ratio of the 4-request trace (block_size 4, unlimited) should be 22/35; got {got!r}"
