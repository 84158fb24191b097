"""Public tests of LRUCache and LFUCache (task eviction). Run: make test TASK=eviction."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.task("eviction", points=1)
def test_lru_evicts_least_recently_used(student: Any) -> None:
    cache = student.prefix_cache.LRUCache(2)
    cache.insert([1, 2])
    assert cache.match([1, 3]) == 1, "match([1, 3]) with 1 cached and 3 not should count 1 leading block"
    cache.insert([3])
    held = [block for block in (1, 2, 3) if block in cache]
    assert held == [1, 3], f"the match used 1, so inserting 3 evicts 2 (least recently used); the cache holds {held}"


@pytest.mark.task("eviction", points=1)
def test_lfu_evicts_least_frequently_used(student: Any) -> None:
    cache = student.prefix_cache.LFUCache(2)
    cache.insert([1, 2])
    cache.match([2])
    cache.match([1])
    cache.match([1])
    cache.insert([3])
    held = [block for block in (1, 2, 3) if block in cache]
    assert held == [1, 3], f"1 has 3 uses and 2 has 2, so inserting 3 evicts 2; the cache holds {held}"
