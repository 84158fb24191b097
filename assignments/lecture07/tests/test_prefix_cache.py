"""Public tests of PrefixCache (task prefix_cache). Run: make test TASK=prefix_cache.

The cache maps a block hash to a block and holds one reference to each block it caches.
"""
from __future__ import annotations

from typing import Any

import pytest

from kvlab.model import TINY

HASHES = ["aa" * 32, "bb" * 32, "cc" * 32]


@pytest.mark.task("prefix_cache", points=1)
def test_register_then_lookup(student: Any) -> None:
    pool = student.paged_kv.BlockPool(TINY, 4, 2)
    cache = student.prefix_cache.PrefixCache(pool)
    a, b = pool.allocate(), pool.allocate()
    cache.register(HASHES[:2], [a, b])
    assert (pool.refcount(a), pool.refcount(b), len(cache)) == (2, 2, 2), (
        "register must cache both hashes and incref each block once: expected refcounts 2, 2 and len 2; got "
        f"{pool.refcount(a)}, {pool.refcount(b)}, {len(cache)}"
    )
    found = list(cache.lookup(HASHES))
    assert found == [a, b], f"lookup of 3 hashes whose first 2 are cached should give [{a}, {b}]; got {found}"
    assert pool.refcount(a) == 2, f"lookup must not change refcounts; refcount({a}) is {pool.refcount(a)}, expected 2"


@pytest.mark.task("prefix_cache", points=1)
def test_clear_gives_back_the_references(student: Any) -> None:
    pool = student.paged_kv.BlockPool(TINY, 4, 2)
    cache = student.prefix_cache.PrefixCache(pool)
    block = pool.allocate()
    cache.register(HASHES[:1], [block])
    pool.decref(block)
    assert pool.num_free == 3, f"the cache's reference keeps the block in use: num_free should be 3; got {pool.num_free}"
    cache.clear()
    assert (len(cache), pool.num_free) == (0, 4), (
        f"after clear() the cache should be empty and every block free; got len {len(cache)}, num_free {pool.num_free}"
    )
